// Chaos run: an MCP host (the SDK's client) -> opledger-mcp -> our fault server.
// The server commits then hangs past the timeout, commits then drops the connection,
// is slow, or fails definitely; the gateway is SIGKILLed between the server's answer
// and the ledger update; the host re-sends every call once or twice (some of them
// while the first is still running) and keeps re-sending until it has a final answer.
//
//   node dist/test/chaos.js                  CI size (CHAOS_INTENTS per tool, default 10)
//   CHAOS_SOAK_SECONDS=600 node dist/test/chaos.js   keep adding rounds for 10 minutes
//
// Invariants, checked against the effects the server appended to its file:
//   - put (idempotent_write, provider key) and send (non_idempotent_write, lookup):
//     every intent's effect happened exactly once (zero for an intent that finally failed);
//   - wire (irreversible, never approved): zero effects;
//   - the ledger converged: no pending / unknown / retryable operation left;
//   - opledger.metrics agrees with the effects counted;
//   - the gateway was SIGKILLed at least once (one kill is forced if chance made none).
// Prints its seed first and "N passed, M failed" last. CHAOS_SEED=N runs again with the
// same seed for the host's choices and the server's faults (which call meets which choice
// still depends on timing, and the gateway draws its kills itself).
//
// Timeouts are seconds, not tenths: a "slow" call commits after its sleep, so a call
// stalled past its timeout on a loaded machine (unknown, then a re-send whose lookup runs
// before that commit) would be a second effect the gateway cannot prevent, not a bug.

import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { connectHost, env, MAIN, opOf, pool, ROLES, SERVERS, sleep, sql, tmp, writeConfig, type Host } from './helpers.js';
import { seededRandom } from './fixtures/prng.js';

const run = promisify(execFile);
const INTENTS = Number(process.env.CHAOS_INTENTS ?? 10);
const SOAK_S = Number(process.env.CHAOS_SOAK_SECONDS ?? 0);
const KILL_P = process.env.CHAOS_KILL ?? '0.08';
const SEED = process.env.CHAOS_SEED !== undefined ? Number(process.env.CHAOS_SEED) >>> 0 : (Date.now() ^ (process.pid << 16)) >>> 0;

// The host's choices (re-send or not, the pauses) come from the seed.
const random = seededRandom(SEED);
const effectsFile = path.join(tmp, 'chaos-effects.jsonl');
const scope = `chaos-${process.pid}`;

const cfg = writeConfig('chaos', {
  server: 'chaos',
  scope,
  toolPrefix: 'chaos.',
  tools: {
    put: {
      effect: 'idempotent_write', guarantee: 'provider_key', timeout: '2s', lease: '3 seconds',
      backoffBase: '100 milliseconds', backoffMax: '500 milliseconds', maxAttempts: 20,
      idempotencyKey: { argument: 'idempotency_key' }, errorRetryable: true,
    },
    send: {
      effect: 'non_idempotent_write', guarantee: 'read_before_write', timeout: '2s', lease: '3 seconds',
      backoffBase: '100 milliseconds', backoffMax: '500 milliseconds', maxAttempts: 20,
      idempotencyKey: { argument: 'reference' }, errorRetryable: true,
      lookup: { tool: 'find_sent', arguments: { reference: '${operation_id}' }, found: '/found/0', providerRef: '/found/0/id' },
    },
    wire: { effect: 'irreversible', timeout: '2s' },
  },
});
const serverEnv = {
  EFFECTS_FILE: effectsFile, FAULT_SEED: String(SEED),
  FAULT_HANG: '0.12', FAULT_HANG_MS: '2600', FAULT_DROP: '0.08', FAULT_SLOW: '0.15', FAULT_SLOW_MS: '120', FAULT_FAIL: '0.08',
};

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) { passed++; console.log(`ok - ${name}`); } else { failed++; console.log(`not ok - ${name}${detail ? `: ${detail}` : ''}`); }
}

let host: Host | null = null;
/** Every gateway of the run (their stderr holds the kills they logged). */
const hosts: Host[] = [];
/** Gateways that went away without the run closing them (the kills). */
let restarts = 0;
/** The kill probability the next gateway gets (1 while a kill is being forced). */
let killP = KILL_P;
let connecting: Promise<Host> | null = null;
async function currentHost(): Promise<Host> {
  if (host) return host;
  if (!connecting) {
    connecting = connectHost({ config: cfg, server: ['node', SERVERS.fault], env: { ...serverEnv, OPLEDGER_MCP_FAULT_KILL_AFTER_CALL: killP, OPLEDGER_MCP_LOG_LEVEL: 'warn' } })
      .then((h) => {
        host = h; connecting = null; hosts.push(h);
        // The run's own close sets host to null first, so only a gateway that went away by itself counts.
        h.client.onclose = () => { if (host === h) { host = null; restarts++; killP = KILL_P; } };
        return h;
      }, (e) => { connecting = null; throw e; });
  }
  return connecting;
}
const kills = () => hosts.reduce((n, h) => n + h.stderr.filter((l) => l.includes('"fault_injection_sigkill"')).length, 0);

type Outcome = 'succeeded' | 'failed' | 'needs_approval' | 'gave_up';
const stats = { sends: 0, dropped: 0, decisions: {} as Record<string, number> };

async function sendOnce(tool: string, args: Record<string, unknown>): Promise<any | null> {
  stats.sends++;
  try {
    const h = await currentHost();
    const r: any = await h.client.callTool({ name: tool, arguments: args }, undefined, { timeout: 10_000 });
    const d = `${opOf(r)?.decision ?? 'none'}${r.isError ? ' (isError)' : ''}`;
    stats.decisions[d] = (stats.decisions[d] ?? 0) + 1;
    return r;
  } catch {
    stats.dropped++;   // the gateway was killed under this call (or the host timed out)
    return null;
  }
}

function final(tool: string, r: any): Outcome | null {
  if (!r) return null;
  const d = opOf(r)?.decision;
  if (d === 'needs_approval') return 'needs_approval';
  if (d === 'failed') return 'failed';
  if (!r.isError && (d === 'execute' || d === 'replay')) return 'succeeded';
  if (r.isError && d === 'execute' && tool === 'send' && /temporarily unavailable/.test(JSON.stringify(r.content))) return null;
  return null;
}

async function intent(tool: string, item: string): Promise<Outcome> {
  const args = tool === 'wire' ? { item, amount: 10 } : tool === 'put' ? { item, value: item.length } : { item, text: `hello ${item}` };
  const first = [sendOnce(tool, args)];
  if (random() < 0.5) first.push(sleep(30 + random() * 100).then(() => sendOnce(tool, args)));   // a re-send while it runs
  let outcome: Outcome | null = null;
  for (const r of await Promise.all(first)) outcome = outcome ?? final(tool, r);
  const deadline = Date.now() + 30_000;
  while (!outcome && Date.now() < deadline) {
    await sleep(150 + random() * 200);
    outcome = final(tool, await sendOnce(tool, args));
  }
  if (!outcome) return 'gave_up';
  // The host re-sends once or twice more after it has its answer.
  const extra = 1 + Math.floor(random() * 2);
  for (let i = 0; i < extra; i++) {
    const again = await sendOnce(tool, args);
    const o = final(tool, again);
    if (o && o !== outcome) return 'gave_up';
  }
  return outcome;
}

async function round(r: number): Promise<Record<string, Outcome>> {
  const out: Record<string, Outcome> = {};
  const items: Array<[string, string]> = [];
  for (let i = 0; i < INTENTS; i++) for (const t of ['put', 'send', 'wire']) items.push([t, `r${r}-${t}-${i}`]);
  // Two intents at a time.
  for (let i = 0; i < items.length; i += 2) {
    const batch = items.slice(i, i + 2);
    const res = await Promise.all(batch.map(([t, item]) => intent(t, item)));
    batch.forEach(([, item], k) => { out[item] = res[k]; });
  }
  return out;
}

async function main(): Promise<void> {
  console.log(`# seed ${SEED} (CHAOS_SEED=${SEED} runs with the same host choices and server faults)`);
  await sql('CREATE EXTENSION IF NOT EXISTS opledger');
  await run(process.execPath, [MAIN, 'register', '--config', cfg], { env: env({ PGUSER: ROLES.admin }) });
  const started = Date.now();
  const outcomes: Record<string, Outcome> = {};
  let r = 0;
  do {
    Object.assign(outcomes, await round(r++));
  } while (SOAK_S > 0 && Date.now() - started < SOAK_S * 1000);
  // Chance may have killed no gateway (about one run in five at CI size): then the next
  // gateway kills itself after the first call it forwards, and one more intent per
  // effectful tool runs through that kill and its recovery, like any other.
  const forced = kills() === 0 && KILL_P !== '0';
  if (forced) {
    if (host) { const h = host; host = null; await h.close().catch(() => {}); }
    killP = '1';
    for (const t of ['send', 'put']) outcomes[`forced-${t}-0`] = await intent(t, `forced-${t}-0`);
  }
  if (host) { const h = host; host = null; await h.close().catch(() => {}); }
  await sleep(1000);   // late answers of hanging calls

  // Converge what the host left (none, normally): the reconciler, then the sweeper.
  await sleep(3100);   // past the lease of the last kill
  await sql('SELECT opledger.op_sweep()');
  await run(process.execPath, [MAIN, 'reconcile', '--config', cfg, '--once', '--', 'node', SERVERS.fault],
    { env: env({ PGUSER: ROLES.reconciler, ...serverEnv, FAULT_HANG: '0', FAULT_DROP: '0', FAULT_SLOW: '0', FAULT_FAIL: '0' }) });

  const effects = fs.existsSync(effectsFile)
    ? fs.readFileSync(effectsFile, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l)) : [];
  const ops = await sql<{ operation_id: string; tool: string; item: string; status: string; attempt: number }>(
    "SELECT operation_id, tool, args->>'item' AS item, status::text AS status, attempt FROM opledger.operations WHERE tool LIKE 'chaos.%'");
  const byItem = new Map<string, typeof ops>();
  for (const o of ops) byItem.set(o.item, [...(byItem.get(o.item) ?? []), o]);
  const items = Object.keys(outcomes);
  console.log(`# ${items.length} intents, ${stats.sends} sends (${stats.dropped} lost with a killed gateway), ${kills()} gateway kills${forced ? ' (one forced)' : ''}, ${restarts} gateway restarts, ${effects.length} effects`);
  console.log(`# decisions seen by the host: ${JSON.stringify(stats.decisions)}`);
  console.log(`# outcomes: ${JSON.stringify(items.reduce((a: Record<string, number>, k) => { a[outcomes[k]] = (a[outcomes[k]] ?? 0) + 1; return a; }, {}))}`);

  check('every intent reached a final answer at the host', items.every((k) => outcomes[k] !== 'gave_up'),
    items.filter((k) => outcomes[k] === 'gave_up').join(', '));
  check('one operation per intent (the same ID across re-sends and gateway restarts)', items.every((k) => (byItem.get(k) ?? []).length === 1),
    items.filter((k) => (byItem.get(k) ?? []).length !== 1).map((k) => `${k}:${(byItem.get(k) ?? []).length}`).join(', '));
  const bad: string[] = [];
  for (const tool of ['put', 'send']) {
    for (const k of items.filter((x) => x.includes(`-${tool}-`))) {
      const op = (byItem.get(k) ?? [])[0];
      if (!op) continue;
      const n = effects.filter((e) => e.tool === tool && (tool === 'put' ? e.key === op.operation_id : e.reference === op.operation_id)).length;
      const want = op.status === 'succeeded' ? 1 : 0;
      if (n !== want) bad.push(`${k} ${op.status} effects=${n}`);
    }
  }
  check('idempotent and reconcilable tools: each intent took effect exactly once (0 if finally failed)', bad.length === 0, bad.join('; '));
  check('irreversible tool without approval: zero effects', effects.filter((e) => e.tool === 'wire').length === 0);
  check('irreversible operations all wait for approval', ops.filter((o) => o.tool === 'chaos.wire').every((o) => o.status === 'awaiting_approval'));
  const open = ops.filter((o) => o.tool !== 'chaos.wire' && !['succeeded', 'failed'].includes(o.status));
  check('the ledger converged (no pending, unknown or retryable operation)', open.length === 0, open.map((o) => `${o.item}:${o.status}`).join(', '));
  const m = (await sql('SELECT * FROM opledger.metrics'))[0];
  const effectful = effects.filter((e) => e.tool === 'put' || e.tool === 'send').length;
  check('metrics: ops_succeeded equals the effects counted', Number(m.ops_succeeded) === effectful, `ops_succeeded=${m.ops_succeeded} effects=${effectful}`);
  check('metrics: no duplicate effect detected, nothing unknown', Number(m.duplicate_effects_detected) === 0 && Number(m.ops_unknown) === 0,
    `duplicate_effects_detected=${m.duplicate_effects_detected} ops_unknown=${m.ops_unknown}`);
  check('metrics: duplicates prevented counted (re-sends answered without a run)', Number(m.duplicates_prevented) > 0, String(m.duplicates_prevented));
  check('the gateway was really killed during the run, and every gateway that went away was a kill', KILL_P === '0' || (kills() > 0 && restarts === kills()),
    `kills=${kills()} restarts=${restarts}`);
  await pool.end();
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.log(`not ok - chaos run crashed: ${(e as Error).stack}`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});

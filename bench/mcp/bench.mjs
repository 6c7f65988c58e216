// The latency opledger-mcp adds to a tools/call, against calling the server directly,
// in one run, with the two costs a gateway cannot avoid measured alone beside it:
//   direct    SDK client -> server
//   hop       SDK client -> bare forwarding proxy (same SDK transports, no ledger) -> server
//   ledger    op_begin + op_succeed through the TypeScript client (two durable commits), no MCP
//   ledger1   op_begin answered replay (one database round trip), no MCP
//   serial    hop and ledger one after the other in the host, no gateway: op_begin, the call through the bare
//             proxy, op_succeed (what the two unavoidable costs cost when they follow each other, with the
//             idle waits for the commits in between, as in a gateway)
//   fresh     SDK client -> opledger-mcp -> server, a new write each call (op_begin, call, op_succeed)
//   replay    SDK client -> opledger-mcp, the same write again (op_begin answers replay; the server is not called)
//   fresh_base, replay_base   the same through another build of the gateway (--base-gateway DIR: a
//             clients/mcp folder of another revision, built), against the same database, to compare
//             two gateways' code in one run
// Sides take turns in small batches (so load changes hit them alike).
//
//   node bench/mcp/bench.mjs [--calls 1000] [--batch 50] [--base-gateway DIR]
// Needs clients/mcp built (npm ci && npx tsc -p .) and a database with the extension
// available (PG* variables; it creates the extension if missing).
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import os from 'node:os';
import { sdk, MCP, ROOT } from './sdk.mjs';

const argv = process.argv.slice(2);
const optText = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const opt = (name, d) => { const t = optText(name); return t === undefined ? d : Number(t); };
const BASE_GATEWAY = optText('--base-gateway');
const CALLS = opt('--calls', 1000);
const BATCH = opt('--batch', 50);
const here = path.join(ROOT, 'bench/mcp');
const SERVER = ['node', path.join(here, 'echo-server.mjs')];

const { Client } = await sdk.client();
const { StdioClientTransport } = await sdk.clientStdio();
const pg = (await sdk.pg()).default;
const { Ledger } = await sdk.ledger();

async function connect(command, args, env = process.env) {
  const t = new StdioClientTransport({ command, args, env, stderr: 'ignore' });
  const c = new Client({ name: 'bench-host', version: '1' }, { capabilities: {} });
  await c.connect(t);
  return c;
}

const pool = new pg.Pool({ max: 2 });
await pool.query('CREATE EXTENSION IF NOT EXISTS opledger');
const ledger = new Ledger(pool);
await ledger.registerTool('bench.write', 'non_idempotent_write', { guarantee: 'none' });
await ledger.registerTool('bench.ledger', 'non_idempotent_write', { guarantee: 'none' });
const cfgFile = path.join(os.tmpdir(), `opledger-mcp-bench-${process.pid}.json`);
(await import('node:fs')).writeFileSync(cfgFile, JSON.stringify({ server: 'bench', toolPrefix: 'bench.', tools: { write: { effect: 'non_idempotent_write' } } }));

const direct = await connect(SERVER[0], SERVER.slice(1));
const hop = await connect('node', [path.join(here, 'bare-proxy.mjs'), '--', ...SERVER]);
const gw = await connect('node', [path.join(MCP, 'dist/src/main.js'), '--config', cfgFile, '--', ...SERVER],
  { ...process.env, OPLEDGER_MCP_LOG_LEVEL: process.env.OPLEDGER_MCP_LOG_LEVEL ?? 'info' });

const base = BASE_GATEWAY
  ? await connect('node', [path.join(path.resolve(BASE_GATEWAY), 'dist/src/main.js'), '--config', cfgFile, '--', ...SERVER],
    { ...process.env, OPLEDGER_MCP_LOG_LEVEL: process.env.OPLEDGER_MCP_LOG_LEVEL ?? 'info' })
  : undefined;

const run = `${process.pid}-${Date.now()}`;
let seq = 0;
const replayArgs = { n: -1, text: `replay-${run}` };
await gw.callTool({ name: 'write', arguments: replayArgs });
if (base) await base.callTool({ name: 'write', arguments: replayArgs });
const replayId = randomUUID();
await ledger.begin({ operationId: replayId, tool: 'bench.ledger', args: { r: 1 } });
await ledger.succeed(replayId, { ok: true });

const sides = {
  direct: () => direct.callTool({ name: 'write', arguments: { n: ++seq, text: run } }),
  hop: () => hop.callTool({ name: 'write', arguments: { n: ++seq, text: run } }),
  ledger: async () => {
    const id = randomUUID();
    const d = await ledger.begin({ operationId: id, tool: 'bench.ledger', args: { n: ++seq, text: run } });
    await ledger.succeed(id, { content: [{ type: 'text', text: 'ok' }] }, { attempt: d.attempt });
  },
  ledger1: () => ledger.begin({ operationId: replayId, tool: 'bench.ledger', args: { r: 1 } }),
  serial: async () => {
    const id = randomUUID();
    const args = { n: ++seq, text: run };
    const d = await ledger.begin({ operationId: id, tool: 'bench.ledger', args });
    const r = await hop.callTool({ name: 'write', arguments: args });
    await ledger.succeed(id, r, { attempt: d.attempt });
  },
  fresh: () => gw.callTool({ name: 'write', arguments: { n: ++seq, text: run } }),
  replay: () => gw.callTool({ name: 'write', arguments: replayArgs }),
  ...(base ? {
    fresh_base: () => base.callTool({ name: 'write', arguments: { n: ++seq, text: run } }),
    replay_base: () => base.callTool({ name: 'write', arguments: replayArgs }),
  } : {}),
};
const times = Object.fromEntries(Object.keys(sides).map((k) => [k, []]));

// Warm-up.
for (const f of Object.values(sides)) for (let i = 0; i < 30; i++) await f();
const names = Object.keys(sides);
for (let done = 0, turn = 0; done < CALLS; done += BATCH, turn++) {
  const order = names.map((_, i) => names[(i + turn) % names.length]);   // rotate who goes first
  for (const k of order) {
    for (let i = 0; i < BATCH; i++) {
      const t0 = process.hrtime.bigint();
      await sides[k]();
      times[k].push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
}

const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const p50 = Object.fromEntries(names.map((k) => [k, pct(times[k], 0.5)]));
const p99 = Object.fromEntries(names.map((k) => [k, pct(times[k], 0.99)]));
const f = (x) => x.toFixed(3).padStart(8);
console.log(`calls per side: ${times.direct.length}, batch ${BATCH}, node ${process.version}, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
console.log('side          p50 ms    p99 ms');
for (const k of names) console.log(`${k.padEnd(10)} ${f(p50[k])} ${f(p99[k])}`);
const hopCost = p50.hop - p50.direct;
const freshAdded = p50.fresh - p50.direct;
const replayAdded = p50.replay - p50.direct;
console.log('');
console.log(`hop (bare proxy - direct), p50:                   ${f(hopCost)} ms`);
console.log(`ledger (op_begin + op_succeed), p50:              ${f(p50.ledger)} ms`);
console.log(`fresh write: gateway adds over direct, p50:       ${f(freshAdded)} ms  (p99 ${f(p99.fresh - p99.direct)})`);
console.log(`  beyond hop + ledger, p50:                       ${f(freshAdded - hopCost - p50.ledger)} ms  (goal <= 1 ms)`);
console.log(`  beyond serial (hop then ledger, no gateway), p50: ${f(p50.fresh - p50.serial)} ms  (serial is ${f(p50.serial - p50.hop - p50.ledger)} ms beyond hop + ledger)`);
console.log(`replay: gateway adds over direct, p50:            ${f(replayAdded)} ms  (p99 ${f(p99.replay - p99.direct)})`);
console.log(`  beyond hop + one round trip (ledger1), p50:     ${f(replayAdded - hopCost - p50.ledger1)} ms`);
console.log(`ratio fresh/direct p50: ${(p50.fresh / p50.direct).toFixed(2)}, replay/direct p50: ${(p50.replay / p50.direct).toFixed(2)}`);
if (base) {
  console.log(`this gateway against the base gateway (${BASE_GATEWAY}), same run:`);
  console.log(`  fresh  p50 ${f(p50.fresh)} vs ${f(p50.fresh_base)} ms: ratio ${(p50.fresh / p50.fresh_base).toFixed(3)}, difference ${f(p50.fresh - p50.fresh_base)} ms`);
  console.log(`  replay p50 ${f(p50.replay)} vs ${f(p50.replay_base)} ms: ratio ${(p50.replay / p50.replay_base).toFixed(3)}, difference ${f(p50.replay - p50.replay_base)} ms`);
}
await Promise.all([direct.close(), hop.close(), gw.close(), ...(base ? [base.close()] : [])]);
await pool.end();
(await import('node:fs')).rmSync(cfgFile, { force: true });

'use strict';
// opledger chaos harness - the orchestrator.
//
// Starts its own PostgreSQL cluster, three fake providers (separate processes,
// HTTP on 127.0.0.1), N worker processes running executeOnce against the
// ledger, and reconciler processes; feeds the workers jobs like a message
// queue with at-least-once delivery (duplicates, hot IDs raced by every
// worker, late redeliveries); injects seeded faults (provider commits then the
// response is dropped/delayed, worker SIGKILL between provider call and ledger
// update, pg_terminate_backend, pg_ctl -m immediate + restart); then checks
// that every external effect happened exactly once and the ledger converged
// and can be read back in order.  Exit status 0 only if every check passed.
//
//   node chaos.js --seed 42 --ops 3000 [--workers 8] [--reconcilers 2]
//                 [--restarts 2] [--max-seconds 240] [--bypass ledger|blind] [--keep]

const fs = require('node:fs');
const path = require('node:path');
const { fork, spawn } = require('node:child_process');
const readline = require('node:readline');
const { makeRng, sleep, PgConn, percentile, httpJson } = require('./lib/common');
const { TOOLS } = require('./lib/tools');
const { Cluster, makeTempBase } = require('./lib/cluster');

// ------------------------------------------------------------------ options
function parseArgs(argv) {
  const o = { seed: null, ops: 3000, workers: 8, reconcilers: 2, restarts: null, maxSeconds: 0,
    leaseMs: 1500, clientTimeoutMs: 250, bypass: process.env.CHAOS_BYPASS || '', keep: false,
    manualPercent: 5, killEveryMs: 2500, terminateEveryMs: 1200, summary: null };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    switch (a) {
      case '--seed': o.seed = Number(v()); break;
      case '--ops': o.ops = Number(v()); break;
      case '--workers': o.workers = Number(v()); break;
      case '--reconcilers': o.reconcilers = Number(v()); break;
      case '--restarts': o.restarts = Number(v()); break;
      case '--max-seconds': o.maxSeconds = Number(v()); break;
      case '--lease-ms': o.leaseMs = Number(v()); break;
      case '--client-timeout-ms': o.clientTimeoutMs = Number(v()); break;
      case '--bypass': o.bypass = v(); break;
      case '--keep': o.keep = true; break;
      case '--summary': o.summary = v(); break;
      case '-h': case '--help':
        console.log('usage: node chaos.js [--seed N] [--ops N] [--workers N] [--reconcilers N] [--restarts N] [--max-seconds N] [--lease-ms N] [--client-timeout-ms N] [--bypass ledger|blind] [--keep] [--summary file.json]');
        process.exit(0);
      // falls through
      default: console.error('unknown argument ' + a); process.exit(2);
    }
  }
  if (o.seed == null || Number.isNaN(o.seed)) o.seed = (Date.now() ^ (process.pid << 8)) >>> 0;
  if (!o.maxSeconds) o.maxSeconds = Math.ceil(90 + o.ops * 0.06);
  if (o.restarts == null) o.restarts = Math.max(2, Math.round(o.ops / 5000));   // a server crash every ~5000 ops
  if (!['', 'ledger', 'blind'].includes(o.bypass)) { console.error('--bypass must be ledger or blind'); process.exit(2); }
  return o;
}
const opt = parseArgs(process.argv);
const T0 = Date.now();
const log = (...a) => console.log(`[chaos +${((Date.now() - T0) / 1000).toFixed(1)}s]`, ...a);

// ------------------------------------------------------------------ plan (seeded)
const rng = makeRng(opt.seed);
function makePlan() {
  const ops = [];
  for (let n = 0; n < opt.ops; n++) {
    const tool = rng.weighted([['payments.charge', 50], ['crm.create_ticket', 25], ['payouts.send', 10], ['accounts.balance', 15]]);
    const id = `op-${opt.seed}-${String(n).padStart(6, '0')}`;
    const secret = `SECRET${rng.int(100000000, 999999999)}`;
    let args;
    switch (tool) {
      case 'payments.charge':
        args = { amount: rng.int(100, 99999), currency: 'EUR', customer: `cus_${rng.int(1, 500)}`, card: { last4: String(rng.int(1000, 9999)), cvc: secret } };
        break;
      case 'payouts.send':
        args = { amount: rng.int(1000, 500000), currency: 'EUR', iban: `DE${rng.int(10000000, 99999999)}`, reference: `PAYOUT-${opt.seed}-${n}` };
        break;
      case 'crm.create_ticket':
        args = { reference: `ORD-${opt.seed}-${n}`, subject: `refund request ${n}`, customer: `cus_${rng.int(1, 500)}` };
        break;
      default:
        args = { account: `acct_${rng.int(1, 300)}` };
    }
    const isWrite = tool !== 'accounts.balance';
    const faults = {}, workerFaults = {};
    for (let a = 1; a <= 3; a++) {
      const scale = a === 1 ? 1 : 0.5;
      faults[a] = isWrite
        ? rng.weighted([['none', 60], ['commit_drop', 10 * scale], ['commit_delay', 8 * scale], ['slow_no_commit', 6 * scale], ['unavailable', 6 * scale]])
        : rng.weighted([['none', 75], ['commit_delay', 8 * scale], ['commit_drop', 7 * scale], ['unavailable', 5 * scale]]);
      workerFaults[a] = rng.weighted([['none', 100], ['kill_after_call', 2 * scale], ['kill_before_call', 0.7 * scale], ['terminate_backend', 3 * scale]]);
      if (workerFaults[a] === 'none') delete workerFaults[a];
      if (faults[a] === 'none') delete faults[a];
    }
    // a definite, permanent refusal at attempt 1 for a few writes (expect failed, 0 effects)
    if ((tool === 'payments.charge' || tool === 'crm.create_ticket') && rng.chance(0.03)) faults[1] = 'decline';
    const approve = tool === 'payouts.send' ? rng.chance(0.7) : null;
    const dup = rng.weighted([[0, 75], [1, 18], [2, 5], ['hot', 2]]);
    const lateDup = rng.chance(0.10);
    const releaseAt = Math.floor(rng.next() * 1000);   // spread arrivals a little
    ops.push({ n, id, tool, args, faults, workerFaults, approve, dup, lateDup, releaseAt, secret,
      conversation: `conv-${opt.seed}-${Math.floor(n / 7)}`,
      state: 'new', inflight: 0, nextDelay: 0, deliveries: 0, naDeliveries: 0, lateSent: false, lateOutstanding: 0,
      approvalState: null, finalStatus: null, lateReplies: [] });
  }
  return ops;
}

// ------------------------------------------------------------------ process bookkeeping
const children = new Set();
let cluster = null, baseDir = null, ending = false;
function killAll() {
  for (const p of children) { try { p.kill('SIGKILL'); } catch (_) { /* gone */ } }
  children.clear();
}
function cleanup() {
  killAll();
  if (cluster) { cluster.stopSync(); }
  if (baseDir && !opt.keep) { try { fs.rmSync(baseDir, { recursive: true, force: true }); } catch (_) { /* ignore */ } }
  else if (baseDir) console.log(`[chaos] kept ${baseDir}`);
}
let cleaned = false;
function cleanupOnce() { if (!cleaned) { cleaned = true; cleanup(); } }
process.on('exit', cleanupOnce);
for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => { console.error(`[chaos] ${s}, cleaning up`); cleanupOnce(); process.exit(130); });
process.on('uncaughtException', (e) => { console.error('[chaos] uncaught', e); cleanupOnce(); process.exit(3); });
process.on('unhandledRejection', (e) => { console.error('[chaos] unhandled rejection', e); cleanupOnce(); process.exit(3); });

function startProvider(mode, storeFile) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(__dirname, 'provider.js'), mode, storeFile], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.add(p);
    const rl = readline.createInterface({ input: p.stdout });
    const t = setTimeout(() => reject(new Error('provider ' + mode + ' did not start')), 10000);
    rl.on('line', (line) => { const m = line.match(/^LISTENING (\d+)/); if (m) { clearTimeout(t); resolve({ proc: p, port: Number(m[1]) }); } });
    p.on('exit', (code) => { children.delete(p); if (!ending) { console.error(`[chaos] provider ${mode} exited (${code})`); } });
  });
}

// ------------------------------------------------------------------ main
async function main() {
  const plan = makePlan();
  const counts = plan.reduce((m, o) => { m[o.tool] = (m[o.tool] || 0) + 1; return m; }, {});
  console.log(`chaos: seed=${opt.seed} ops=${opt.ops} workers=${opt.workers} reconcilers=${opt.reconcilers} restarts=${opt.restarts} lease=${opt.leaseMs}ms client_timeout=${opt.clientTimeoutMs}ms${opt.bypass ? ' BYPASS=' + opt.bypass + ' (negative control: checks must fail)' : ''}`);
  console.log(`chaos: reproduce with: tests/chaos/run.sh --seed ${opt.seed} --ops ${opt.ops}${opt.bypass ? ' --bypass ' + opt.bypass : ''}`);
  console.log('chaos: plan', JSON.stringify(counts));

  baseDir = makeTempBase();
  cluster = new Cluster(baseDir);
  log('initdb + start cluster in', baseDir);
  await cluster.init();
  // tell run.sh where the cluster lives, so its trap can stop it even if we are SIGKILLed
  if (process.env.CHAOS_STATE_FILE) fs.writeFileSync(process.env.CHAOS_STATE_FILE, `${cluster.data}\n${baseDir}\n`);
  const pgcfg = cluster.pgConfig();
  const admin = new PgConn(pgcfg, 'chaos-orchestrator', { reconnectBudgetMs: 90000, statementTimeoutMs: 300000 });
  if (process.env.CHAOS_LEDGER_SQL) {
    // harness self-test only: load a stand-in ledger from a SQL file instead of the extension
    log('WARNING: CHAOS_LEDGER_SQL set - using', process.env.CHAOS_LEDGER_SQL, 'instead of CREATE EXTENSION opledger');
    await admin.query(fs.readFileSync(process.env.CHAOS_LEDGER_SQL, 'utf8'));
  } else {
    await admin.query('CREATE EXTENSION opledger');
  }
  // separate sessions for the human approver and the chaos monkey, so neither waits on the other
  const approverDb = new PgConn(pgcfg, 'chaos-approver', { reconnectBudgetMs: 90000 });
  const chaosDb = new PgConn(pgcfg, 'chaos-monkey', { reconnectBudgetMs: 5000 });
  const L = `${opt.leaseMs} milliseconds`;
  for (const [tool, t] of Object.entries(TOOLS)) {
    await admin.query(
      `SELECT opledger.register_tool($1, $2::opledger.tool_effect, guarantee => $3, max_attempts => 10, lease => $4::interval,
              backoff_base => '20 milliseconds'::interval, backoff_max => '400 milliseconds'::interval,
              hash_exclude => $5::text[], redact => $6::text[])`,
      [tool, t.effect, t.guarantee, L, ['/trace_id'], tool === 'payments.charge' ? ['/card/cvc'] : []]);
  }
  log(`cluster on 127.0.0.1:${cluster.port}; extension created; tools registered`);

  const stores = { payments: path.join(baseDir, 'payments.jsonl'), tickets: path.join(baseDir, 'tickets.jsonl'), readonly: path.join(baseDir, 'readonly.jsonl') };
  const ports = {};
  for (const m of Object.keys(stores)) ports[m] = (await startProvider(m, stores[m])).port;
  log('providers', JSON.stringify(ports));

  // ---------------- counters
  const C = { deliveries: 0, duplicate_deliveries: 0, hot_deliveries: 0, late_deliveries: 0, worker_kills_chaos: 0,
    worker_deaths: 0, backend_terminations: 0, restarts: 0, approvals: 0, approvals_uncertain: 0, reapprovals: 0,
    decisions: {}, report_conn_lost: 0, report_stale: 0, report_errors: 0, unknown_marked: 0, begin_conn_lost: 0,
    provider_calls: 0, rbw_found: 0, replies: 0, worker_errors: [], resolved_manual: 0, resolve_uncertain_manual: 0, timing: {} };

  // ---------------- workers
  const workers = [];
  let deliverySeq = 0;
  const deliveries = new Map();   // deliveryId -> {op, late, worker}
  function spawnWorker(idx) {
    const name = `w${idx}`;
    const wcfg = { name, pg: pgcfg, ports, leaseMs: opt.leaseMs, clientTimeoutMs: opt.clientTimeoutMs, reconnectBudgetMs: 60000 };
    const p = fork(path.join(__dirname, 'worker.js'), [], { env: Object.assign({}, process.env, { CHAOS_WORKER_CFG: JSON.stringify(wcfg), CHAOS_BYPASS: opt.bypass }), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.add(p);
    p.on('error', () => { /* EPIPE on a dying worker: its exit handler requeues */ });
    const w = { idx, name, proc: p, outstanding: new Set(), alive: true };
    workers[idx] = w;
    p.on('message', (m) => onWorkerMessage(w, m));
    p.on('exit', () => {
      children.delete(p);
      w.alive = false;
      if (ending) return;
      C.worker_deaths++;
      for (const d of [...w.outstanding]) onReply(w, { deliveryId: d, outcome: 'later', delayMs: 300, why: 'worker_died' });
      setTimeout(() => { if (!ending) spawnWorker(idx); }, 30);
    });
  }
  for (let i = 0; i < opt.workers; i++) spawnWorker(i);

  // ---------------- reconcilers
  const recCounters = {};
  const reconcilers = [];
  for (let i = 0; i < opt.reconcilers; i++) {
    const name = `r${i}`;
    const rcfg = { name, pg: pgcfg, ports, seed: opt.seed, manualPercent: opt.manualPercent, claimMs: 3000, pollMs: 150, reconnectBudgetMs: 60000 };
    const p = fork(path.join(__dirname, 'reconciler.js'), [], { env: Object.assign({}, process.env, { CHAOS_RECONCILER_CFG: JSON.stringify(rcfg), CHAOS_BYPASS: opt.bypass }), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.add(p);
    p.on('error', () => {});
    p.on('message', (m) => {
      if (m.type === 'counters') recCounters[name] = m.counters;
      else if (m.type === 'resolved' && m.manual) C.resolved_manual++;
      else if (m.type === 'resolve_uncertain' && m.manual) C.resolve_uncertain_manual++;
    });
    p.on('exit', () => { children.delete(p); });
    reconcilers.push({ name, proc: p });
  }

  // ---------------- the queue
  const waiting = [];     // {op, at, late}
  const readyQ = [];
  // Bounded intake, like a queue consumer with a prefetch limit: at most
  // `window` logical operations are open at once; retries of open ops are
  // never starved behind thousands of new ones.
  const window = Math.max(16, opt.workers * 6);
  let released = 0;
  function releaseMore() {
    while (released < plan.length && released - finished < window) {
      const op = plan[released++];
      op.state = 'waiting'; waiting.push({ op, at: Date.now() + (op.releaseAt % 50), late: false });
    }
  }
  let finished = 0;
  const finishedTarget = plan.length;
  const violations = [];

  function schedule(op, delayMs, late = false) { waiting.push({ op, at: Date.now() + delayMs, late }); if (!late) op.state = 'waiting'; }

  function deliver(op, w, late) {
    const id = ++deliverySeq;
    deliveries.set(id, { op, late, worker: w });
    w.outstanding.add(id);
    C.deliveries++;
    if (late) op.lateOutstanding++; else op.inflight++;
    op.deliveries++;
    const args = Object.assign({}, op.args, { trace_id: `t-${id}` });   // per-delivery noise, hash_excluded
    // if the worker died meanwhile, its exit handler requeues everything it held
    try { w.proc.send({ type: 'job', deliveryId: id, op: { id: op.id, tool: op.tool, conversation: op.conversation, faults: op.faults, workerFaults: op.workerFaults }, args }, () => {}); } catch (_) { /* exit handler requeues */ }
  }

  function aliveWorkers() { return workers.filter((w) => w && w.alive && w.proc.connected); }

  function dispatch() {
    releaseMore();
    const now = Date.now();
    for (let i = waiting.length - 1; i >= 0; i--) {
      if (waiting[i].at <= now) { readyQ.push(waiting[i]); waiting.splice(i, 1); }
    }
    while (readyQ.length) {
      const alive = aliveWorkers();
      if (!alive.length) return;
      alive.sort((a, b) => a.outstanding.size - b.outstanding.size);
      if (alive[0].outstanding.size >= 2) return;
      const { op, late } = readyQ.shift();
      if (late) { C.late_deliveries++; deliver(op, alive[0], true); continue; }
      if (op.state === 'done' || op.state === 'parked') continue;
      op.state = 'inflight';
      op.nextDelay = 0;
      let copies = 1;
      if (op.dup === 'hot' && op.deliveries === 0) { copies = alive.length; C.hot_deliveries++; }
      else if (typeof op.dup === 'number' && op.deliveries === 0) copies = 1 + op.dup;
      else if (rng.chance(0.05)) copies = 2;   // occasional redelivery race later on too
      copies = Math.min(copies, alive.length);
      for (let k = 0; k < copies; k++) { deliver(op, alive[k], false); if (k > 0) C.duplicate_deliveries++; }
    }
  }

  function mergeCounters(c) {
    if (!c) return;
    for (const k of ['report_conn_lost', 'report_stale', 'report_errors', 'unknown_marked', 'begin_conn_lost', 'provider_calls', 'rbw_found']) C[k] += c[k] || 0;
    for (const [d, n] of Object.entries(c.decisions || {})) C.decisions[d] = (C.decisions[d] || 0) + n;
    for (const e of c.errors || []) if (C.worker_errors.length < 50) C.worker_errors.push(e);
  }

  async function approve(op) {
    for (let i = 0; i < 40 && !ending; i++) {
      try {
        await approverDb.query(`SELECT 1 FROM opledger.op_approve($1, approver => 'chaos-approver', note => 'approved by seed plan')`, [op.id]);
        C.approvals++; return true;
      } catch (e) {
        if (e.connLost || e.fatalConnect) { C.approvals_uncertain++; await sleep(300); continue; }
        // OL002: maybe our previous (uncertain) approval committed - look
        try {
          // (one approval allows one execution: approved means approved for the next attempt)
          const r = await approverDb.query(`SELECT status::text AS status, approval_attempt = attempt + 1 AS approved
                                              FROM opledger.operations WHERE operation_id = $1`, [op.id]);
          if (r.rows[0] && (r.rows[0].status !== 'awaiting_approval' || r.rows[0].approved)) return true;
        } catch (_) { /* retry */ }
        C.worker_errors.push(`op_approve ${e.code} ${e.message}`);
        await sleep(300);
      }
    }
    return false;
  }

  function onReply(w, m) {
    const d = deliveries.get(m.deliveryId);
    if (!d) return;
    deliveries.delete(m.deliveryId);
    w.outstanding.delete(m.deliveryId);
    C.replies++;
    if (process.env.CHAOS_DEBUG_TIMING && m.ms != null) { const k = `${m.outcome}/${m.decision || m.why}`; const t = (C.timing[k] = C.timing[k] || { n: 0, ms: 0 }); t.n++; t.ms += m.ms; }
    mergeCounters(m.counters);
    const op = d.op;
    if (d.late) {
      op.lateOutstanding--;
      op.lateReplies.push(m.outcome === 'done' ? m.decision : `${m.outcome}/${m.decision || m.why}`);
      if (m.outcome === 'done' && m.decision === 'execute') violations.push(`${op.id}: late duplicate delivery was executed again`);
      if (m.outcome !== 'done' && op.lateReplies.length < 4) schedule(op, m.delayMs || 200, true);   // e.g. a restart hit it; try again
      return;
    }
    op.inflight--;
    if (op.state === 'done' || op.state === 'parked') return;
    if (m.outcome === 'done') {
      op.state = 'done'; op.finalStatus = m.status; finished++;
      if (op.lateDup && !op.lateSent) { op.lateSent = true; schedule(op, 500 + Math.floor(rng.next() * 1500), true); }
      return;
    }
    if (m.outcome === 'needs_approval') {
      if (op.approve) {
        // One approval allows one execution: an approved op asking again (its attempt
        // came back without an effect) needs a new approval.
        if (op.approvalState === 'approved') { op.approvalState = null; C.reapprovals++; }
        if (!op.approvalState) {
          op.approvalState = 'pending';
          setTimeout(() => approve(op).then((ok) => {
            op.approvalState = ok ? 'approved' : 'failed';
            if (op.state === 'done' || op.state === 'parked') return;
            op.state = 'inflight';
            if (op.inflight === 0) schedule(op, 10);
          }), 50 + Math.floor(rng.next() * 500));
          op.state = 'approval';
          return;
        }
        if (op.approvalState === 'pending') { op.state = 'approval'; return; }
      } else {
        op.naDeliveries++;
        if (op.naDeliveries >= 3) { if (op.inflight === 0) { op.state = 'parked'; finished++; } return; }
      }
      op.nextDelay = Math.max(op.nextDelay, 300);
    } else {
      op.nextDelay = Math.max(op.nextDelay, m.delayMs || 200);
    }
    if (op.inflight === 0 && op.state === 'inflight') schedule(op, op.nextDelay);
  }

  function onWorkerMessage(w, m) {
    if (m.type === 'reply') onReply(w, m);
  }

  // ---------------- chaos: worker kills, backend terminations, restarts
  let restarting = false;
  const restartAt = [];
  for (let i = 0; i < opt.restarts; i++) restartAt.push((i + 1) / (opt.restarts + 1) * 0.9);
  let nextKill = Date.now() + opt.killEveryMs, nextTerm = Date.now() + opt.terminateEveryMs;
  const chaosTimer = setInterval(async () => {
    if (ending || restarting) return;
    const now = Date.now();
    if (now >= nextKill) {
      nextKill = now + Math.floor(opt.killEveryMs * (0.5 + rng.next()));
      const alive = aliveWorkers();
      if (alive.length && opt.bypass !== 'ledger') { const w = rng.pick(alive); C.worker_kills_chaos++; try { w.proc.kill('SIGKILL'); } catch (_) { /* gone */ } }
    }
    if (now >= nextTerm) {
      nextTerm = now + Math.floor(opt.terminateEveryMs * (0.5 + rng.next()));
      const names = workers.map((w) => 'chaos-' + w.name).concat(reconcilers.map((r) => 'chaos-' + r.name));
      const victim = rng.pick(names);
      chaosDb.query('SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1', [victim])
        .then((r) => { C.backend_terminations += r.rows[0].n; }).catch(() => {});
    }
    if (restartAt.length && finished / finishedTarget >= restartAt[0]) {
      restartAt.shift();
      restarting = true;
      const down = 200 + Math.floor(rng.next() * 1500);
      log(`CRASH: pg_ctl stop -m immediate at ${finished}/${finishedTarget} done; down for ${down}ms`);
      try {
        await cluster.crash();
        await sleep(down);
        await cluster.start();
        C.restarts++;
        log('restarted');
      } catch (e) { log('restart failed', e.message); violations.push('restart failed: ' + e.message); }
      restarting = false;
    }
  }, 50);

  // ---------------- run until converged (bounded)
  const deadline = T0 + opt.maxSeconds * 1000;
  let lastLog = 0;
  while (Date.now() < deadline) {
    dispatch();
    if (finished >= finishedTarget && !restarting && !plan.some((o) => o.lateOutstanding > 0) && !waiting.some((x) => x.late)) break;
    if (Date.now() - lastLog > 5000) {
      lastLog = Date.now();
      log(`progress ${finished}/${finishedTarget} done, ${deliveries.size} in flight, ${waiting.length} waiting, deliveries=${C.deliveries} worker_deaths=${C.worker_deaths} restarts=${C.restarts}`);
    }
    await sleep(5);
  }
  const runtimeMs = Date.now() - T0;
  const converged = finished >= finishedTarget;
  clearInterval(chaosTimer);
  while (restarting) await sleep(50);
  log(`run phase over after ${(runtimeMs / 1000).toFixed(1)}s: ${finished}/${finishedTarget} ops final`);

  // ---------------- stop everything but the database
  ending = true;
  for (const r of reconcilers) { try { r.proc.send({ type: 'stop' }); } catch (_) { /* gone */ } }
  for (const w of workers) { try { w.proc.send({ type: 'stop' }); } catch (_) { /* gone */ } }
  const stopDeadline = Date.now() + 5000;
  while (Date.now() < stopDeadline && [...children].some((p) => p.exitCode === null && p.signalCode === null && (workers.some((w) => w.proc === p) || reconcilers.some((r) => r.proc === p)))) await sleep(50);
  for (const w of workers) { try { w.proc.kill('SIGKILL'); } catch (_) { /* gone */ } }
  for (const r of reconcilers) { try { r.proc.kill('SIGKILL'); } catch (_) { /* gone */ } }
  const providerStats = {};
  for (const m of Object.keys(ports)) {
    try { providerStats[m] = (await httpJson(ports[m], 'GET', '/stats', { timeoutMs: 2000 })).body; } catch (_) { providerStats[m] = null; }
  }

  // ---------------- verification
  const checks = [];
  function check(name, failures, info = '') {
    checks.push({ name, ok: failures.length === 0, failures, info });
  }
  const readStore = (f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const payEff = readStore(stores.payments), tckEff = readStore(stores.tickets), roEff = readStore(stores.readonly);
  const effByKey = new Map();
  for (const e of payEff) { const k = `${e.kind}:${e.key}`; if (!effByKey.has(k)) effByKey.set(k, []); effByKey.get(k).push(e); }
  const effByRef = new Map();
  for (const e of tckEff) { if (!effByRef.has(e.reference)) effByRef.set(e.reference, []); effByRef.get(e.reference).push(e); }

  const rowsR = await admin.query(`SELECT operation_id, tool, status::text AS status, attempt, provider_ref, result, args::text AS args_text,
                                           lease_expires_at, lease_expires_at < now() AS lease_past FROM opledger.operations`);
  const rows = new Map(rowsR.rows.map((r) => [r.operation_id, r]));
  const hasDecision = (await admin.query(`SELECT count(*)::int AS n FROM pg_attribute WHERE attrelid = 'opledger.events'::regclass AND attname = 'decision' AND NOT attisdropped`)).rows[0].n > 0;
  const evR = await admin.query(`SELECT event_id, operation_id, kind, status_before::text AS sb, status_after::text AS sa, attempt, at,
                                        ${hasDecision ? 'decision' : 'NULL::text AS decision'}, detail::text AS detail_text FROM opledger.events ORDER BY operation_id, event_id`);
  const events = new Map();
  for (const e of evR.rows) { if (!events.has(e.operation_id)) events.set(e.operation_id, []); events.get(e.operation_id).push(e); }

  // 1. convergence of the run itself
  check('run converged within time limit', converged ? [] : plan.filter((o) => o.state !== 'done' && o.state !== 'parked').slice(0, 10).map((o) => `${o.id} (${o.tool}) stuck in harness state ${o.state}, ledger status ${rows.get(o.id) && rows.get(o.id).status}`),
    `${finished}/${finishedTarget}`);

  // 2. ledger final states
  {
    const f = [];
    for (const op of plan) {
      const r = rows.get(op.id);
      if (!r) { f.push(`${op.id}: no ledger row`); continue; }
      if (op.tool === 'payouts.send' && !op.approve) {
        if (r.status !== 'awaiting_approval') f.push(`${op.id}: never approved but status ${r.status}`);
      } else if (r.status !== 'succeeded' && r.status !== 'failed') f.push(`${op.id} (${op.tool}): not final: ${r.status}${r.lease_past ? ' (lease expired)' : ''}`);
    }
    for (const r of rowsR.rows) {
      if (r.status === 'pending' && r.lease_past) f.push(`${r.operation_id}: pending past its lease`);
      if (r.status === 'unknown') f.push(`${r.operation_id}: unknown left unreconciled`);
    }
    check('ledger converged: every op final (or awaiting approval if never approved), nothing pending/unknown', f);
  }

  // 3. exactly-once effects
  const effectCount = (op) => {
    if (op.tool === 'payments.charge') return (effByKey.get(`charges:${op.id}`) || []).length;
    if (op.tool === 'payouts.send') return (effByKey.get(`payouts:${op.id}`) || []).length;
    if (op.tool === 'crm.create_ticket') return (effByRef.get(op.args.reference) || []).length;
    return 0;
  };
  {
    const f = [];
    let ones = 0, zeros = 0;
    for (const op of plan) {
      const r = rows.get(op.id); const n = effectCount(op);
      let want;
      if (op.tool === 'accounts.balance') want = 0;
      else if (op.tool === 'payouts.send' && !op.approve) want = 0;
      else if (r && r.status === 'succeeded') want = 1;
      else if (r && r.status === 'failed') want = 0;
      else want = null;   // not final: reported by check 2
      if (want === null) continue;
      if (n !== want) f.push(`${op.id} (${op.tool}, ledger ${r && r.status}): provider effects=${n}, expected ${want}`);
      else if (want === 1) ones++; else zeros++;
    }
    check('every external effect happened exactly once (0 for failed / never-approved / reads)', f, `${ones} ops with exactly 1 effect, ${zeros} with 0`);
  }
  {
    const planned = new Set(plan.map((o) => o.id)), refs = new Set(plan.map((o) => o.args.reference).filter(Boolean));
    const f = [];
    for (const e of payEff) if (!planned.has(e.key)) f.push(`payments effect for unplanned key ${e.key}`);
    for (const e of tckEff) if (!refs.has(e.reference)) f.push(`ticket for unplanned reference ${e.reference}`);
    for (const e of roEff) f.push(`read-only provider saw a write: ${JSON.stringify(e)}`);
    check('no stray effects (unplanned keys, writes to the read-only provider)', f);
  }
  {
    const f = [];
    const neverApproved = plan.filter((o) => o.tool === 'payouts.send' && !o.approve);
    for (const op of neverApproved) {
      const ex = (events.get(op.id) || []).filter((e) => e.sa === 'pending');
      if (ex.length) f.push(`${op.id}: never approved but reached pending ${ex.length}x`);
    }
    check('approval gate: never-approved irreversible ops never executed', f, `${neverApproved.length} never approved, ${plan.filter((o) => o.approve).length} approved`);
  }
  // 4. ledger matches the provider's store
  {
    const f = [];
    for (const op of plan) {
      const r = rows.get(op.id);
      if (!r || r.status !== 'succeeded' || op.tool === 'accounts.balance') continue;
      const effs = op.tool === 'crm.create_ticket' ? effByRef.get(op.args.reference) : effByKey.get(`${op.tool === 'payments.charge' ? 'charges' : 'payouts'}:${op.id}`);
      if (!effs || effs.length !== 1) continue;   // reported above
      const id = effs[0].id;
      const resId = r.result && (r.result.id || r.result.ticket_id);
      if (r.provider_ref !== id) f.push(`${op.id}: provider_ref ${r.provider_ref} != provider's ${id}`);
      if (resId !== id) f.push(`${op.id}: result id ${resId} != provider's ${id}`);
    }
    for (const op of plan) {
      const r = rows.get(op.id);
      if (op.tool === 'accounts.balance' && r && r.status === 'succeeded' && !(r.result && typeof r.result.balance === 'number')) f.push(`${op.id}: read result missing`);
    }
    check('every final ledger state matches the provider store (provider_ref, result)', f);
  }
  // 5. audit trail
  {
    const f = [];
    for (const op of plan) {
      const evs = events.get(op.id) || [];
      const r = rows.get(op.id);
      if (!evs.length) { if (r) f.push(`${op.id}: has a ledger row but no events`); continue; }   // no row: reported by the convergence check
      let prev = null;
      for (const e of evs) {
        if (prev) {
          if (!(BigInt(e.event_id) > BigInt(prev.event_id))) f.push(`${op.id}: event_id not increasing at ${e.event_id}`);
          if (e.sb !== prev.sa) f.push(`${op.id}: event ${e.event_id} (${e.kind}) status_before=${e.sb} but previous event ${prev.event_id} (${prev.kind}) status_after=${prev.sa}`);
        } else if (e.sb !== null && e.sb !== undefined) f.push(`${op.id}: first event ${e.event_id} (${e.kind}) has status_before=${e.sb}`);
        prev = e;
      }
      if (r && prev.sa !== r.status) f.push(`${op.id}: last event status_after=${prev.sa} but row status=${r.status}`);
      const maxAttempt = Math.max(...evs.map((e) => e.attempt || 0));
      if (r && maxAttempt !== r.attempt) f.push(`${op.id}: row attempt ${r.attempt} but events reach attempt ${maxAttempt}`);
      if (hasDecision && r) {
        const execs = evs.filter((e) => e.kind === 'begin' && e.decision === 'execute').length;
        if (execs !== r.attempt) f.push(`${op.id}: ${execs} op_begin events decided execute but attempt is ${r.attempt}`);
      }
    }
    check('every operation\'s history reads back in order from opledger.events (status chain, last = row)', f.slice(0, 200), `${evR.rows.length} events`);
  }
  {
    const f = [];
    for (const op of plan) if (op.tool === 'accounts.balance') for (const e of events.get(op.id) || []) if (e.sa === 'unknown') f.push(`${op.id}: read-only op went to unknown (event ${e.event_id} ${e.kind})`);
    check('read_only tool never goes to unknown', f);
  }
  {
    const f = [];
    for (const op of plan) {
      if (op.tool !== 'payments.charge') continue;
      const r = rows.get(op.id);
      if (r && r.args_text.includes(op.secret)) f.push(`${op.id}: secret in operations.args`);
      for (const e of events.get(op.id) || []) if (e.detail_text && e.detail_text.includes(op.secret)) f.push(`${op.id}: secret in event ${e.event_id}`);
    }
    check('redacted secrets never stored (operations.args, events.detail)', f);
  }
  {
    const f = [];
    for (const op of plan) if (op.lateSent && !op.lateReplies.some((x) => x === 'replay' || x === 'failed')) f.push(`${op.id}: late duplicate answered ${JSON.stringify(op.lateReplies)}`);
    check('late duplicate deliveries are answered replay/failed, never re-executed', violations.filter((v) => v.includes('late')).concat(f), `${plan.filter((o) => o.lateSent).length} late duplicates`);
  }
  {
    const f = C.worker_errors.filter((e) => !/OL002/.test(e));
    for (const [n, rc] of Object.entries(recCounters)) for (const e of rc.errors || []) f.push(`${n}: ${e}`);
    check('no unexpected errors in workers/reconcilers (OL001, unknown decisions, SQL errors)', f.slice(0, 50));
  }

  // 6. metrics
  let metrics = {};
  try { metrics = (await admin.query(`SELECT m.*, round((extract(epoch FROM m.reconciliation_latency_p50) * 1000)::numeric, 1)::float8 AS reconciliation_latency_p50_ms,
                                               round((extract(epoch FROM m.reconciliation_latency_p95) * 1000)::numeric, 1)::float8 AS reconciliation_latency_p95_ms
                                          FROM opledger.metrics AS m`)).rows[0] || {}; } catch (e) { metrics = { error: e.message }; }
  const everUnknown = new Set(evR.rows.filter((e) => e.sa === 'unknown').map((e) => e.operation_id));
  const recLat = [];
  for (const evs of events.values()) {
    let since = null;
    for (const e of evs) {
      if (e.sa === 'unknown' && e.sb !== 'unknown') since = new Date(e.at).getTime();
      else if (since !== null && e.sb === 'unknown' && e.sa !== 'unknown') { recLat.push(new Date(e.at).getTime() - since); since = null; }
    }
  }
  recLat.sort((a, b) => a - b);
  const nonExecuteSeen = Object.entries(C.decisions).filter(([d]) => d !== 'execute').reduce((s, [, n]) => s + n, 0);
  const recTotals = Object.values(recCounters).reduce((t, c) => { for (const [k, v] of Object.entries(c)) if (typeof v === 'number') t[k] = (t[k] || 0) + v; return t; }, {});
  {
    const f = [];
    const num = (v) => (v == null ? null : Number(v));
    if (metrics.error) f.push('opledger.metrics unreadable: ' + metrics.error);
    else {
      if (num(metrics.ops_unknown) !== 0) f.push(`metrics.ops_unknown=${metrics.ops_unknown}, expected 0`);
      if (num(metrics.duplicate_effects_detected) !== 0) f.push(`metrics.duplicate_effects_detected=${metrics.duplicate_effects_detected}, expected 0`);
      if (!(num(metrics.non_execute_answers) >= nonExecuteSeen)) f.push(`metrics.non_execute_answers=${metrics.non_execute_answers} < ${nonExecuteSeen} non-execute op_begin answers the workers saw`);
      if (hasDecision) {
        const evNonExec = evR.rows.filter((e) => e.kind === 'begin' && e.decision && e.decision !== 'execute').length;
        if (num(metrics.non_execute_answers) !== evNonExec) f.push(`metrics.non_execute_answers=${metrics.non_execute_answers} but events hold ${evNonExec} non-execute op_begin answers`);
        // duplicates_prevented: the answers that stopped a second execution (replay,
        // in_progress, failed), not those that asked the caller to act first
        const evPrevented = evR.rows.filter((e) => e.kind === 'begin' && ['replay', 'in_progress', 'failed'].includes(e.decision)).length;
        if (num(metrics.duplicates_prevented) !== evPrevented) f.push(`metrics.duplicates_prevented=${metrics.duplicates_prevented} but events hold ${evPrevented} replay/in_progress/failed answers`);
        // (only a lower bound: a worker SIGKILLed after op_begin answered never reports what it saw)
        if (evNonExec < nonExecuteSeen) f.push(`events hold ${evNonExec} non-execute op_begin answers but workers saw ${nonExecuteSeen}`);
      }
      const minManual = C.approvals + C.resolved_manual;
      const maxManual = minManual + C.approvals_uncertain + C.resolve_uncertain_manual;
      if (!(num(metrics.manual_interventions) >= minManual && num(metrics.manual_interventions) <= maxManual + 0)) f.push(`metrics.manual_interventions=${metrics.manual_interventions}, expected between ${minManual} and ${maxManual} (approvals ${C.approvals}, manual resolutions ${C.resolved_manual})`);
      if (everUnknown.size > 0 && metrics.reconciliation_latency_p50 == null) f.push('metrics.reconciliation_latency_p50 is null although ops were reconciled');
    }
    check('opledger.metrics agrees with what the harness observed', f);
  }

  // ---------------- report
  const fmtI = (v) => (v == null ? 'null' : (typeof v === 'object' ? JSON.stringify(v) : String(v)));
  console.log('');
  console.log(`==== chaos results: seed=${opt.seed} ops=${opt.ops} runtime=${(runtimeMs / 1000).toFixed(1)}s ====`);
  console.log(`faults: worker deaths=${C.worker_deaths} (chaos SIGKILLs ${C.worker_kills_chaos}, rest planned kill_before/after_call), backend terminations=${C.backend_terminations}, server crashes+restarts=${C.restarts}`);
  console.log(`deliveries=${C.deliveries} (duplicates ${C.duplicate_deliveries}, hot-ID races ${C.hot_deliveries}, late ${C.late_deliveries}); provider calls=${C.provider_calls}; op_begin decisions ${JSON.stringify(C.decisions)}`);
  console.log(`worker ledger-report retries after connection loss=${C.report_conn_lost}, stale reports (OL002)=${C.report_stale}, op_begin lost with connection=${C.begin_conn_lost}, read-before-write hits=${C.rbw_found}`);
  console.log(`reconcilers: ${JSON.stringify(recTotals)}`);
  if (process.env.CHAOS_DEBUG_TIMING) console.log('timing', JSON.stringify(C.timing));
  console.log(`providers: effects payments=${payEff.length} tickets=${tckEff.length} readonly-writes=${roEff.length}; provider stats ${JSON.stringify(providerStats)}`);
  console.log('metrics (opledger.metrics):');
  for (const [k, v] of Object.entries(metrics)) console.log(`  ${k} = ${fmtI(v)}`);
  console.log('metrics (harness):');
  console.log(`  duplicate_attempts_prevented (non-execute op_begin answers seen by workers) = ${nonExecuteSeen}`);
  console.log(`  ops_ever_unknown = ${everUnknown.size}`);
  console.log(`  unknown_marked_by_workers = ${C.unknown_marked}`);
  console.log(`  reconciliation_latency_ms p50 = ${percentile(recLat, 50)} p95 = ${percentile(recLat, 95)} (n=${recLat.length}, from events)`);
  console.log(`  manual_interventions = ${C.approvals + C.resolved_manual} (approvals ${C.approvals}, manual resolutions ${C.resolved_manual})`);
  console.log('');
  let passed = 0, failed = 0;
  for (const c of checks) {
    if (c.ok) { passed++; console.log(`ok - ${c.name}${c.info ? ' [' + c.info + ']' : ''}`); }
    else {
      failed++;
      console.log(`not ok - ${c.name}${c.info ? ' [' + c.info + ']' : ''}: ${c.failures.length} failure(s)`);
      for (const x of c.failures.slice(0, 8)) console.log(`    ${x}`);
    }
  }
  console.log(`chaos seed=${opt.seed}: ${passed} checks passed, ${failed} checks failed`);
  if (opt.summary) {
    fs.writeFileSync(opt.summary, JSON.stringify({ seed: opt.seed, ops: opt.ops, runtime_s: runtimeMs / 1000, passed, failed,
      checks: checks.map((c) => ({ name: c.name, ok: c.ok, failures: c.failures.length, first: c.failures.slice(0, 3) })),
      metrics, harness: { duplicates_prevented_seen: nonExecuteSeen, ops_ever_unknown: everUnknown.size, rec_p50_ms: percentile(recLat, 50), rec_p95_ms: percentile(recLat, 95), counters: C, reconcilers: recTotals } }, null, 2));
  }
  if (failed && !opt.keep) {
    // keep the server log tail for diagnosis
    try { const lg = fs.readFileSync(cluster.log, 'utf8').split('\n'); console.log('---- postgresql.log (last 30 lines)'); console.log(lg.slice(-30).map((l) => l.slice(0, 300)).join('\n')); } catch (_) { /* ignore */ }
  }
  await admin.close(); await approverDb.close(); await chaosDb.close();
  return failed === 0 ? 0 : 1;
}

main().then((code) => { cleanupOnce(); process.exit(code); }, (e) => { console.error('[chaos] fatal:', e && e.stack || e); cleanupOnce(); process.exit(3); });

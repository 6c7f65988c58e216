'use strict';
// An orchestrator worker: a real OS process (forked by chaos.js) that runs the
// executeOnce loop for the jobs it is handed, one at a time:
//
//   op_begin -> (decision) -> call the tool with the operation ID as the
//   idempotency key -> op_succeed / op_fail / op_mark_unknown
//
// It keeps one PostgreSQL connection and survives losing it (backend killed,
// server stopped): a statement whose connection died has an UNKNOWN outcome,
// so the worker never assumes it committed or not - it reconnects and either
// repeats an idempotent report (op_succeed with the same result is a no-op)
// or leaves the op to lease expiry + reconciliation.
//
// Fault plan entries it obeys (chosen from the seed by chaos.js, per attempt):
//   provider fault (X-Chaos-Fault header), and worker faults:
//   kill_before_call   SIGKILL itself after op_begin, before the provider call
//   kill_after_call    SIGKILL itself after the provider answered, before the ledger update
//   terminate_backend  pg_terminate_backend() its own backend before the ledger update
//
// CHAOS_BYPASS=ledger (negative control only): ignore the ledger's decision
// and call the tool on every delivery.  The harness must then FAIL.
// CHAOS_BYPASS=blind (negative control only): skip read-before-write (the
// reconciler also resolves blindly); the harness must then FAIL.

const { PgConn, sleep } = require('./lib/common');
const { TOOLS, callTool, lookup, refOf } = require('./lib/tools');

const cfg = JSON.parse(process.env.CHAOS_WORKER_CFG);
const name = cfg.name;
const bypass = process.env.CHAOS_BYPASS || '';
const db = new PgConn(cfg.pg, 'chaos-' + name, { reconnectBudgetMs: cfg.reconnectBudgetMs });
const queue = [];
let busy = false;
let stopping = false;

// the orchestrator is gone if a send fails: nothing left to do but exit
function send(msg) { if (process.connected) { try { process.send(msg, (err) => { if (err) process.exit(0); }); } catch (_) { process.exit(0); } } else process.exit(0); }

const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));

function delayUntil(ts) {
  if (!ts) return 200;
  return clamp(new Date(ts).getTime() - Date.now(), 20, 5000);
}

function sqlState(e) { return (e && e.code) || ''; }

// Run one ledger report, repeating it on connection loss.  Returns
// {ok:true,row} | {ok:false, stale:true} (OL002 - someone else moved the op on,
// or our earlier try committed) | {ok:false, lost:true} (gave up).
async function report(c, sql, params) {
  for (let i = 0; i < 6; i++) {
    try {
      const r = await db.query(sql, params);
      return { ok: true, row: r.rows[0], tries: i + 1 };
    } catch (e) {
      if (e.connLost) { c.report_conn_lost++; await sleep(100 * (i + 1)); continue; }
      if (sqlState(e) === 'OL002') { c.report_stale++; return { ok: false, stale: true, error: e.message, tries: i + 1 }; }
      if (e.fatalConnect) return { ok: false, lost: true, error: e.message };
      c.report_errors++;
      return { ok: false, error: `${sqlState(e)} ${e.message}` };
    }
  }
  return { ok: false, lost: true };
}

async function terminateOwnBackend() {
  const pid = db.backendPid;
  if (!pid) return;
  const admin = new PgConn(cfg.pg, 'chaos-' + name + '-killer', { reconnectBudgetMs: 3000 });
  try { await admin.query('SELECT pg_terminate_backend($1)', [pid]); } catch (_) { /* server may be down */ }
  await admin.close();
}

async function runJob(job) {
  const c = { decisions: {}, report_conn_lost: 0, report_stale: 0, report_errors: 0, executed: 0,
    unknown_marked: 0, rbw_found: 0, begin_conn_lost: 0, provider_calls: 0, errors: [] };
  const op = job.op;
  const tJob = Date.now();
  const lease = cfg.leaseMs;
  const reply = (outcome, extra = {}) => send(Object.assign({ type: 'reply', deliveryId: job.deliveryId, opId: op.id, outcome, counters: c, ms: Date.now() - tJob }, extra));

  const t0 = Date.now();
  let r;
  try {
    const q = await db.query(
      `SELECT decision, status::text AS status, attempt, result, error, provider_ref, retry_after
         FROM opledger.op_begin($1, $2, $3::jsonb, conversation_id => $4, worker => $5, lease => $6::interval)`,
      [op.id, op.tool, JSON.stringify(job.args), op.conversation, name, `${lease} milliseconds`]);
    r = q.rows[0];
  } catch (e) {
    if (e.connLost || e.fatalConnect) { c.begin_conn_lost++; return reply('later', { delayMs: 200, why: 'begin_conn_lost' }); }
    c.errors.push(`op_begin ${sqlState(e)} ${e.message}`);
    return reply('later', { delayMs: 300, why: 'begin_error', sqlstate: sqlState(e) });
  }
  c.decisions[r.decision] = 1;

  if (bypass !== 'ledger') {
    switch (r.decision) {
      case 'execute': break;
      case 'replay': return reply('done', { decision: 'replay', status: r.status });
      case 'failed': return reply('done', { decision: 'failed', status: r.status });
      case 'in_progress':
      case 'retry_later': return reply('later', { delayMs: delayUntil(r.retry_after), decision: r.decision });
      case 'reconcile': return reply('later', { delayMs: 300, decision: r.decision });
      case 'needs_approval': return reply('needs_approval', { decision: r.decision });
      default:
        c.errors.push('unexpected decision ' + r.decision);
        return reply('later', { delayMs: 500, decision: r.decision });
    }
  }

  const attempt = r.attempt;
  const wf = (op.workerFaults || {})[attempt];
  const pf = (op.faults || {})[attempt] || 'none';

  if (wf === 'kill_before_call' && bypass !== 'ledger') { process.kill(process.pid, 'SIGKILL'); await sleep(10000); }

  // Fencing by time: never let the provider commit after our lease ends.
  const leaseEnd = t0 + lease - 150;
  const deadline = Math.min(Date.now() + cfg.clientTimeoutMs - 20, leaseEnd);
  if (deadline - Date.now() < 30 && bypass !== 'ledger') {
    // too late to call safely: leave the op to lease expiry
    return reply('later', { delayMs: lease, why: 'lease_too_short' });
  }

  const tool = TOOLS[op.tool];
  let resp = null, callErr = null;
  try {
    // read-before-write for the provider without idempotency keys
    if (op.tool === 'crm.create_ticket' && attempt > 1 && bypass === '') {
      const l = await lookup(cfg.ports, op.tool, op.id, job.args, Math.max(50, deadline - Date.now()));
      if (l.found) { c.rbw_found++; resp = { status: 200, body: l.result }; }
    }
    if (!resp) {
      c.provider_calls++;
      resp = await callTool(cfg.ports, op.tool, op.id, job.args, { fault: pf, deadline, timeoutMs: cfg.clientTimeoutMs });
    }
  } catch (e) { callErr = e; }
  c.executed++;

  if (wf === 'kill_after_call' && bypass !== 'ledger') { process.kill(process.pid, 'SIGKILL'); await sleep(10000); }
  if (wf === 'terminate_backend') await terminateOwnBackend();

  if (resp && resp.status >= 200 && resp.status < 300) {
    const ref = refOf(op.tool, resp.body);
    const rep = await report(c, `SELECT status::text AS status FROM opledger.op_succeed($1, $2::jsonb, attempt => $3, provider_ref => $4)`,
      [op.id, JSON.stringify(resp.body), attempt, ref]);
    if (rep.ok) return reply('done', { decision: 'execute', status: rep.row.status, succeededBy: 'worker' });
    return reply('later', { delayMs: 300, why: 'succeed_not_recorded', detail: rep.error });
  }
  let rep;
  if (resp && (resp.status === 402 || resp.status === 409 || resp.status === 400)) {
    rep = await report(c, `SELECT status::text AS status FROM opledger.op_fail($1, $2::jsonb, retryable => false, attempt => $3)`,
      [op.id, JSON.stringify({ http: resp.status, body: resp.body }), attempt]);
    if (rep.ok) return reply('done', { decision: 'execute', status: rep.row.status });
    return reply('later', { delayMs: 300, why: 'fail_not_recorded' });
  }
  const definiteNoEffect = (resp && resp.status === 503) || (callErr && callErr.kind === 'refused');
  if (definiteNoEffect || tool.effect === 'read_only') {
    // no side effect happened (or a read): safe to retry after backoff
    rep = await report(c, `SELECT status::text AS status FROM opledger.op_fail($1, $2::jsonb, retryable => true, attempt => $3)`,
      [op.id, JSON.stringify({ http: resp && resp.status, error: callErr && callErr.message }), attempt]);
    return reply('later', { delayMs: 100, why: 'retryable' });
  }
  // timeout, reset, 504, 5xx: we cannot know whether the effect happened
  c.unknown_marked++;
  rep = await report(c, `SELECT status::text AS status FROM opledger.op_mark_unknown($1, $2::jsonb, attempt => $3)`,
    [op.id, JSON.stringify({ http: resp && resp.status, kind: callErr && callErr.kind, error: callErr && callErr.message }), attempt]);
  return reply('later', { delayMs: 200, why: 'unknown' });
}

async function pump() {
  if (busy) return;
  busy = true;
  try {
    while (queue.length && !stopping) {
      const job = queue.shift();
      try { await runJob(job); } catch (e) {
        send({ type: 'reply', deliveryId: job.deliveryId, opId: job.op.id, outcome: 'later', delayMs: 500, why: 'worker_exception', counters: { errors: [String(e && e.stack || e)] } });
      }
    }
  } finally { busy = false; }
}

process.on('message', (m) => {
  if (m.type === 'job') { queue.push(m); pump(); }
  else if (m.type === 'stop') { stopping = true; db.close().finally(() => process.exit(0)); }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready', name });

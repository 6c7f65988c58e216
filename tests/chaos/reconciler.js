'use strict';
// Reconciler process: sweeps expired leases (op_sweep) and reconciles unknown
// operations it claims with op_claim_reconciliation (FOR UPDATE SKIP LOCKED;
// several reconcilers run at once).  For each claimed op it asks the provider
// - by idempotency key (payments) or by business reference (tickets, the
// read-before-write strategy) - and resolves with op_resolve:
//   found -> applied (with the provider's result and reference)
//   none  -> not_applied (the op becomes retryable and is executed again)
// A seeded share of the resolutions is made "by a person" (manual => true),
// which opledger.metrics must count as manual interventions.
//
// CHAOS_BYPASS=blind (negative control only): resolve every unknown as
// not_applied without asking the provider.  The harness must then FAIL.

const { PgConn, sleep } = require('./lib/common');
const { lookup } = require('./lib/tools');

const cfg = JSON.parse(process.env.CHAOS_RECONCILER_CFG);
const name = cfg.name;
const bypass = process.env.CHAOS_BYPASS || '';
const db = new PgConn(cfg.pg, 'chaos-' + name, { reconnectBudgetMs: cfg.reconnectBudgetMs });
let stopping = false;
const c = { sweeps: 0, swept: 0, claimed: 0, resolved_applied: 0, resolved_not_applied: 0, resolved_manual: 0,
  resolve_stale: 0, conn_lost: 0, lookup_errors: 0, multi_effect_seen: 0, errors: [] };

function manualFor(opId) {
  // deterministic per op id and seed: ~5% decided "by a person"
  let h = cfg.seed >>> 0;
  for (let i = 0; i < opId.length; i++) h = Math.imul(h ^ opId.charCodeAt(i), 16777619) >>> 0;
  return (h % 100) < cfg.manualPercent;
}

async function once() {
  try {
    const s = await db.query('SELECT opledger.op_sweep(200) AS n');
    c.sweeps++; c.swept += Number(s.rows[0].n) || 0;
  } catch (e) {
    if (e.connLost || e.fatalConnect) { c.conn_lost++; return 300; }
    c.errors.push('op_sweep ' + e.code + ' ' + e.message); return 500;
  }
  let rows;
  try {
    const r = await db.query(
      `SELECT operation_id, tool, args, attempt, provider_ref FROM opledger.op_claim_reconciliation($1, 20, $2::interval)`,
      [name, `${cfg.claimMs} milliseconds`]);
    rows = r.rows;
  } catch (e) {
    if (e.connLost || e.fatalConnect) { c.conn_lost++; return 300; }
    c.errors.push('op_claim_reconciliation ' + e.code + ' ' + e.message); return 500;
  }
  c.claimed += rows.length;
  for (const row of rows) {
    if (stopping) break;
    let outcome, result = null, ref = null;
    if (bypass === 'blind') {
      outcome = 'not_applied';
    } else {
      try {
        const l = await lookup(cfg.ports, row.tool, row.operation_id, row.args);
        if (l.count > 1) c.multi_effect_seen++;
        if (l.found) { outcome = 'applied'; result = l.result; ref = l.providerRef; } else outcome = 'not_applied';
      } catch (e) { c.lookup_errors++; continue; }   // claim expires; try again later
    }
    const manual = manualFor(row.operation_id);
    try {
      await db.query(
        `SELECT status::text FROM opledger.op_resolve($1, $2, $3::jsonb, attempt => $4, provider_ref => $5, resolver => $6, manual => $7)`,
        [row.operation_id, outcome, result == null ? null : JSON.stringify(result), row.attempt, ref,
          manual ? 'oncall-human' : name, manual]);
      if (outcome === 'applied') c.resolved_applied++; else c.resolved_not_applied++;
      if (manual) c.resolved_manual++;
      send({ type: 'resolved', opId: row.operation_id, outcome, manual });
    } catch (e) {
      if (e.connLost || e.fatalConnect) { c.conn_lost++; send({ type: 'resolve_uncertain', opId: row.operation_id, manual }); return 300; }
      if (e.code === 'OL002') { c.resolve_stale++; continue; }
      c.errors.push('op_resolve ' + e.code + ' ' + e.message);
    }
  }
  return rows.length ? 0 : cfg.pollMs;
}

// the orchestrator is gone if a send fails: nothing left to do but exit
function send(msg) { if (process.connected) { try { process.send(msg, (err) => { if (err) process.exit(0); }); } catch (_) { process.exit(0); } } else process.exit(0); }

async function main() {
  while (!stopping) {
    const wait = await once();
    if (wait) await sleep(wait);
  }
  send({ type: 'counters', counters: c });
  await db.close();
  process.exit(0);
}

process.on('message', (m) => { if (m.type === 'stop') stopping = true; if (m.type === 'report') send({ type: 'counters', counters: c }); });
process.on('disconnect', () => process.exit(0));
setInterval(() => send({ type: 'counters', counters: c }), 1000).unref();
main();

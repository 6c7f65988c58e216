'use strict';
// Fake external providers for the chaos harness, one process each, HTTP on
// 127.0.0.1 only.  Every real side effect is appended (synchronously) to a
// JSON-lines store file *before* any response is sent, so the store is the
// ground truth of what happened in "the outside world", whatever happened to
// the response afterwards.
//
//   node provider.js payments <storefile>   idempotency keys honoured (Stripe-like)
//   node provider.js tickets  <storefile>   no keys; lookup by business reference
//   node provider.js readonly <storefile>   reads only; any write is counted as a violation
//
// Fault injection is requested per call by the client in the X-Chaos-Fault
// header (the worker takes it from the seeded fault plan), so a run is
// reproducible from its seed:
//   decline        definite failure, no effect (HTTP 402)
//   unavailable    transient failure, no effect (HTTP 503)
//   slow_no_commit hold the request past the client's deadline; the deadline
//                  check then refuses to commit: no effect (client times out)
//   commit_drop    commit, then destroy the socket (client sees a reset)
//   commit_delay   commit, then answer only after the client has timed out
// X-Deadline (epoch ms): the provider never commits at or after it (a
// server-side request deadline, as gRPC/most payment APIs have).  This is what
// makes read-before-write reconciliation sound: once the deadline of an
// attempt has passed, a lookup that finds nothing is final.

const http = require('node:http');
const fs = require('node:fs');
const crypto = require('node:crypto');

const mode = process.argv[2];
const storeFile = process.argv[3];
if (!['payments', 'tickets', 'readonly'].includes(mode) || !storeFile) {
  console.error('usage: provider.js payments|tickets|readonly <storefile>');
  process.exit(2);
}

const fd = fs.openSync(storeFile, 'a');
let seq = 0;
const byKey = new Map();        // payments: "<kind>:<key>" -> record
const byRef = new Map();        // tickets: reference -> [records]
const stats = { effects: 0, key_replays: 0, key_conflicts: 0, declines: 0, unavailable: 0,
  deadline_refused: 0, drops: 0, delays: 0, lookups: 0, reads: 0, write_violations: 0, requests: 0 };

function commit(rec) {
  rec.seq = ++seq; rec.at = Date.now();
  fs.writeSync(fd, JSON.stringify(rec) + '\n');   // durable in the OS before we answer
  stats.effects++;
  return rec;
}

function send(res, status, body, extraHeaders = {}) {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, Object.assign({ 'content-type': 'application/json', 'content-length': data.length }, extraHeaders));
  res.end(data);
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => { try { resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null')); } catch (_) { resolve(null); } });
    req.on('error', () => resolve(null));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Apply the pre-commit part of a fault.  Returns true if the request was
// answered (no effect must happen).
async function preCommit(fault, deadline, res) {
  if (fault === 'decline') { stats.declines++; send(res, 402, { error: 'card_declined', retryable: false }); return true; }
  if (fault === 'unavailable') { stats.unavailable++; send(res, 503, { error: 'unavailable', retryable: true }); return true; }
  if (fault === 'slow_no_commit') {
    await sleep(Math.max(0, deadline - Date.now()) + 50);
  }
  if (Date.now() >= deadline) {
    stats.deadline_refused++;
    // the client has given up already; answer anyway (it is ignored)
    send(res, 504, { error: 'deadline_exceeded', retryable: true });
    return true;
  }
  return false;
}

// Post-commit part of a fault: drop or delay the response.
async function respondAfterCommit(fault, deadline, res, status, body, headers) {
  if (fault === 'commit_drop') { stats.drops++; res.socket.destroy(); return; }
  if (fault === 'commit_delay') {
    stats.delays++;
    await sleep(Math.max(0, deadline - Date.now()) + 400);
    if (!res.socket || res.socket.destroyed) return;
  }
  send(res, status, body, headers);
}

function fingerprint(body) {
  return crypto.createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 16);
}

async function handle(req, res) {
  stats.requests++;
  const url = new URL(req.url, 'http://127.0.0.1');
  const fault = req.headers['x-chaos-fault'] || 'none';
  const deadline = Number(req.headers['x-deadline'] || (Date.now() + 60000));

  if (req.method === 'GET' && url.pathname === '/stats') return send(res, 200, Object.assign({ mode }, stats));
  if (req.method === 'GET' && url.pathname === '/health') return send(res, 200, { ok: true });

  if (mode === 'payments') {
    let m = url.pathname.match(/^\/(charges|payouts)$/);
    if (req.method === 'POST' && m) {
      const kind = m[1];
      const body = await readBody(req);
      const key = req.headers['idempotency-key'];
      if (!key) return send(res, 400, { error: 'idempotency_key_required' });
      const k = kind + ':' + key;
      const fp = fingerprint(body);
      const prev = byKey.get(k);
      if (prev) {
        if (prev.fp !== fp) { stats.key_conflicts++; return send(res, 409, { error: 'idempotency_key_reused_with_different_request' }); }
        // Same key, same request: replay the stored response, no new effect.
        // Faults that would drop/delay the answer still apply (the network does not care).
        stats.key_replays++;
        if (fault === 'unavailable' || fault === 'decline') return preCommit(fault, deadline, res);
        return respondAfterCommit(fault, deadline, res, 200, prev.response, { 'idempotent-replayed': 'true' });
      }
      if (await preCommit(fault, deadline, res)) return;
      // re-check after any await: another request with the same key may have committed meanwhile
      const again = byKey.get(k);
      if (again) { stats.key_replays++; return respondAfterCommit(fault, deadline, res, 200, again.response, { 'idempotent-replayed': 'true' }); }
      const id = (kind === 'charges' ? 'ch_' : 'po_') + crypto.randomBytes(8).toString('hex');
      const response = { id, object: kind === 'charges' ? 'charge' : 'payout', amount: body && body.amount, currency: body && body.currency };
      const rec = commit({ kind, key, id, fp, response });
      byKey.set(k, rec);
      return respondAfterCommit(fault, deadline, res, 200, response, {});
    }
    m = url.pathname.match(/^\/(charges|payouts)\/([^/]+)$/);
    if (req.method === 'GET' && m) {
      stats.lookups++;
      const rec = byKey.get(m[1] + ':' + decodeURIComponent(m[2]));
      if (!rec) return send(res, 404, { error: 'not_found' });
      return send(res, 200, rec.response);
    }
    return send(res, 404, { error: 'no_route' });
  }

  if (mode === 'tickets') {
    if (req.method === 'POST' && url.pathname === '/tickets') {
      // No idempotency keys: every accepted POST creates a ticket.
      const body = await readBody(req);
      if (!body || typeof body.reference !== 'string') return send(res, 400, { error: 'reference_required' });
      if (await preCommit(fault, deadline, res)) return;
      const id = 'TCK-' + crypto.randomBytes(6).toString('hex');
      const response = { ticket_id: id, reference: body.reference };
      const rec = commit({ kind: 'tickets', reference: body.reference, id, response });
      if (!byRef.has(body.reference)) byRef.set(body.reference, []);
      byRef.get(body.reference).push(rec);
      return respondAfterCommit(fault, deadline, res, 201, response, {});
    }
    if (req.method === 'GET' && url.pathname === '/tickets') {
      stats.lookups++;
      const ref = url.searchParams.get('reference');
      const list = (byRef.get(ref) || []).map((r) => r.response);
      return send(res, 200, { data: list });
    }
    return send(res, 404, { error: 'no_route' });
  }

  // readonly
  const m = url.pathname.match(/^\/accounts\/([^/]+)\/balance$/);
  if (req.method === 'GET' && m) {
    stats.reads++;
    if (fault === 'unavailable') { stats.unavailable++; return send(res, 503, { error: 'unavailable' }); }
    if (fault === 'slow_no_commit' || fault === 'commit_delay') { stats.delays++; await sleep(Math.max(0, deadline - Date.now()) + 300); }
    if (fault === 'commit_drop') { stats.drops++; res.socket.destroy(); return; }
    if (res.socket && res.socket.destroyed) return;
    const acct = decodeURIComponent(m[1]);
    const balance = parseInt(crypto.createHash('sha256').update(acct).digest('hex').slice(0, 6), 16) % 100000;
    return send(res, 200, { account: acct, balance, currency: 'EUR' });
  }
  if (req.method !== 'GET') {
    // a write reaching a read-only API is a violation we count in the store
    stats.write_violations++;
    commit({ kind: 'write_violation', path: url.pathname });
    return send(res, 405, { error: 'read_only' });
  }
  return send(res, 404, { error: 'no_route' });
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => { try { send(res, 500, { error: String(e && e.message) }); } catch (_) { /* ignore */ } });
});
server.keepAliveTimeout = 1000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`LISTENING ${server.address().port}\n`);
});
// Stop by ourselves if the parent goes away (bounded life).
process.on('disconnect', () => process.exit(0));
const parentPid = process.ppid;
setInterval(() => { try { process.kill(parentPid, 0); } catch (_) { process.exit(0); } }, 1000).unref();
process.on('SIGTERM', () => { try { fs.fsyncSync(fd); } catch (_) { /* ignore */ } process.exit(0); });

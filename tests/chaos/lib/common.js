'use strict';
// Shared helpers for the opledger chaos harness: seeded PRNG, bounded HTTP
// client, PostgreSQL connection with bounded reconnect, small statistics.

const http = require('node:http');
const { Client } = require('pg');

// ---------------------------------------------------------------- PRNG
// sfc32 seeded through splitmix32: small, fast, identical on every machine.
function splitmix32(a) {
  return function () {
    a |= 0; a = (a + 0x9e3779b9) | 0;
    let t = a ^ (a >>> 16); t = Math.imul(t, 0x21f0aaad);
    t ^= t >>> 15; t = Math.imul(t, 0x735a2d97);
    return ((t ^ (t >>> 15)) >>> 0);
  };
}
function makeRng(seed) {
  const sm = splitmix32(Number(seed) >>> 0);
  let a = sm(), b = sm(), c = sm(), d = sm();
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  const rng = {
    next,
    chance: (p) => next() < p,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),   // inclusive
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    // pick by weights: [[value, weight], ...]
    weighted: (pairs) => {
      const total = pairs.reduce((s, p) => s + p[1], 0);
      let r = next() * total;
      for (const [v, w] of pairs) { if ((r -= w) < 0) return v; }
      return pairs[pairs.length - 1][0];
    },
  };
  return rng;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- HTTP
// Loopback-only JSON HTTP call with a hard client timeout.  Resolves to
// {status, body} or rejects with err.kind in {'timeout','reset','refused','http'}.
function httpJson(port, method, path, { body = null, headers = {}, timeoutMs = 1000 } = {}) {
  return new Promise((resolve, reject) => {
    const data = body == null ? null : Buffer.from(JSON.stringify(body));
    const req = http.request({
      host: '127.0.0.1', port, method, path, agent: false,
      headers: Object.assign({ 'content-type': 'application/json', connection: 'close' },
        data ? { 'content-length': data.length } : {}, headers),
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        let parsed = null;
        const txt = Buffer.concat(chunks).toString('utf8');
        try { parsed = txt ? JSON.parse(txt) : null; } catch (e) {
          const err = new Error('bad json from provider: ' + txt.slice(0, 200)); err.kind = 'reset'; return reject(err);
        }
        resolve({ status: res.statusCode, body: parsed });
      });
      res.on('error', (e) => { clearTimeout(timer); e.kind = 'reset'; reject(e); });
      res.on('aborted', () => { clearTimeout(timer); const e = new Error('response aborted'); e.kind = 'reset'; reject(e); });
    });
    const timer = setTimeout(() => {
      const e = new Error(`timeout after ${timeoutMs}ms`); e.kind = 'timeout';
      req.destroy(e);
    }, timeoutMs);
    req.on('error', (e) => {
      clearTimeout(timer);
      if (!e.kind) e.kind = (e.code === 'ECONNREFUSED') ? 'refused' : 'reset';
      reject(e);
    });
    if (data) req.write(data);
    req.end();
  });
}

// ---------------------------------------------------------------- PostgreSQL
// Errors that mean "the connection/server went away": the outcome of the
// statement in flight is unknown.
function isConnectionError(e) {
  if (!e) return false;
  const c = e.code || '';
  if (['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN', 'EHOSTUNREACH'].includes(c)) return true;
  // 57P01 admin_shutdown / terminated by pg_terminate_backend, 57P02 crash_shutdown,
  // 57P03 cannot_connect_now, 08xxx connection exceptions
  if (c === '57P01' || c === '57P02' || c === '57P03' || c.startsWith('08')) return true;
  const m = String(e.message || '');
  return /Connection terminated|connection is closed|Client has encountered a connection error|not queryable|terminating connection|the database system is|server closed the connection|Query read timeout/i.test(m);
}

// A self-healing connection: query() runs one statement (autocommit); on a
// connection-class error it drops the client and rethrows with e.connLost=true
// (the caller decides what an unknown outcome means); the next query()
// reconnects with bounded backoff.
class PgConn {
  constructor(cfg, appName, { reconnectBudgetMs = 60000, statementTimeoutMs = 10000 } = {}) {
    this.cfg = cfg; this.appName = appName; this.client = null;
    this.reconnectBudgetMs = reconnectBudgetMs; this.statementTimeoutMs = statementTimeoutMs;
    this.reconnects = 0; this.backendPid = null;
  }
  async connect() {
    const deadline = Date.now() + this.reconnectBudgetMs;
    let delay = 50, lastErr = null;
    while (Date.now() < deadline) {
      const c = new Client(Object.assign({}, this.cfg, {
        application_name: this.appName, connectionTimeoutMillis: 3000,
        statement_timeout: this.statementTimeoutMs, query_timeout: this.statementTimeoutMs + 2000,
      }));
      c.on('error', () => { /* handled at next query */ if (this.client === c) this.client = null; });
      try {
        await c.connect();
        try { c.connection.stream.setNoDelay(true); } catch (_) { /* not a TCP socket */ }
        const r = await c.query('SELECT pg_backend_pid() AS pid');
        this.backendPid = r.rows[0].pid;
        this.client = c;
        return c;
      } catch (e) {
        lastErr = e;
        try { await c.end(); } catch (_) { /* ignore */ }
        await sleep(delay); delay = Math.min(delay * 2, 1000);
      }
    }
    const err = new Error('could not reconnect to PostgreSQL within budget: ' + (lastErr && lastErr.message));
    err.fatalConnect = true; throw err;
  }
  async query(text, params) {
    if (!this.client) { if (this.everConnected) this.reconnects++; await this.connect(); this.everConnected = true; }
    const c = this.client;
    try {
      return await c.query(text, params);
    } catch (e) {
      if (isConnectionError(e)) {
        e.connLost = true;
        if (this.client === c) this.client = null;
        c.end().catch(() => {});
      }
      throw e;
    }
  }
  async close() { const c = this.client; this.client = null; if (c) { try { await c.end(); } catch (_) { /* ignore */ } } }
}

// ---------------------------------------------------------------- stats
function percentile(sorted, p) {
  if (!sorted.length) return null;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}

module.exports = { makeRng, sleep, httpJson, PgConn, isConnectionError, percentile };

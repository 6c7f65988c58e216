// The gateway's security edges, end to end: "*" in configured JSON Pointers, the HTTP
// listener (Host, Origin, bearer token, loopback by default), values jsonb cannot hold
// (never in the server log), and the environment a wrapped server gets.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connectHost, env, MAIN, opOf, PKG, pool, ROLES, SERVERS, sleep, sql, tmp, urlFor, writeConfig } from './helpers.js';
import { watchServerLog } from './log.js';

const FAULT = ['node', SERVERS.fault];
const PROBE = ['node', path.join(PKG, 'dist/test/fixtures/probe-server.js')];
const effects = path.join(tmp, 'security-effects.jsonl');
const fenv = { EFFECTS_FILE: effects };
const count = (pred: (e: any) => boolean) =>
  (fs.existsSync(effects) ? fs.readFileSync(effects, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l)) : [])
    .filter(pred).length;

/** Runs the gateway CLI to its end (or its timeout): exit code, stdout, stderr. */
function runCli(args: string[], extra: Record<string, string | undefined> = {}, timeoutMs = 20_000):
  Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { env: env({ PGUSER: ROLES.agent, ...fenv, ...extra }), timeout: timeoutMs },
      (err, stdout, stderr) => resolve({ code: err ? (typeof (err as any).code === 'number' ? (err as any).code : null) : 0, stdout, stderr }));
  });
}

async function waitFor(f: () => Promise<void> | void, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try { await f(); return; } catch (e) { if (Date.now() > end || (e as { final?: boolean }).final) throw e; await sleep(100); }
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = (s.address() as net.AddressInfo).port; s.close(() => resolve(p)); });
  });
}

before(async () => {
  await sql('CREATE EXTENSION IF NOT EXISTS opledger');
});
after(async () => {
  await pool.end();
});

describe('"*" in configured JSON Pointers', () => {
  const cfg = writeConfig('wild', {
    server: 'wild-test',
    toolPrefix: 'wild.',
    tools: {
      send: { effect: 'non_idempotent_write', redact: ['/cards/*/pin'], hashExclude: ['/items/*/trace'] },
    },
  });
  before(async () => {
    const r = await runCli(['register', '--config', cfg], { PGUSER: ROLES.admin });
    assert.equal(r.code, 0, r.stderr);
  });

  test('redact /cards/*/pin: no PIN is part of the derived operation ID (another PIN: the same ID and OL001, not a second run)', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const cards = (a: string, b: string) => [{ last4: '4242', pin: a }, { last4: '0005', pin: b }];
      const r1: any = await host.client.callTool({ name: 'send', arguments: { item: 'wild-pin-1', cards: cards('1111', '2222') } });
      assert.equal(opOf(r1).decision, 'execute', JSON.stringify(r1));
      const r2: any = await host.client.callTool({ name: 'send', arguments: { item: 'wild-pin-1', cards: cards('9999', '8888') } });
      assert.equal(opOf(r2).operationId, opOf(r1).operationId, 'the PINs are not part of the ID');
      assert.equal(opOf(r2).decision, 'argument_mismatch', 'the fingerprint still sees them');
      assert.equal(count((e) => e.tool === 'send' && e.item === 'wild-pin-1'), 1, 'the tool ran once');
      const row = (await sql('SELECT args FROM opledger.operations WHERE operation_id = $1', [opOf(r1).operationId]))[0];
      assert.deepEqual(row.args.cards.map((c: any) => c.pin), ['[REDACTED]', '[REDACTED]']);
    } finally {
      await host.close();
    }
  });

  test('hashExclude /items/*/trace: a re-send with new traces is the same operation (replayed; the tool ran once)', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const items = (a: string, b: string) => [{ sku: 'A-1', trace: a }, { sku: 'B-2', trace: b }];
      const r1: any = await host.client.callTool({ name: 'send', arguments: { item: 'wild-trace-1', items: items('t-1', 't-2') } });
      const r2: any = await host.client.callTool({ name: 'send', arguments: { item: 'wild-trace-1', items: items('t-3', 't-4') } });
      assert.equal(opOf(r1).decision, 'execute');
      assert.equal(opOf(r2).decision, 'replay', JSON.stringify(r2));
      assert.equal(opOf(r2).operationId, opOf(r1).operationId);
      assert.equal(count((e) => e.tool === 'send' && e.item === 'wild-trace-1'), 1, 'the tool ran once');
      // The other members still count: another sku is another operation.
      const r3: any = await host.client.callTool({ name: 'send', arguments: { item: 'wild-trace-1', items: [{ sku: 'C-3', trace: 't-1' }, { sku: 'B-2', trace: 't-2' }] } });
      assert.notEqual(opOf(r3).operationId, opOf(r1).operationId);
    } finally {
      await host.close();
    }
  });

  test('a pointer list with "*" and a named token at one level is refused at start-up, as the ledger refuses it', async () => {
    for (const [list, field] of [[['/items/*/trace', '/items/0/sku'], 'hashExclude'], [['/cards/0/pin', '/cards/*/cvv'], 'redact']] as const) {
      const bad = writeConfig(`wild-mixed-${field}`, { tools: { send: { [field]: list } } });
      const r = await runCli(['--config', bad, '--', ...FAULT], {}, 15_000);
      assert.equal(r.code, 2, `exit code (${r.stderr})`);
      assert.match(r.stderr, new RegExp(`tools\\.send\\.${field}: invalid JSON Pointer .*cannot share its level`));
    }
  });

  test('a "*" in a pointer that names one value (providerRef, lookup.found, ${arg:...}) is refused at start-up', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ providerRef: '/refs/*/id' }, /tools\.send\.providerRef: .*'\*' token/],
      [{ lookup: { tool: 'find_sent', found: '/found/*' } }, /tools\.send\.lookup\.found: .*'\*' token/],
      [{ lookup: { tool: 'find_sent', arguments: { reference: '${arg:/refs/*}' } } }, /lookup\.arguments\.reference: \$\{arg:\/refs\/\*\}: .*'\*' token/],
    ];
    for (const [policy, expected] of cases) {
      const bad = writeConfig('wild-single', { tools: { send: { effect: 'non_idempotent_write', ...policy } } });
      const r = await runCli(['--config', bad, '--', ...FAULT], {}, 15_000);
      assert.equal(r.code, 2, `exit code (${r.stderr})`);
      assert.match(r.stderr, expected);
    }
  });
});

/** A raw HTTP request (node:http lets a test set Host, which fetch does not). */
function rawPost(port: number, headers: Record<string, string>, body: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({
      host: '127.0.0.1', port, path: '/mcp', method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': Buffer.byteLength(data), ...headers },
    }, (res) => {
      let b = '';
      res.on('data', (d) => { b += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: b }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const INITIALIZE = {
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** Starts the gateway with --listen; resolves when it listens (or rejects with its stderr when it exits first). */
async function startListening(args: string[], extra: Record<string, string | undefined> = {}): Promise<{ gw: ChildProcess; logs: string[] }> {
  const gw = spawn(process.execPath, [MAIN, ...args, '--', ...FAULT], { env: env({ PGUSER: ROLES.agent, ...fenv, ...extra }), stdio: ['ignore', 'ignore', 'pipe'] });
  const logs: string[] = [];
  gw.stderr!.on('data', (d) => logs.push(String(d)));
  let exited: number | null | undefined;
  gw.on('exit', (code) => { exited = code; });
  await waitFor(() => {
    if (exited !== undefined) throw Object.assign(new Error(`the gateway exited (${exited}): ${logs.join('')}`), { final: true });
    if (!logs.join('').includes('"listening"')) throw new Error('not yet');
  }).catch((e) => { gw.kill('SIGKILL'); throw e; });
  return { gw, logs };
}

describe('the HTTP listener (--listen)', () => {
  test('an initialize with Origin http://evil.example or Host evil.example is refused (403); a loopback client without them gets a session', async () => {
    const port = await freePort();
    const { gw } = await startListening(['--listen', `127.0.0.1:${port}`]);
    try {
      const evilOrigin = await rawPost(port, { origin: 'http://evil.example' }, INITIALIZE);
      assert.equal(evilOrigin.status, 403, evilOrigin.body);
      assert.equal(evilOrigin.headers['mcp-session-id'], undefined);
      const evilHost = await rawPost(port, { host: 'evil.example' }, INITIALIZE);
      assert.equal(evilHost.status, 403, evilHost.body);
      const evilBoth = await rawPost(port, { host: `evil.example:${port}`, origin: 'http://evil.example' }, INITIALIZE);
      assert.equal(evilBoth.status, 403, evilBoth.body);
      const ok = await rawPost(port, { host: `127.0.0.1:${port}`, origin: `http://localhost:${port}` }, INITIALIZE);
      assert.equal(ok.status, 200, ok.body);
      assert.ok(ok.headers['mcp-session-id'], 'a session');
    } finally {
      gw.kill('SIGTERM');
    }
  });

  test('--listen PORT binds to loopback only', async () => {
    const port = await freePort();
    const { gw, logs } = await startListening(['--listen', String(port)]);
    try {
      assert.match(logs.join(''), new RegExp(`"url":"http://127\\.0\\.0\\.1:${port}/mcp"`));
      const ok = await rawPost(port, {}, INITIALIZE);
      assert.equal(ok.status, 200, ok.body);
      // Another address of this machine (when it has one) finds nothing listening.
      const other = Object.values(os.networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal);
      if (other) {
        const refused = await new Promise<boolean>((resolve) => {
          const s = net.connect({ host: other.address, port }, () => { s.destroy(); resolve(false); });
          s.on('error', () => resolve(true));
        });
        assert.ok(refused, `nothing listens on ${other.address}:${port}`);
      }
    } finally {
      gw.kill('SIGTERM');
    }
  });

  test('a non-loopback bind without a token refuses to start; a token on the command line is refused', async () => {
    const port = await freePort();
    const r = await runCli(['--listen', `0.0.0.0:${port}`, '--', ...FAULT], {}, 15_000);
    assert.equal(r.code, 2, `exit code (${r.stderr})`);
    assert.match(r.stderr, /not a loopback address.*bearer token \(--token-file FILE or OPLEDGER_MCP_TOKEN\)/);
    const onCommandLine = await runCli(['--listen', `0.0.0.0:${port}`, '--token', 'a-token-anyone-can-see-in-ps', '--', ...FAULT], {}, 15_000);
    assert.equal(onCommandLine.code, 2, onCommandLine.stderr);
    assert.match(onCommandLine.stderr, /--token: a token on the command line is visible/);
  });

  test('with a token (file or variable): no token or a wrong one is 401, the right one works', async () => {
    const token = randomBytes(24).toString('hex');
    const tokenFile = path.join(tmp, 'token');
    fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    for (const how of ['file', 'variable'] as const) {
      const port = await freePort();
      const { gw } = how === 'file'
        ? await startListening(['--listen', `0.0.0.0:${port}`, '--token-file', tokenFile])
        : await startListening(['--listen', `0.0.0.0:${port}`], { OPLEDGER_MCP_TOKEN: token });
      try {
        const none = await rawPost(port, {}, INITIALIZE);
        assert.equal(none.status, 401, none.body);
        assert.match(String(none.headers['www-authenticate']), /^Bearer/);
        const wrong = await rawPost(port, { authorization: `Bearer ${token.slice(0, -1)}x` }, INITIALIZE);
        assert.equal(wrong.status, 401, wrong.body);
        const short = await rawPost(port, { authorization: 'Bearer x' }, INITIALIZE);
        assert.equal(short.status, 401, short.body);
        const client = new Client({ name: 'http-host', version: '1' }, { capabilities: {} });
        await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`),
          { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
        const tools = await client.listTools();
        assert.ok(tools.tools.some((t) => t.name === 'send'), `${how}: the tools of the wrapped server`);
        await client.close();
      } finally {
        gw.kill('SIGTERM');
      }
    }
  });
});

describe('values jsonb cannot hold never reach the server log', () => {
  const cfg = writeConfig('nul', {
    server: 'nul-test',
    toolPrefix: 'nul.',
    tools: {
      send: { effect: 'non_idempotent_write', redact: ['/card/pin'], hashExclude: ['/note'] },
      unstorable_result: { effect: 'non_idempotent_write', timeout: '5s' },
    },
  });
  before(async () => {
    const r = await runCli(['register', '--config', cfg], { PGUSER: ROLES.admin });
    assert.equal(r.code, 0, r.stderr);
  });

  test('a NUL (or an unpaired surrogate) in the arguments is refused before the ledger is asked: the result names the JSON Pointer, the tool is not called, the log has no secret', async () => {
    // Short, and right before the NUL: PostgreSQL's JSON error context shows the text
    // just before the bad character.
    const secret = `P${randomBytes(6).toString('hex')}`;
    const watch = await watchServerLog(pool);
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const cases: Array<[Record<string, unknown>, Record<string, unknown> | undefined, RegExp]> = [
        // a caller key: the ID is given, the arguments are the first ::jsonb parameter
        [{ item: 'nul-1', card: { pin: `${secret}\u0000` } }, { 'opledger/idempotency-key': `nul-key-${randomUUID()}` }, /NUL character \(\\u0000\) at \/card\/pin\b/],
        // a derived ID, the NUL in a member name
        [{ item: 'nul-2', card: { pin: secret }, extra: { 'a\u0000b': 1 } }, undefined, /in the member name at \/extra\/a\\u0000b/],
        // an unpaired surrogate
        [{ item: 'nul-3', card: { pin: secret }, list: ['ok', 'x\ud800y'] }, undefined, /unpaired UTF-16 surrogate at \/list\/1/],
      ];
      const answers: unknown[] = [];
      for (const [args, meta] of cases) {
        answers.push(await host.client.callTool({ name: 'send', arguments: args, ...(meta ? { _meta: meta } : {}) }).catch((e) => e));
      }
      // The server log first: what matters most is that no secret got there.
      const log = await watch.text();
      assert.ok(!log.includes(secret), `the server log carries the secret:\n${log}`);
      assert.ok(!log.includes('JSON data'), `a JSON parse error reached the server log:\n${log}`);
      cases.forEach(([, , where], i) => {
        const r = answers[i] as any;
        assert.equal(r.isError, true, String(r?.message ?? JSON.stringify(r)));
        assert.equal(opOf(r).decision, 'invalid_arguments');
        assert.match(r.content[0].text, where);
        assert.match(r.content[0].text, /The tool was not called/);
        assert.ok(!JSON.stringify(r).includes(secret), 'the answer does not carry the secret');
      });
      assert.equal(count((e) => ['nul-1', 'nul-2', 'nul-3'].includes(e.item)), 0, 'no call reached the server');
      const rows = await sql("SELECT count(*)::int AS n FROM opledger.operations WHERE tool = 'nul.send'");
      assert.equal(rows[0].n, 0, 'nothing reached the ledger');
    } finally {
      await host.close();
    }
  });

  test('a server answer with a NUL: recorded as unknown with the JSON Pointer (never the answer); the log has no secret', async () => {
    const secret = `T${randomBytes(6).toString('hex')}`;
    const watch = await watchServerLog(pool);
    const host = await connectHost({ config: cfg, server: PROBE, env: { PROBE_SECRET: secret } });
    try {
      const r: any = await host.client.callTool({ name: 'unstorable_result', arguments: { item: `u-${randomUUID()}` } });
      assert.equal(opOf(r).decision, 'execute');
      await waitFor(async () => {
        const row = (await sql('SELECT status::text, error FROM opledger.operations WHERE operation_id = $1', [opOf(r).operationId]))[0];
        assert.equal(row.status, 'unknown');
        assert.match(row.error.reason, /cannot be stored.*NUL.*at \/content\/0\/text/);
        assert.ok(!JSON.stringify(row).includes(secret));
      }, 5_000);
      // Read once the ledger has the report, so the log covers the refused write too.
      const log = await watch.text();
      assert.ok(!log.includes(secret), `the server log carries the secret:\n${log}`);
    } finally {
      await host.close();
    }
  });
});

describe('the wrapped server\'s environment', () => {
  // libpq's environment variables (PostgreSQL 15's documentation, and those added since).
  const LIBPQ = ['PGHOST', 'PGHOSTADDR', 'PGPORT', 'PGDATABASE', 'PGUSER', 'PGPASSWORD', 'PGPASSFILE', 'PGCHANNELBINDING',
    'PGSERVICE', 'PGSERVICEFILE', 'PGOPTIONS', 'PGAPPNAME', 'PGSSLMODE', 'PGREQUIRESSL', 'PGSSLCOMPRESSION', 'PGSSLCERT',
    'PGSSLKEY', 'PGSSLROOTCERT', 'PGSSLCRL', 'PGSSLCRLDIR', 'PGSSLSNI', 'PGREQUIREPEER', 'PGSSLMINPROTOCOLVERSION',
    'PGSSLMAXPROTOCOLVERSION', 'PGGSSENCMODE', 'PGKRBSRVNAME', 'PGGSSLIB', 'PGCONNECT_TIMEOUT', 'PGCLIENTENCODING',
    'PGTARGETSESSIONATTRS', 'PGDATESTYLE', 'PGTZ', 'PGGEQO', 'PGSYSCONFDIR', 'PGLOCALEDIR', 'PGREQUIREAUTH',
    'PGSSLCERTMODE', 'PGLOADBALANCEHOSTS', 'PGGSSDELEGATION', 'PGSSLNEGOTIATION'];
  // Values the gateway's own driver (node-postgres) accepts while it connects to the ledger.
  const harmless: Record<string, string> = {
    PGPASSWORD: 'not-asked-with-trust', PGPASSFILE: '/nonexistent/pgpass', PGSSLMODE: 'disable', PGCONNECT_TIMEOUT: '10',
    PGCLIENTENCODING: 'UTF8', PGOPTIONS: '-c statement_timeout=0', PGAPPNAME: 'opledger-env-test', PGSSLNEGOTIATION: 'postgres',
  };

  test('none of the ledger\'s connection variables (every libpq one, DATABASE_URL, OPLEDGER_*) reach it; PATH and other variables do', async () => {
    const set: Record<string, string> = {};
    for (const k of LIBPQ) if (process.env[k] === undefined) set[k] = harmless[k] ?? `${k.toLowerCase()}-value`;
    const host = await connectHost({
      server: PROBE,
      // DATABASE_URL: the gateway's ledger connection (its agent role), as in production.
      env: { ...set, DATABASE_URL: urlFor(ROLES.agent), OPLEDGER_SOME_SETTING: 'gateway-only', PROBE_UNRELATED: 'kept' },
    });
    try {
      const r: any = await host.client.callTool({ name: 'environment', arguments: { show: ['PROBE_UNRELATED', 'PATH'] } });
      const names: string[] = r.structuredContent.names;
      const leaked = names.filter((n) => LIBPQ.includes(n) || n === 'DATABASE_URL' || n.startsWith('OPLEDGER_'));
      assert.deepEqual(leaked, [], 'variables of the ledger\'s connection in the wrapped server');
      assert.equal(r.structuredContent.values.PROBE_UNRELATED, 'kept');
      assert.equal(r.structuredContent.values.PATH, process.env.PATH);
    } finally {
      await host.close();
    }
  });
});

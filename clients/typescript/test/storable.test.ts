// Values PostgreSQL's jsonb cannot hold (a NUL character, an unpaired UTF-16 surrogate):
// the client refuses them before sending, naming the JSON Pointer, so that the server
// never prints the JSON text around them (secrets included) in an error CONTEXT, and so
// never in its log.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';

import {
  Ledger, NotJsonSerializableError, OperationFailedError, OutcomeUnknownError, UnstorableJsonError, executeOnce, type JsonValue,
} from '../src/index.js';

// The test cluster's server log: scripts/cluster.sh starts the server with its log in
// $PGHOST/server.log (the cluster's directory); with logging_collector on,
// pg_current_logfile() names it. (clients/mcp/test/log.ts is the same reader for the
// gateway's tests; here it lives in the test file, since node --test runs every file of
// dist/test/.)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function logFile(db: pg.Pool): Promise<string> {
  const r = await db.query(`SELECT pg_catalog.pg_current_logfile() AS f,
                                   pg_catalog.current_setting('data_directory') AS d`);
  const { f, d } = r.rows[0] as { f: string | null; d: string };
  const candidates = [f ? path.resolve(d, f) : '', path.join(process.env.PGHOST ?? '', 'server.log'), path.join(path.dirname(d), 'server.log')];
  const found = candidates.find((c) => c && fs.existsSync(c));
  if (!found) throw new Error(`the server log is not where the test cluster writes it (${candidates.filter((c) => c).join(', ')})`);
  return found;
}

/**
 * Starts watching the server log (as a superuser pool: it reads data_directory and
 * writes a marker). `text()` writes a WARNING marker, waits until the marker is in the
 * log (so every line logged before it is there too) and returns what was logged since.
 */
async function watchServerLog(db: pg.Pool): Promise<{ text(): Promise<string> }> {
  const file = await logFile(db);
  const start = fs.statSync(file).size;
  return {
    async text() {
      const marker = `opledger-test-log-marker ${randomUUID()}`;
      await db.query(`DO $$ BEGIN RAISE WARNING '%', '${marker}'; END $$`);
      for (let i = 0; i < 100; i++) {
        const fd = fs.openSync(file, 'r');
        try {
          const size = fs.fstatSync(fd).size;
          const buf = Buffer.alloc(Math.max(0, size - start));
          fs.readSync(fd, buf, 0, buf.length, start);
          const text = buf.toString('utf8');
          if (text.includes(marker)) return text;
        } finally {
          fs.closeSync(fd);
        }
        await sleep(50);
      }
      throw new Error(`the marker never reached ${file}: not the server's log?`);
    },
  };
}

// The superuser's pool: it registers tools, reads the ledger and writes the log marker.
const adminPool = new pg.Pool({ max: 2 });
const ledger = new Ledger(adminPool);
const tool = (name: string) => `ts.storable.${name}.${randomUUID().slice(0, 8)}`;
// Short, and right before the bad character: PostgreSQL's JSON error context shows the
// text just before it.
const newSecret = () => `S${randomBytes(6).toString('hex')}`;

before(async () => { await adminPool.query('CREATE EXTENSION IF NOT EXISTS opledger'); });
after(async () => { await adminPool.end(); });

describe('values jsonb cannot hold', () => {
  it('a NUL or an unpaired surrogate in args is refused before sending: UnstorableJsonError names the JSON Pointer, never the value; the server log has no secret', async () => {
    const secret = newSecret();
    const t = tool('card');
    await ledger.registerTool(t, 'non_idempotent_write', { redact: ['/card/pin'] });
    const watch = await watchServerLog(adminPool);
    const cases: Array<[JsonValue, string, RegExp]> = [
      [{ card: { pin: `${secret}\u0000` } }, '/card/pin', /a NUL character \(\\u0000\) at \/card\/pin/],
      [{ card: { pin: secret }, ['x\u0000y']: 1 }, '/x\\u0000y', /a NUL character \(\\u0000\) in the member name at \/x\\u0000y/],
      [{ card: { pin: `${secret}\ud800` } }, '/card/pin', /an unpaired UTF-16 surrogate at \/card\/pin/],
      [{ lines: ['ok', { pin: `${secret}\udc00` }] }, '/lines/1/pin', /unpaired UTF-16 surrogate at \/lines\/1\/pin/],
    ];
    const ids: string[] = [];
    const errors: unknown[] = [];
    for (const [args] of cases) {
      const id = randomUUID();
      ids.push(id);
      errors.push(await ledger.begin({ operationId: id, tool: t, args }).then(() => undefined, (e) => e));
    }
    // derive_operation_id's parts are cast the same way.
    errors.push(await ledger.deriveOperationId('storable-test', { key: `${secret}\u0000` }).then(() => undefined, (e) => e));
    const log = await watch.text();
    assert.ok(!log.includes(secret), `the server log carries the secret:\n${log}`);
    assert.ok(!log.includes('JSON data'), `a JSON parse error reached the server log:\n${log}`);
    cases.forEach(([, pointer, message], i) => {
      const e = errors[i];
      assert.ok(e instanceof UnstorableJsonError, String(e));
      assert.ok(e instanceof NotJsonSerializableError, 'a kind of NotJsonSerializableError');
      assert.equal(e.pointer, pointer);
      assert.match(e.message, message);
      assert.match(e.message, /^args cannot be stored in the ledger: .* Next: remove that character/);
      assert.ok(!e.message.includes(secret), e.message);
    });
    const parts = errors[cases.length];
    assert.ok(parts instanceof UnstorableJsonError, String(parts));
    assert.equal(parts.pointer, '/key');
    const n = (await adminPool.query('SELECT count(*)::int AS n FROM opledger.operations WHERE operation_id = ANY($1::text[])', [ids])).rows[0].n;
    assert.equal(n, 0, 'nothing was sent');
  });

  it('a result with a NUL ends unknown (the outcome is kept); the stored error names the pointer, and neither it nor the server log has the secret', async () => {
    const secret = newSecret();
    const t = tool('email');
    await ledger.registerTool(t, 'non_idempotent_write');
    const watch = await watchServerLog(adminPool);
    const op = { operationId: randomUUID(), tool: t, args: { to: 'a@example.com' } };
    let sent = 0;
    const err = await executeOnce(adminPool, op, async () => { sent++; return { receipt: `${secret}\u0000` }; }).then(() => undefined, (e) => e);
    const log = await watch.text();
    assert.ok(!log.includes(secret), `the server log carries the secret:\n${log}`);
    assert.equal(sent, 1);
    assert.ok(err instanceof OutcomeUnknownError, String(err));
    assert.equal(err.stage, 'result');
    assert.ok(err.cause instanceof UnstorableJsonError, String(err.cause));
    const row = (await adminPool.query('SELECT status::text, error FROM opledger.operations WHERE operation_id = $1', [op.operationId])).rows[0];
    assert.equal(row.status, 'unknown');
    assert.match(JSON.stringify(row.error), /NUL character .* at \/receipt/);
    assert.ok(!JSON.stringify(row.error).includes(secret));
  });

  it('a tool error whose message holds a NUL or an unpaired surrogate is recorded (the characters as U+FFFD), not left pending', async () => {
    const t = tool('refund');
    await ledger.registerTool(t, 'non_idempotent_write');
    for (const bad of ['\u0000', '\ud800']) {
      const op = { operationId: randomUUID(), tool: t, args: { order: 1 } };
      const err = await executeOnce(adminPool, op, async () => { throw new Error(`declined${bad}by the provider`); },
        { classifyError: () => 'failed' }).then(() => undefined, (e) => e);
      assert.ok(err instanceof OperationFailedError, String(err));
      const row = (await adminPool.query('SELECT status::text, error FROM opledger.operations WHERE operation_id = $1', [op.operationId])).rows[0];
      assert.equal(row.status, 'failed', 'recorded at once, not pending until the lease ends');
      assert.equal(row.error.message, 'declined\ufffdby the provider');
    }
  });

  it('a string that merely looks like an escape ("\\\\u0000" written out) is stored as it is', async () => {
    const t = tool('plain');
    const id = randomUUID();
    const d = await ledger.begin({ operationId: id, tool: t, args: { text: 'a backslash, then u0000: \\u0000 and \\ud800' } });
    assert.equal(d.decision, 'execute');
    const row = (await adminPool.query('SELECT args FROM opledger.operations WHERE operation_id = $1', [id])).rows[0];
    assert.equal(row.args.text, 'a backslash, then u0000: \\u0000 and \\ud800');
  });
});

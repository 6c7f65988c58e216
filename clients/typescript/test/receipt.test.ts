// The receipt verifier (src/receipt.ts) and its command line (opledger-verify-receipt)
// against receipts a real opledger database issued: valid ones, and each kind of
// tampering found from the outside: an event's detail changed, an event deleted, two
// reordered, the result replaced (each shows in the evidence the ledger then gives),
// a receipt forged with another key, a receipt of another operation. Connection from
// the PG* variables, as the superuser (it tampers with the tables in transactions
// that roll back).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

import { canonicalJson, verifyReceipt, type PublishedKey, type ReceiptEvidence } from '../src/index.js';

const pool = new pg.Pool({ max: 2 });
const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'bin', 'verify-receipt.js');
const dir = mkdtempSync(join(tmpdir(), 'opledger-receipts-'));
const tool = `receipts.ts.${randomUUID().slice(0, 8)}`;
let keys: PublishedKey[];

async function receiptOf(id: string): Promise<Record<string, unknown>> {
  const { rows } = await pool.query('SELECT receipt FROM opledger.receipts WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1', [id]);
  return rows[0].receipt;
}
async function evidenceOf(id: string, client: pg.PoolClient | pg.Pool = pool): Promise<ReceiptEvidence> {
  const { rows } = await client.query('SELECT opledger.receipt_evidence($1) AS e', [id]);
  return rows[0].e;
}
// The evidence as it is after `tamper` ran in a transaction that is then rolled back.
async function tamperedEvidence(id: string, ...tamper: string[]): Promise<ReceiptEvidence> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const statement of tamper) await client.query(statement, [id]);
    return await evidenceOf(id, client);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

let files = 0;
function file(value: unknown): string {
  const path = join(dir, `f${files++}.json`);
  writeFileSync(path, JSON.stringify(value));
  return path;
}
// Runs the command-line verifier: its exit code and the line it printed.
function runCli(receipt: unknown, extra: string[] = [], keyArgs: string[] = ['--keys', file(keys)]) {
  const r = spawnSync(process.execPath, [cli, file(receipt), ...keyArgs, ...extra], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout.trim(), err: r.stderr.trim() };
}
// Both verifiers must agree: the library and the command line.
function expectVerdict(receipt: unknown, opts: { operationId?: string; evidence?: ReceiptEvidence }, valid: boolean,
                       reason: RegExp) {
  const v = verifyReceipt(receipt, keys, opts);
  assert.equal(v.valid, valid, v.reason);
  assert.match(v.reason, reason);
  const extra: string[] = [];
  if (opts.operationId !== undefined) extra.push('--operation-id', opts.operationId);
  if (opts.evidence !== undefined) extra.push('--evidence', file(opts.evidence));
  const r = runCli(receipt, extra);
  assert.equal(r.code, valid ? 0 : 1, r.out + r.err);
  assert.match(r.out, valid ? /^valid: / : /^invalid: /);
  assert.match(r.out, reason);
}

const ids = { ok: `rts-ok-${randomUUID()}`, other: `rts-other-${randomUUID()}`, fail: `rts-fail-${randomUUID()}` };

describe('receipts verified outside the database', () => {
  before(async () => {
    await pool.query("CREATE EXTENSION IF NOT EXISTS opledger");
    await pool.query("SELECT opledger.register_tool($1, 'non_idempotent_write', receipts => true)", [tool]);
    for (const id of [ids.ok, ids.other, ids.fail]) {
      await pool.query('SELECT opledger.op_begin($1, $2, $3)', [id, tool, { n: id }]);
      await pool.query('SELECT opledger.op_begin($1, $2, $3)', [id, tool, { n: id }]);  // in_progress
    }
    await pool.query('SELECT opledger.op_succeed($1, $2)', [ids.ok, { amount: 1.5, note: 'é', list: [3, null] }]);
    await pool.query('SELECT opledger.op_succeed($1, $2)', [ids.other, { ok: true }]);
    await pool.query('SELECT opledger.op_fail($1, $2, false)', [ids.fail, { code: 'E' }]);
    keys = (await pool.query('SELECT key_id, public_key FROM opledger.receipt_public_keys()')).rows;
  });
  after(async () => {
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  });

  it('accepts the receipts the ledger issued, alone and with their evidence', async () => {
    for (const id of [ids.ok, ids.fail]) {
      const receipt = await receiptOf(id);
      expectVerdict(receipt, {}, true, /the signature matches/);
      expectVerdict(receipt, { operationId: id, evidence: await evidenceOf(id) }, true, /history in the evidence matches/);
    }
    const receipt = await receiptOf(ids.ok);
    const key = keys.find((k) => k.key_id === receipt.key_id)!.public_key;
    const r = runCli(receipt, [], ['--key', key]);
    assert.equal(r.code, 0, r.out);
  });

  it('takes a key that begins with "-" as the value of --key, after a space or "="', async () => {
    const receipt: Record<string, unknown> = { ...(await receiptOf(ids.ok)) };
    delete receipt.signature;
    let signer = generateKeyPairSync('ed25519');
    while (!(signer.publicKey.export({ format: 'jwk' }).x as string).startsWith('-')) signer = generateKeyPairSync('ed25519');
    const signerKey = signer.publicKey.export({ format: 'jwk' }).x as string;
    const signature = sign(null, Buffer.from(canonicalJson(receipt), 'utf8'), signer.privateKey).toString('base64url');
    for (const keyArgs of [['--key', signerKey], [`--key=${signerKey}`]]) {
      const r = runCli({ ...receipt, signature }, [], keyArgs);
      assert.equal(r.code, 0, r.out);
    }
  });

  it('agrees with the database on the canonical form', async () => {
    const value = { b: [1, 1.5, -0, 1e21, 'é\u2028"'], a: { z: null, y: true } };
    const { rows } = await pool.query('SELECT opledger.jcs($1::jsonb) AS c', [JSON.stringify(value)]);
    assert.equal(canonicalJson(value), rows[0].c);
  });

  it('finds a changed event detail', async () => {
    const evidence = await tamperedEvidence(ids.ok,
      "UPDATE opledger.events SET detail = '{\"result\":{\"amount\":2}}' WHERE operation_id = $1 AND kind = 'succeed'");
    expectVerdict(await receiptOf(ids.ok), { evidence }, false, /chain is broken at seq 3/);
  });

  it('finds a deleted event', async () => {
    const evidence = await tamperedEvidence(ids.ok, 'DELETE FROM opledger.events WHERE operation_id = $1 AND seq = 2');
    expectVerdict(await receiptOf(ids.ok), { evidence }, false, /chain is broken at seq 3/);
  });

  it('finds two reordered events', async () => {
    const evidence = await tamperedEvidence(ids.ok,
      'UPDATE opledger.events SET seq = -seq WHERE operation_id = $1 AND seq IN (1, 2)',
      'UPDATE opledger.events SET seq = CASE seq WHEN -1 THEN 2 ELSE 1 END WHERE operation_id = $1 AND seq < 0');
    expectVerdict(await receiptOf(ids.ok), { evidence }, false, /chain is broken at seq 1/);
  });

  it('finds a replaced result', async () => {
    const evidence = await tamperedEvidence(ids.ok, `UPDATE opledger.operations SET result = '{"amount": 100}' WHERE operation_id = $1`);
    expectVerdict(await receiptOf(ids.ok), { evidence }, false, /result or error is not the one the receipt states/);
  });

  it('refuses a receipt forged with another key', async () => {
    const receipt = { ...(await receiptOf(ids.ok)), status: 'failed' };
    delete (receipt as Record<string, unknown>).signature;
    const forger = generateKeyPairSync('ed25519');
    const signature = sign(null, Buffer.from(canonicalJson(receipt), 'utf8'), forger.privateKey).toString('base64url');
    const forged = { ...receipt, signature };
    expectVerdict(forged, {}, false, /signature does not match/);
    // ...though it verifies against the forger's own key, which is not published.
    const forgerKey = forger.publicKey.export({ format: 'jwk' }).x as string;
    assert.equal(verifyReceipt(forged, forgerKey).valid, true);
    assert.equal(runCli(forged, [], ['--key', forgerKey]).code, 0);
    // A receipt altered after signing fails the same way.
    expectVerdict({ ...(await receiptOf(ids.ok)), attempt: 2 }, {}, false, /signature does not match/);
  });

  it('refuses a receipt of another operation', async () => {
    const receipt = await receiptOf(ids.other);
    expectVerdict(receipt, { operationId: ids.ok }, false, /receipt is of another operation/);
    expectVerdict(receipt, { evidence: await evidenceOf(ids.ok) }, false, /evidence is of another operation/);
  });

  it('keeps verifying a receipt whose operation was purged', async () => {
    const receipt = await receiptOf(ids.ok);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SELECT opledger.op_purge('0 seconds')");
      const evidence = await evidenceOf(ids.ok, client);
      assert.equal(evidence.operation!.purged, true);
      assert.equal(evidence.events.length, 0);
      const { rows } = await client.query('SELECT valid FROM opledger.verify_receipt($1, $2)', [receipt, ids.ok]);
      assert.equal(rows[0].valid, true);
      expectVerdict(receipt, { evidence }, true, /purged/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('says how to call it', () => {
    const r = spawnSync(process.execPath, [cli], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /usage: opledger-verify-receipt/);
  });
});

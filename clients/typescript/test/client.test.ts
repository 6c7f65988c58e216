// Tests against a real PostgreSQL with the opledger extension (connection from the
// usual PG* environment variables). Run: npm test
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';

import {
  ArgumentMismatchError, InvalidTransitionError, Ledger, NeedsApprovalError, OperationFailedError,
  OutcomeUnknownError, ReconciliationRequiredError, UnregisteredToolError, executeOnce, reconcileBatch,
  type BeginResult, type JsonValue,
} from '../src/index.js';

const pool = new pg.Pool({ max: 4 });
const ledger = new Ledger(pool);
const uid = () => randomUUID();
const tool = (name: string) => `ts.${name}.${uid().slice(0, 8)}`;

/** A fake provider that can lose its acknowledgement, like the one in the refund story. */
class FakeProvider {
  effects = new Map<string, number>();
  loseNextAck = false;
  failNext: Error | null = null;
  async call(ctx: { operationId: string }): Promise<{ refund_id: string }> {
    if (this.failNext) { const e = this.failNext; this.failNext = null; throw e; }
    this.effects.set(ctx.operationId, (this.effects.get(ctx.operationId) ?? 0) + 1);
    if (this.loseNextAck) { this.loseNextAck = false; throw new Error('ETIMEDOUT'); }
    return { refund_id: `re_${ctx.operationId.slice(0, 6)}` };
  }
  count(id: string) { return this.effects.get(id) ?? 0; }
}

before(async () => {
  await pool.query('CREATE EXTENSION IF NOT EXISTS opledger');
});
after(async () => { await pool.end(); });

describe('executeOnce', () => {
  it('executes once, then replays the stored result without calling the tool', async () => {
    const t = tool('refund');
    await ledger.registerTool(t, 'non_idempotent_write', { guarantee: 'provider_key' });
    const p = new FakeProvider();
    const op = { operationId: uid(), tool: t, args: { charge: 'ch_1', amount_cents: 500 } };
    const decisions: string[] = [];
    const first = await executeOnce(pool, op, (c) => p.call(c), { onDecision: (d) => decisions.push(d.decision) });
    const second = await executeOnce(pool, { ...op, args: { amount_cents: 500, charge: 'ch_1' } }, (c) => p.call(c),
      { onDecision: (d) => decisions.push(d.decision) });
    assert.deepEqual(second, first);
    assert.equal(p.count(op.operationId), 1);
    assert.deepEqual(decisions, ['execute', 'replay']);
  });

  it('marks a timeout unknown and reconciles through the hook instead of calling the tool again', async () => {
    const t = tool('refund');
    await ledger.registerTool(t, 'non_idempotent_write', { guarantee: 'read_before_write' });
    const p = new FakeProvider();
    p.loseNextAck = true;
    const op = { operationId: uid(), tool: t, args: { charge: 'ch_2', amount_cents: 700 }, worker: 'w1' };
    const decisions: string[] = [];
    const result = await executeOnce(pool, op, (c) => p.call(c), {
      onDecision: (d) => decisions.push(d.decision),
      reconcile: async (ctx) => (p.count(ctx.operationId) > 0
        ? { outcome: 'applied', result: { refund_id: 'found' }, providerRef: 're_found' }
        : { outcome: 'not_applied' }),
    });
    assert.deepEqual(result, { refund_id: 'found' });
    assert.equal(p.count(op.operationId), 1);
    assert.deepEqual(decisions, ['execute', 'reconcile', 'replay']);
    const again = await ledger.begin(op);
    assert.equal(again.decision, 'replay');
    assert.equal(again.providerRef, 're_found');
  });

  it('without a reconcile hook, a timeout is OutcomeUnknownError and the next call ReconciliationRequiredError', async () => {
    const t = tool('refund');
    await ledger.registerTool(t, 'non_idempotent_write');
    const p = new FakeProvider();
    p.loseNextAck = true;
    const op = { operationId: uid(), tool: t, args: { n: 1 } };
    await assert.rejects(executeOnce(pool, op, (c) => p.call(c)), OutcomeUnknownError);
    await assert.rejects(executeOnce(pool, op, (c) => p.call(c)), (e: unknown) => {
      assert.ok(e instanceof ReconciliationRequiredError);
      assert.equal(e.begin.status, 'unknown');
      return true;
    });
    assert.equal(p.count(op.operationId), 1);
  });

  it('runs an idempotent_write tool again with the same key after an unknown outcome', async () => {
    const t = tool('upsert');
    await ledger.registerTool(t, 'idempotent_write', {
      guarantee: 'provider_key', backoffBase: '10 milliseconds', backoffMax: '50 milliseconds',
    });
    const p = new FakeProvider();
    p.loseNextAck = true;
    const op = { operationId: uid(), tool: t, args: { ticket: 'T-1', title: 'printer on fire' } };
    await assert.rejects(executeOnce(pool, op, (c) => p.call(c)), OutcomeUnknownError);
    const seen: BeginResult[] = [];
    await executeOnce(pool, op, (c) => p.call(c), { minSleepMs: 10, onDecision: (d) => seen.push(d) });
    assert.equal(seen.at(-1)!.decision, 'execute');
    assert.equal(seen.at(-1)!.attempt, 2);
    assert.ok(!seen.some((d) => d.decision === 'reconcile'));
    assert.equal(p.count(op.operationId), 2); // same key twice: the provider deduplicates
  });

  it('runs the tool again after the reconciler finds it was not applied', async () => {
    const t = tool('email');
    await ledger.registerTool(t, 'non_idempotent_write', { backoffBase: '10 milliseconds', backoffMax: '50 milliseconds' });
    const p = new FakeProvider();
    p.failNext = new Error('connection reset before the request was sent');
    const op = { operationId: uid(), tool: t, args: { to: 'a@example.com' } };
    const decisions: string[] = [];
    const result = await executeOnce(pool, op, (c) => p.call(c), {
      onDecision: (d) => decisions.push(d.decision),
      reconcile: async () => ({ outcome: 'not_applied' }),
    });
    assert.ok(result.refund_id.startsWith('re_'));
    assert.equal(p.count(op.operationId), 1);
    assert.equal(decisions[0], 'execute');
    assert.equal(decisions[1], 'reconcile');
    assert.equal(decisions.at(-1), 'execute');
  });

  it('retries a retryable failure after the backoff given by retry_after', async () => {
    const t = tool('ticket');
    await ledger.registerTool(t, 'non_idempotent_write', { backoffBase: '200 milliseconds', backoffMax: '1 second' });
    const p = new FakeProvider();
    p.failNext = Object.assign(new Error('503 Service Unavailable'), { status: 503 });
    const op = { operationId: uid(), tool: t, args: { title: 'printer on fire' } };
    const seen: BeginResult[] = [];
    const slept: number[] = [];
    const started = Date.now();
    await executeOnce(pool, op, (c) => p.call(c), {
      classifyError: (e) => ((e as { status?: number }).status === 503 ? 'retryable' : 'unknown'),
      onDecision: (d) => seen.push(d),
      sleep: async (ms) => { slept.push(ms); await new Promise((r) => setTimeout(r, ms)); },
      minSleepMs: 10,
    });
    const decisions = seen.map((d) => d.decision);
    assert.equal(decisions[0], 'execute');
    assert.ok(decisions.includes('retry_later'), `decisions: ${decisions}`);
    assert.equal(decisions.at(-1), 'execute');
    assert.equal(seen.at(-1)!.attempt, 2);
    const retryLater = seen.find((d) => d.decision === 'retry_later')!;
    assert.ok(retryLater.retryAfter instanceof Date);
    assert.ok(Date.now() - started >= 150, 'waited for the backoff');
    assert.equal(p.count(op.operationId), 1);
  });

  it('surfaces a definite failure as OperationFailedError, now and on every later call', async () => {
    const t = tool('charge');
    await ledger.registerTool(t, 'non_idempotent_write');
    const p = new FakeProvider();
    p.failNext = new Error('card declined');
    const op = { operationId: uid(), tool: t, args: { amount_cents: 100 } };
    for (let i = 0; i < 2; i++) {
      await assert.rejects(executeOnce(pool, op, (c) => p.call(c), { classifyError: () => 'failed' }), (e: unknown) => {
        assert.ok(e instanceof OperationFailedError);
        assert.equal(e.begin.status, 'failed');
        assert.deepEqual(e.error, { name: 'Error', message: 'card declined' });
        return true;
      });
    }
    assert.equal(p.count(op.operationId), 0);
  });

  it('waits while another worker holds the lease, then replays its result', async () => {
    const t = tool('deploy');
    await ledger.registerTool(t, 'non_idempotent_write');
    const op = { operationId: uid(), tool: t, args: { release: 'v42' } };
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const slow = executeOnce(pool, { ...op, worker: 'a' }, async () => { calls++; await gate; return { ok: 'a' }; });
    // Let worker a take the lease first.
    for (let i = 0; i < 100 && calls === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const decisions: string[] = [];
    const waiting = executeOnce(pool, { ...op, worker: 'b' }, async () => { calls++; return { ok: 'b' }; },
      { onDecision: (d) => decisions.push(d.decision), minSleepMs: 20, maxSleepMs: 50 });
    await new Promise((r) => setTimeout(r, 150));
    release();
    assert.deepEqual(await slow, { ok: 'a' });
    assert.deepEqual(await waiting, { ok: 'a' });
    assert.equal(calls, 1);
    assert.equal(decisions[0], 'in_progress');
    assert.equal(decisions.at(-1), 'replay');
  });

  it('stops at needs_approval for an irreversible tool and runs once approved', async () => {
    const t = tool('wire');
    await ledger.registerTool(t, 'irreversible');
    const op = { operationId: uid(), tool: t, args: { iban: 'XX00', amount_cents: 1 } };
    let calls = 0;
    const run = () => executeOnce(pool, op, async () => { calls++; return { sent: true }; });
    await assert.rejects(run(), NeedsApprovalError);
    await assert.rejects(run(), NeedsApprovalError);
    await ledger.approve(op.operationId, 'alice', 'checked with the customer');
    assert.deepEqual(await run(), { sent: true });
    assert.deepEqual(await run(), { sent: true });
    assert.equal(calls, 1);
  });
});

describe('errors', () => {
  it('maps OL001 to ArgumentMismatchError with the differing JSON Pointers', async () => {
    const t = tool('refund');
    await ledger.registerTool(t, 'non_idempotent_write', { hashExclude: ['/trace_id'] });
    const id = uid();
    await ledger.begin({ operationId: id, tool: t, args: { charge: 'ch_9', amount_cents: 2000, trace_id: 'a' } });
    // hash_exclude: a different trace_id is the same operation
    const same = await ledger.begin({ operationId: id, tool: t, args: { trace_id: 'b', amount_cents: 2000.0, charge: 'ch_9' } });
    assert.equal(same.decision, 'in_progress');
    await assert.rejects(
      ledger.begin({ operationId: id, tool: t, args: { charge: 'ch_9', amount_cents: 2500 } }),
      (e: unknown) => {
        assert.ok(e instanceof ArgumentMismatchError);
        assert.equal(e.sqlstate, 'OL001');
        assert.ok(e.detail?.includes('/amount_cents'), e.detail);
        assert.ok(e.differingPointers.includes('/amount_cents'), String(e.differingPointers));
        return true;
      });
  });

  it('maps OL002 to InvalidTransitionError (unknown ID, stale attempt)', async () => {
    await assert.rejects(ledger.succeed(uid(), { x: 1 }), (e: unknown) => {
      assert.ok(e instanceof InvalidTransitionError);
      assert.equal(e.sqlstate, 'OL002');
      return true;
    });
    const t = tool('refund');
    const id = uid();
    const d = await ledger.begin({ operationId: id, tool: t, args: {} });
    assert.equal(d.decision, 'execute');
    await assert.rejects(ledger.markUnknown(id, { reason: 'timeout' }, { attempt: d.attempt + 1 }), InvalidTransitionError);
    const row = await ledger.markUnknown(id, { reason: 'timeout' }, { attempt: d.attempt });
    assert.equal(row.status, 'unknown');
  });

  it('maps OL003 to UnregisteredToolError when require_registered_tools is on', async () => {
    const client = new pg.Client();
    await client.connect();
    try {
      await client.query('SET opledger.require_registered_tools = on');
      const l = new Ledger(client);
      await assert.rejects(l.begin({ operationId: uid(), tool: tool('never-registered'), args: {} }), (e: unknown) => {
        assert.ok(e instanceof UnregisteredToolError);
        assert.equal(e.sqlstate, 'OL003');
        return true;
      });
      const t = tool('registered');
      await l.registerTool(t, 'read_only');
      assert.equal((await l.begin({ operationId: uid(), tool: t, args: {} })).decision, 'execute');
    } finally {
      await client.end();
    }
  });
});

describe('Ledger', () => {
  it('derives the same operation ID for the same parts in any key order', async () => {
    const a = await ledger.deriveOperationId('agent/refunds', { conversation: 'c-1', step: 3 });
    const b = await ledger.deriveOperationId('agent/refunds', { step: 3, conversation: 'c-1' });
    const c = await ledger.deriveOperationId('agent/refunds', { step: 4, conversation: 'c-1' });
    assert.equal(a, b);
    assert.notEqual(a, c);
    assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('reconcileBatch claims unknown operations and resolves what the hook decides', async () => {
    const t = tool('refund');
    await ledger.registerTool(t, 'non_idempotent_write');
    const ids: string[] = [uid(), uid()];
    for (const id of ids) {
      const d = await ledger.begin({ operationId: id, tool: t, args: { id } as JsonValue });
      await ledger.markUnknown(id, { reason: 'timeout' }, { attempt: d.attempt });
    }
    const worker = `rec-${uid().slice(0, 6)}`;
    const seen: string[] = [];
    // Claim everything unknown (other tests may have left some): resolve only ours.
    const done = await reconcileBatch(pool, worker, async (ctx) => {
      if (!ids.includes(ctx.operationId)) return undefined;
      seen.push(ctx.operationId);
      return ctx.operationId === ids[0]
        ? { outcome: 'applied', result: { ok: true }, providerRef: 'ref-0' }
        : { outcome: 'failed', error: { reason: 'provider says declined' } };
    }, { maxRows: 100 });
    assert.deepEqual(new Set(seen), new Set(ids));
    const byId = new Map(done.map((x) => [x.operation.operationId, x]));
    assert.equal(byId.get(ids[0])!.operation.status, 'succeeded');
    assert.equal(byId.get(ids[1])!.operation.status, 'failed');
    assert.equal((await ledger.begin({ operationId: ids[0], tool: t, args: { id: ids[0] } })).decision, 'replay');
    assert.equal((await ledger.begin({ operationId: ids[1], tool: t, args: { id: ids[1] } })).decision, 'failed');
  });
});

// Tests against a real PostgreSQL with the opledger extension (connection from the
// usual PG* environment variables). Run: npm test
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';

import {
  ArgumentMismatchError, InvalidTransitionError, Ledger, NeedsApprovalError, NotJsonSerializableError,
  OperationFailedError, OutcomeUnknownError, ReconciliationRequiredError, UnregisteredToolError, WaitTimeoutError,
  currentOperation, executeOnce, idempotentTool, reconcileBatch,
  type BeginResult, type JsonValue, type Queryable,
} from '../src/index.js';
import * as client from '../src/index.js';

// The orchestrator runs as a login role in opledger_agent (`pool`, `ledger`), the
// reconcile path as one in opledger_reconciler (`recPool`), approvals as one in
// opledger_approver; tool registration and other set-up as the superuser (`adminPool`,
// `admin`), as docs/clients.md tells users to do. Without opledger.create_roles()
// (extension before 0.3.0) every pool is the superuser's.
const AGENT = 't_agent', RECONCILER = 't_reconciler', APPROVER = 't_approver';
const adminPool = new pg.Pool({ max: 2 });
const admin = new Ledger(adminPool);
let roles = false;
let beginHasOwner = false;
let pool: pg.Pool;
let recPool: pg.Pool;
let approverPool: pg.Pool;
let ledger: Ledger;
const poolAs = (user: string, max = 4) => {
  const p = new pg.Pool(roles ? { user, max } : { max });
  p.on('error', () => {}); // an idle client whose backend was terminated: the pool drops it
  return p;
};
const connectAs = async (user: string) => {
  const c = new pg.Client(roles ? { user } : {});
  c.on('error', () => {});
  await c.connect();
  return c;
};
const statusOf = async (id: string) =>
  (await adminPool.query('SELECT status::text AS s FROM opledger.operations WHERE operation_id = $1', [id])).rows[0].s;
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
  await adminPool.query('CREATE EXTENSION IF NOT EXISTS opledger');
  roles = (await adminPool.query("SELECT to_regprocedure('opledger.create_roles()') IS NOT NULL AS r")).rows[0].r;
  if (roles) {
    await adminPool.query('SELECT opledger.create_roles()');
    for (const [login, group] of [[AGENT, 'opledger_agent'], [RECONCILER, 'opledger_reconciler'], [APPROVER, 'opledger_approver']]) {
      try {
        await adminPool.query(`CREATE ROLE ${login} LOGIN IN ROLE ${group}`);
      } catch (e) {
        if (!['42710', '23505'].includes((e as { code?: string }).code ?? '')) throw e; // exists already
      }
    }
  }
  beginHasOwner = (await adminPool.query(`SELECT count(*)::int AS n FROM pg_attribute
     WHERE attrelid = 'opledger.begin_result'::regclass AND attname = 'lease_owner' AND NOT attisdropped`)).rows[0].n === 1;
  pool = poolAs(AGENT);
  recPool = poolAs(RECONCILER, 2);
  approverPool = poolAs(APPROVER, 1);
  ledger = new Ledger(pool);
});
after(async () => { await Promise.all([pool, recPool, approverPool, adminPool].map((p) => p.end())); });

describe('executeOnce', () => {
  it('executes once, then replays the stored result without calling the tool', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write', { guarantee: 'provider_key' });
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
    await admin.registerTool(t, 'non_idempotent_write', { guarantee: 'read_before_write' });
    const p = new FakeProvider();
    p.loseNextAck = true;
    const op = { operationId: uid(), tool: t, args: { charge: 'ch_2', amount_cents: 700 }, worker: 'w1' };
    const decisions: string[] = [];
    const result = await executeOnce(pool, op, (c) => p.call(c), {
      onDecision: (d) => decisions.push(d.decision),
      reconciler: recPool,
      reconcile: async (ctx) => (p.count(ctx.operationId) > 0
        ? { outcome: 'applied', result: { refund_id: 'found' }, providerRef: 're_found' }
        : { outcome: 'not_applied' }),
    });
    assert.deepEqual(result, { refund_id: 'found' });
    assert.equal(p.count(op.operationId), 1);
    assert.deepEqual(decisions, ['execute', 'reconcile']);   // op_resolve's row answers: no second op_begin
    const again = await ledger.begin(op);
    assert.equal(again.decision, 'replay');
    assert.equal(again.providerRef, 're_found');
  });

  it('without a reconcile hook, a timeout is OutcomeUnknownError and the next call ReconciliationRequiredError', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
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
    await admin.registerTool(t, 'idempotent_write', {
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
    await admin.registerTool(t, 'non_idempotent_write', { backoffBase: '10 milliseconds', backoffMax: '50 milliseconds' });
    const p = new FakeProvider();
    p.failNext = new Error('connection reset before the request was sent');
    const op = { operationId: uid(), tool: t, args: { to: 'a@example.com' } };
    const decisions: string[] = [];
    const result = await executeOnce(pool, op, (c) => p.call(c), {
      onDecision: (d) => decisions.push(d.decision),
      reconciler: recPool,
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
    await admin.registerTool(t, 'non_idempotent_write', { backoffBase: '200 milliseconds', backoffMax: '1 second' });
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
    await admin.registerTool(t, 'non_idempotent_write');
    const p = new FakeProvider();
    p.failNext = new Error('card declined');
    const op = { operationId: uid(), tool: t, args: { amount_cents: 100 } };
    for (let i = 0; i < 2; i++) {
      await assert.rejects(executeOnce(pool, op, (c) => p.call(c), { classifyError: () => 'failed' }), (e: unknown) => {
        assert.ok(e instanceof OperationFailedError);
        assert.equal(e.begin.status, 'failed');
        assert.deepEqual(e.error, { name: 'Error', message: 'card declined' });
        assert.match(e.message, /new operation ID/);
        return true;
      });
    }
    assert.equal(p.count(op.operationId), 0);
  });

  it('waits while another worker holds the lease, then replays its result', async () => {
    const t = tool('deploy');
    await admin.registerTool(t, 'non_idempotent_write');
    const op = { operationId: uid(), tool: t, args: { release: 'v42' } };
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    let started!: () => void;
    const aRuns = new Promise<void>((r) => { started = r; });
    const slow = executeOnce(pool, { ...op, worker: 'a' }, async () => { calls++; started(); await gate; return { ok: 'a' }; });
    // Worker a holds the lease once its tool runs.
    await aRuns;
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
    await admin.registerTool(t, 'irreversible');
    const op = { operationId: uid(), tool: t, args: { iban: 'XX00', amount_cents: 1 } };
    let calls = 0;
    const run = () => executeOnce(pool, op, async () => { calls++; return { sent: true }; });
    await assert.rejects(run(), NeedsApprovalError);
    await assert.rejects(run(), NeedsApprovalError);
    await new Ledger(approverPool).approve(op.operationId, 'alice', 'checked with the customer');
    assert.deepEqual(await run(), { sent: true });
    assert.deepEqual(await run(), { sent: true });
    assert.equal(calls, 1);
  });

  it('never runs an operation the approver rejected: it ends failed with approval_rejected', async () => {
    const t = tool('wire');
    await admin.registerTool(t, 'irreversible');
    const op = { operationId: uid(), tool: t, args: { iban: 'XX00', amount_cents: 2 } };
    let calls = 0;
    const run = () => executeOnce(pool, op, async () => { calls++; return { sent: true }; });
    await assert.rejects(run(), NeedsApprovalError);
    // The agent's role may not decline its own operation.
    await assert.rejects(ledger.reject(op.operationId, 'mallory'), client.PermissionDeniedError);
    const row = await new Ledger(approverPool).reject(op.operationId, 'alice', 'not this customer');
    assert.equal(row.status, 'failed');
    assert.deepEqual(row.error, { reason: 'approval_rejected' });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(run(), (e: unknown) => e instanceof OperationFailedError
        && JSON.stringify(e.error) === JSON.stringify({ reason: 'approval_rejected' }));
    }
    assert.equal(calls, 0);
  });
});

describe('errors', () => {
  it('maps OL001 to ArgumentMismatchError with the differing JSON Pointers', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write', { hashExclude: ['/trace_id'] });
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
      // (the superuser's session: the setting and register_tool are admin matters)
      const l = new Ledger(client);
      await assert.rejects(l.begin({ operationId: uid(), tool: tool('never-registered'), args: {} }), (e: unknown) => {
        assert.ok(e instanceof UnregisteredToolError);
        assert.equal(e.sqlstate, 'OL003');
        assert.match(e.message, /register_tool/); // the HINT: what to do next
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
    await admin.registerTool(t, 'non_idempotent_write');
    const ids: string[] = [uid(), uid()];
    for (const id of ids) {
      const d = await ledger.begin({ operationId: id, tool: t, args: { id } as JsonValue });
      await ledger.markUnknown(id, { reason: 'timeout' }, { attempt: d.attempt });
    }
    const worker = `rec-${uid().slice(0, 6)}`;
    const seen: string[] = [];
    // Claim everything unknown (other tests may have left some): resolve only ours.
    const done = await reconcileBatch(recPool, worker, async (ctx) => {
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
    assert.deepEqual([byId.get(ids[0])!.outcome, byId.get(ids[1])!.outcome], ['applied', 'failed']);
    assert.equal((await ledger.begin({ operationId: ids[0], tool: t, args: { id: ids[0] } })).decision, 'replay');
    assert.equal((await ledger.begin({ operationId: ids[1], tool: t, args: { id: ids[1] } })).decision, 'failed');
  });
});

describe('never loses an outcome', () => {
  for (const [what, make] of [
    ['a BigInt', () => ({ ids: [1n, 2n] })],
    ['a circular structure', () => { const r: Record<string, unknown> = { id: 1 }; r.self = r; return r; }],
    ['a Set (JSON.stringify would silently store {})', () => ({ ids: new Set([1, 2]) })],
  ] as const) {
    it(`a result with ${what} ends unknown, and a retry with a reconcile hook reconciles it`, async () => {
      const t = tool('email');
      await admin.registerTool(t, 'non_idempotent_write');
      const op = { operationId: uid(), tool: t, args: { to: 'a@example.com', template: 'welcome' } };
      let sent = 0;
      const send = async () => { sent++; return make() as unknown as JsonValue; };
      await assert.rejects(executeOnce(pool, op, send), (e: unknown) => {
        assert.ok(e instanceof OutcomeUnknownError);
        assert.equal(e.stage, 'result');
        assert.equal(e.recorded, true);
        assert.ok(e.cause instanceof NotJsonSerializableError, String(e.cause));
        return true;
      });
      assert.equal(await statusOf(op.operationId), 'unknown');
      const stored = (await adminPool.query('SELECT error FROM opledger.operations WHERE operation_id = $1',
        [op.operationId])).rows[0].error;
      assert.equal(stored.stage, 'result');
      const decisions: string[] = [];
      const result = await executeOnce(pool, op, send, {
        reconciler: recPool,
        reconcile: async () => ({ outcome: 'applied', result: { ids: ['1', '2'] }, providerRef: 'msg-1' }),
        onDecision: (d) => decisions.push(d.decision),
      });
      assert.deepEqual(result, { ids: ['1', '2'] });
      assert.deepEqual(decisions, ['reconcile']);   // op_resolve's row answers the call
      assert.equal(sent, 1);
    });
  }

  it('an error from op_succeed marks the operation unknown', async () => {
    const t = tool('ticket');
    await admin.registerTool(t, 'non_idempotent_write');
    const flaky: Queryable = {
      query: (text, values) => (text.includes('op_succeed')
        ? Promise.reject(Object.assign(new Error('Connection terminated unexpectedly'), { code: undefined }))
        : pool.query(text, values)),
    };
    const op = { operationId: uid(), tool: t, args: { title: 'printer on fire' } };
    await assert.rejects(executeOnce(flaky, op, async () => ({ ticket: 'T-9' })), (e: unknown) => {
      assert.ok(e instanceof OutcomeUnknownError);
      assert.equal(e.stage, 'report');
      assert.equal(e.recorded, true);
      return true;
    });
    assert.equal(await statusOf(op.operationId), 'unknown');
  });

  it('a lost connection ends unknown when the lease expires, and a retry reconciles it', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
    const client = await connectAs(AGENT);
    const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    const op = { operationId: uid(), tool: t, args: { charge: 'ch_5', amount_cents: 100 }, lease: '1 second' };
    let calls = 0;
    const refund = async () => {
      calls++;
      await adminPool.query('SELECT pg_terminate_backend($1)', [pid]);
      return { refund_id: 're_5' };
    };
    await assert.rejects(executeOnce(client, op, refund), (e: unknown) => {
      assert.ok(e instanceof OutcomeUnknownError);
      assert.equal(e.stage, 'report');
      assert.equal(e.recorded, false);
      assert.match(e.message, /lease expires/);
      return true;
    });
    await client.end().catch(() => {});
    const decisions: string[] = [];
    const result = await executeOnce(pool, op, refund, {
      reconciler: recPool, maxWaitMs: 10_000, onDecision: (d) => decisions.push(d.decision),
      reconcile: async () => ({ outcome: 'applied', result: { refund_id: 're_5' }, providerRef: 're_5' }),
    });
    assert.deepEqual(result, { refund_id: 're_5' });
    assert.equal(calls, 1);
    assert.equal(decisions.at(-1), 'reconcile', String(decisions));   // op_resolve's row answers the call
  });
});

describe('every error says what to do next', () => {
  const saysHowToReconcile = (e: Error & { nextStep?: string }, id: string) => {
    for (const needle of ['reconcile hook', 'reconcileBatch', 'op_resolve', 'manual => true', id]) {
      assert.ok(e.message.includes(needle), `${needle} missing in: ${e.message}`);
    }
    assert.ok(e.nextStep);
  };

  it('OutcomeUnknownError and ReconciliationRequiredError', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
    const op = { operationId: uid(), tool: t, args: { n: 1 } };
    const boom = async (): Promise<JsonValue> => { throw new Error('ETIMEDOUT'); };
    await assert.rejects(executeOnce(pool, op, boom), (e: unknown) => {
      assert.ok(e instanceof OutcomeUnknownError);
      saysHowToReconcile(e, op.operationId);
      return true;
    });
    await assert.rejects(executeOnce(pool, op, boom), (e: unknown) => {
      assert.ok(e instanceof ReconciliationRequiredError);
      saysHowToReconcile(e, op.operationId);
      return true;
    });
  });

  it('NeedsApprovalError names op_approve and the approver role', async () => {
    const t = tool('wire');
    await admin.registerTool(t, 'irreversible');
    await assert.rejects(executeOnce(pool, { operationId: uid(), tool: t, args: { n: 1 } }, async () => ({})),
      (e: unknown) => {
        assert.ok(e instanceof NeedsApprovalError);
        assert.match(e.message, /op_approve/);
        assert.match(e.message, /opledger_approver/);
        return true;
      });
  });

  it('maxWaitMs waits that long, then shows retry_after and the lease owner', async () => {
    const t = tool('deploy');
    await admin.registerTool(t, 'non_idempotent_write'); // 5-minute lease
    const id = uid();
    const held = await ledger.begin({ operationId: id, tool: t, args: { release: 'v44' }, worker: 'worker-a' });
    assert.equal(held.decision, 'execute');
    const started = Date.now();
    await assert.rejects(executeOnce(pool, { operationId: id, tool: t, args: { release: 'v44' }, worker: 'worker-b' },
      async () => ({ deployed: true }), { maxWaitMs: 2000 }), (e: unknown) => {
      assert.ok(e instanceof WaitTimeoutError);
      const elapsed = Date.now() - started;
      assert.ok(elapsed >= 1900 && elapsed < 4000, `waited ${elapsed} ms`);
      assert.match(e.message, /still in_progress after 2000 ms/);
      assert.match(e.message, /retry_after/);
      assert.ok(e.retryAfter instanceof Date);
      assert.ok(e.message.includes(e.retryAfter.toISOString()), e.message);
      if (!roles || beginHasOwner) {
        assert.equal(e.leaseOwner, 'worker-a');
        assert.match(e.message, /worker 'worker-a'/);
      } else {
        assert.match(e.message, /owner not visible/);
      }
      return true;
    });
  });

  it('an unknown effect or guarantee lists the valid values', async () => {
    await assert.rejects(admin.registerTool(tool('x'), 'idempotent' as never),
      /read_only, idempotent_write, non_idempotent_write, irreversible/);
    await assert.rejects(admin.registerTool(tool('x'), 'read_only', { guarantee: 'exactly_once' as never }),
      /provider_key/);
  });

  it('args must be a JSON object, not a JSON string', async () => {
    await assert.rejects(ledger.begin({ operationId: uid(), tool: tool('x'), args: '{"to":"a@example.com"}' }),
      /JSON\.stringify/);
    await assert.rejects(ledger.begin({ operationId: uid(), tool: tool('x'), args: [1, 2] }), TypeError);
  });

  it('under the shipped roles the agent may not register tools, and in-call reconciling needs a reconciler', async (t) => {
    if (!roles) { t.skip('opledger.create_roles() is not in this extension version'); return; }
    await assert.rejects(ledger.registerTool(tool('x'), 'read_only'), (e: unknown) =>
      (e as { code?: string }).code === '42501');
    const tl = tool('refund');
    await admin.registerTool(tl, 'non_idempotent_write');
    const op = { operationId: uid(), tool: tl, args: { n: 3 } };
    const boom = async (): Promise<JsonValue> => { throw new Error('ETIMEDOUT'); };
    await assert.rejects(executeOnce(pool, op, boom), OutcomeUnknownError);
    await assert.rejects(executeOnce(pool, op, boom, { reconcile: async () => ({ outcome: 'not_applied' }) }),
      (e: unknown) => e instanceof ReconciliationRequiredError && /options\.reconciler/.test(e.message));
  });
});

describe('types', () => {
  it('ctx.args has the type of op.args', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
    interface RefundArgs { charge: string; amount_cents: number }   // an interface, not only a type literal
    const args: RefundArgs = { charge: 'ch_3', amount_cents: 300 };
    const out = await executeOnce(pool, { operationId: uid(), tool: t, args }, async (ctx) => {
      const cents: number = ctx.args.amount_cents;            // compile-time: typed, no cast
      return { refunded: cents, charge: ctx.args.charge.toUpperCase() };
    });
    const refunded: number = out.refunded;
    assert.equal(refunded, 300);
  });
});

describe('idempotentTool (framework tool objects)', () => {
  it('wraps a Vercel AI SDK-shaped tool: { description, inputSchema, execute(input, { toolCallId }) }', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
    const provider = new FakeProvider();
    const conversation = uid();
    // A local stand-in of the shape tool() returns (no dependency on the SDK).
    const refundTool = {
      description: 'Refund a charge',
      inputSchema: { type: 'object', properties: { charge: { type: 'string' }, amount_cents: { type: 'number' } } },
      execute: async (input: { charge: string; amount_cents: number }, options: { toolCallId: string; messages: unknown[] }) => {
        const key = currentOperation()!.operationId;
        assert.ok(options.toolCallId.startsWith('call_'));
        return { ...(await provider.call({ operationId: key })), amount_cents: input.amount_cents };
      },
    };
    const safe = idempotentTool(pool, t, refundTool, {
      operationId: (input) => ledger.deriveOperationId('ts-test/vercel', { conversation, charge: input.charge }),
      conversationId: () => conversation,
    });
    assert.equal(safe.description, 'Refund a charge');
    assert.equal(safe.inputSchema, refundTool.inputSchema);
    const a = await safe.execute({ charge: 'ch_1', amount_cents: 500 }, { toolCallId: 'call_1', messages: [] });
    const b = await safe.execute({ charge: 'ch_1', amount_cents: 500 }, { toolCallId: 'call_2', messages: [] });
    assert.deepEqual(b, a);
    assert.equal(a.amount_cents, 500);
    assert.equal([...provider.effects.values()].reduce((x, y) => x + y, 0), 1);
    await assert.rejects(safe.execute({ charge: 'ch_1', amount_cents: 900 }, { toolCallId: 'call_3', messages: [] }),
      ArgumentMismatchError);
  });

  it('wraps an OpenAI Agents SDK-shaped tool: { name, description, parameters, execute(input, runContext, details) }', async () => {
    const t = tool('email');
    await admin.registerTool(t, 'non_idempotent_write');
    let sent = 0;
    const sendEmail = {
      name: 'send_email',
      description: 'Send an email',
      parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'], additionalProperties: false },
      strict: true,
      execute: async (input: { to: string }, _runContext?: { context: { step: number } },
        _details?: { toolCall?: { callId?: string } }) => {
        sent++;
        return `sent to ${input.to} with key ${currentOperation()!.operationId}`;
      },
    };
    const conversation = uid();
    const safe = idempotentTool(pool, t, sendEmail, {
      operationId: (input, runContext) => ledger.deriveOperationId('ts-test/openai',
        { conversation, step: runContext?.context.step ?? 0, to: input.to }),
    });
    assert.equal(safe.name, 'send_email');
    assert.equal(safe.strict, true);
    const first = await safe.execute({ to: 'a@example.com' }, { context: { step: 1 } }, { toolCall: { callId: 'c1' } });
    const again = await safe.execute({ to: 'a@example.com' }, { context: { step: 1 } }, { toolCall: { callId: 'c2' } });
    assert.equal(again, first);
    assert.match(first, /^sent to a@example.com with key [0-9a-f-]{36}$/);
    assert.equal(sent, 1);
    await safe.execute({ to: 'a@example.com' }, { context: { step: 2 } });   // another step: another operation
    assert.equal(sent, 2);
  });
});

// The first hour of a newcomer: what used to pass silently or without a next step.
describe('notices: a mistyped tool name does not run silently', () => {
  const notRegistered = /the tool of this call is not registered/;

  it('hands the NOTICE of an unregistered tool to onNotice, with the tool, DETAIL and HINT', async () => {
    const typo = tool('emial.send');
    const notices: Array<{ message: string; detail?: string; hint?: string; call: { fn: string; tool?: string } }> = [];
    const out = await executeOnce(pool, { operationId: uid(), tool: typo, args: { to: 'a@example.com' } },
      async () => ({ sent: true }), { onNotice: (n) => notices.push(n) });
    assert.deepEqual(out, { sent: true });
    assert.equal(notices.length, 1, JSON.stringify(notices));
    assert.match(notices[0].message, notRegistered);
    assert.equal(notices[0].call.fn, 'op_begin');
    assert.equal(notices[0].call.tool, typo);
    assert.match(notices[0].detail ?? '', /non_idempotent_write/);
    assert.match(notices[0].hint ?? '', /register_tool/);
  });

  it('by default writes it with console.warn (a Ledger on a pool, and on a single client)', async (t) => {
    const warned: string[] = [];
    t.mock.method(console, 'warn', (...a: unknown[]) => { warned.push(a.map(String).join(' ')); });
    const typo = tool('paymnets.refund');
    await new Ledger(pool).begin({ operationId: uid(), tool: typo, args: {} });
    const c = await connectAs(AGENT);
    try {
      const typo2 = tool('paymnets.refund');
      await new Ledger(c).begin({ operationId: uid(), tool: typo2, args: {} });
      assert.equal(warned.length, 2, warned.join('\n'));
      assert.match(warned[0], notRegistered);
      assert.ok(warned[0].includes(JSON.stringify(typo)), warned[0]);
      assert.ok(warned[1].includes(JSON.stringify(typo2)), warned[1]);
      assert.match(warned[0], /HINT: .*register_tool/);
    } finally {
      await c.end();
    }
  });

  it('a registered tool raises no notice', async () => {
    const t = tool('registered');
    await admin.registerTool(t, 'read_only');
    const notices: unknown[] = [];
    await executeOnce(pool, { operationId: uid(), tool: t, args: {} }, async () => 1, { onNotice: (n) => notices.push(n) });
    assert.deepEqual(notices, []);
  });
});

describe('timeoutMs', () => {
  it('past the timeout the outcome is unknown, recorded in the ledger, and the tool is told to stop', async () => {
    const t = tool('slow');
    await admin.registerTool(t, 'non_idempotent_write'); // 5-minute lease
    const op = { operationId: uid(), tool: t, args: { n: 1 } };
    let aborted = false;
    const started = Date.now();
    await assert.rejects(executeOnce(pool, op, async ({ signal }) => {
      signal.addEventListener('abort', () => { aborted = true; });
      await new Promise((r) => setTimeout(r, 3000));
      return { late: true };
    }, { timeoutMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof OutcomeUnknownError, String(e));
      assert.equal(e.stage, 'timeout');
      assert.equal(e.recorded, true);
      assert.match(e.message, /did not answer within timeoutMs/);
      return true;
    });
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 2000, `returned after ${elapsed} ms`);
    assert.ok(aborted);
    assert.equal(await statusOf(op.operationId), 'unknown');
    const err = (await adminPool.query('SELECT error FROM opledger.operations WHERE operation_id = $1',
      [op.operationId])).rows[0].error;
    assert.equal(err.stage, 'timeout');
  });

  it('with a reconcile hook, a timeout is reconciled like any unknown outcome', async () => {
    const t = tool('slow');
    await admin.registerTool(t, 'non_idempotent_write');
    const op = { operationId: uid(), tool: t, args: { n: 2 } };
    const out = await executeOnce(pool, op, () => new Promise<JsonValue>((r) => setTimeout(() => r('late'), 2000)), {
      timeoutMs: 200, reconciler: recPool, reconcile: async () => ({ outcome: 'applied', result: 'found' }),
    });
    assert.equal(out, 'found');
  });

  it('refuses to call the tool when the lease ends before the timeout would', async () => {
    const t = tool('slow');
    await admin.registerTool(t, 'non_idempotent_write', { lease: '2 seconds' });
    const op = { operationId: uid(), tool: t, args: { n: 3 } };
    let called = false;
    await assert.rejects(executeOnce(pool, op, async () => { called = true; return 1; }, { timeoutMs: 5000 }),
      (e: unknown) => {
        assert.ok(e instanceof client.LeaseTooShortError, String(e));
        assert.match(e.message, /lease/);
        assert.match(e.nextStep ?? '', /op\.lease|register_tool\(lease/);
        return true;
      });
    assert.equal(called, false);
    assert.equal(await statusOf(op.operationId), 'retryable'); // nothing ran; the lease is given back
    // A lease that outlasts the timeout (per attempt: op.lease) runs the tool.
    const ok = await executeOnce(pool, { ...op, operationId: uid(), lease: '10 seconds' }, async () => 'ran',
      { timeoutMs: 5000 });
    assert.equal(ok, 'ran');
  });
});

describe('duplicates_prevented counts only duplicates the agent sent', () => {
  const prevented = async () => Number((await adminPool.query(
    'SELECT duplicates_prevented FROM opledger.metrics')).rows[0].duplicates_prevented);

  it('one executeOnce with an inline reconcile hook and no retry prevents no duplicate', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
    const p = new FakeProvider();
    p.loseNextAck = true;
    const op = { operationId: uid(), tool: t, args: { n: 1 } };
    const before = await prevented();
    const out = await executeOnce(pool, op, (c) => p.call(c), {
      reconciler: recPool,
      reconcile: async () => ({ outcome: 'applied', result: { refund_id: 'found' } }),
    });
    assert.deepEqual(out, { refund_id: 'found' });
    assert.equal(await prevented() - before, 0);
    // The agent's own retry is a prevented duplicate.
    assert.deepEqual(await executeOnce(pool, op, (c) => p.call(c)), { refund_id: 'found' });
    assert.equal(await prevented() - before, 1);
  });

  it('a hook that finds the call failed ends it as OperationFailedError, without a second op_begin', async () => {
    const t = tool('refund');
    await admin.registerTool(t, 'non_idempotent_write');
    const op = { operationId: uid(), tool: t, args: { n: 2 } };
    const before = await prevented();
    const decisions: string[] = [];
    await assert.rejects(executeOnce(pool, op, async () => { throw new Error('ETIMEDOUT'); }, {
      reconciler: recPool, onDecision: (d) => decisions.push(d.decision),
      reconcile: async () => ({ outcome: 'failed', error: { code: 'card_declined' } }),
    }), (e: unknown) => {
      assert.ok(e instanceof OperationFailedError);
      assert.deepEqual(e.error, { code: 'card_declined' });
      return true;
    });
    assert.deepEqual(decisions, ['execute', 'reconcile']);
    assert.equal(await prevented() - before, 0);
  });
});

describe('every database error says what happened and what to do', () => {
  it('a bounds error carries its DETAIL and HINT in the message', async () => {
    await assert.rejects(ledger.begin({ operationId: 'x'.repeat(1025), tool: tool('x'), args: {} }), (e: unknown) => {
      assert.ok(e instanceof client.LedgerSqlError, String(e));
      assert.equal(e.sqlstate, '22023');
      assert.match(e.message, /operation_id is too long/);
      assert.match(e.message, /DETAIL: It has 1025 bytes; the limit is 1024/);
      assert.match(e.message, /HINT: Pass at most 1024 bytes/);
      assert.ok(e.nextStep);
      return true;
    });
    await assert.rejects(ledger.begin({ operationId: '', tool: tool('x'), args: {} }), (e: unknown) => {
      assert.ok(e instanceof client.LedgerSqlError, String(e));
      assert.match(e.message, /operation_id must not be empty/);
      assert.match(e.message, /HINT: .*derive_operation_id/);
      return true;
    });
  });

  it('42501 names the function and the role it needs', async (t) => {
    if (!roles) { t.skip('opledger.create_roles() is not in this extension version'); return; }
    await assert.rejects(ledger.registerTool(tool('x'), 'read_only'), (e: unknown) => {
      assert.ok(e instanceof client.PermissionDeniedError, String(e));
      assert.equal(e.code, '42501');
      assert.equal(e.requiredRole, 'opledger_admin');
      assert.match(e.message, /permission denied for function register_tool/);
      assert.match(e.message, /HINT: opledger\.register_tool needs a role in opledger_admin/);
      assert.match(e.nextStep ?? '', /GRANT opledger_admin TO/);
      return true;
    });
    await assert.rejects(new Ledger(recPool).begin({ operationId: uid(), tool: tool('x'), args: {} }), (e: unknown) =>
      e instanceof client.PermissionDeniedError && e.requiredRole === 'opledger_agent' && /opledger_agent/.test(e.message));
  });
});

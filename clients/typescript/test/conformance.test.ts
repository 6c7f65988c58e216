// The conformance corpus (tests/conformance/decisions.json), replayed through this
// client against a real PostgreSQL with the opledger extension: each case's set-up
// calls go through Ledger, each op_begin's decision and next_action are compared with
// the corpus, and executeOnce must then do what the case says (call the tool or not,
// return which result, throw which error). The Python client and the MCP gateway
// replay the same file. Run: npm test (connection from the PG* variables).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import pg from 'pg';

import {
  Ledger, NEXT_ACTIONS, NeedsApprovalError, parseBeginRow, OperationFailedError, ReconciliationRequiredError, WaitTimeoutError,
  executeOnce, type BeginResult, type JsonValue, type ToolEffect,
} from '../src/index.js';

interface Step { do: string; [k: string]: any }
interface Case {
  name: string;
  tool: { effect: ToolEffect; max_attempts?: number; backoff_base?: string; backoff_max?: string };
  steps: Step[];
  expect: { decision: string; next_action: string; status: string; attempt: number };
  client: { calls_tool: boolean; returns?: JsonValue | 'tool_result'; raises?: string };
}
interface Corpus { tool_result: JsonValue; next_actions: string[]; raises: string[]; cases: Case[] }

const root = process.env.OPLEDGER_ROOT ?? new URL('../../../../', import.meta.url).pathname;
const corpus = JSON.parse(fs.readFileSync(`${root}/tests/conformance/decisions.json`, 'utf8')) as Corpus;

// The superuser only registers the tools. Every other call runs as the role a
// deployment gives it: the agent's calls and executeOnce as a member of
// opledger_agent, resolve of opledger_reconciler, approve and reject of
// opledger_approver; so the corpus also shows that those roles suffice.
const adminPool = new pg.Pool({ max: 2 });
const admin = new Ledger(adminPool);
const LOGINS = { agent: 't_agent', reconciler: 't_reconciler', approver: 't_approver' } as const;
let pools: pg.Pool[] = [];
let ledger: Ledger, reconciler: Ledger, approver: Ledger;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What this client runs for each kind of set-up step; a kind missing here fails its case. */
const STEPS: Record<string, (id: string, tool: string, s: Step) => Promise<unknown>> = {
  begin: async (id, tool, s) => {
    const d = await ledger.begin({ operationId: id, tool, args: { case: true }, worker: s.worker, lease: s.lease });
    assert.deepEqual(
      { decision: d.decision, next_action: d.nextAction, ...pick(d, s.expect) },
      { ...s.expect }, 'a set-up op_begin');
  },
  succeed: (id, _t, s) => ledger.succeed(id, s.result, { attempt: s.attempt }),
  fail: (id, _t, s) => ledger.fail(id, s.error, s.retryable ?? false),
  mark_unknown: (id, _t, s) => ledger.markUnknown(id, s.error),
  resolve: (id, _t, s) => reconciler.resolve(id, s.outcome, { result: s.result }),
  approve: (id, _t, s) => approver.approve(id, s.approver),
  reject: (id, _t, s) => approver.reject(id, s.approver),
  sleep: (_id, _t, s) => sleep(s.ms),
};

/** The error executeOnce throws for each `raises` of the corpus. */
const RAISES: Record<string, new (...args: any[]) => Error> = {
  wait_timeout: WaitTimeoutError,
  operation_failed: OperationFailedError,
  reconciliation_required: ReconciliationRequiredError,
  needs_approval: NeedsApprovalError,
};

function pick(d: BeginResult, expect: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if ('status' in expect) out.status = d.status;
  if ('attempt' in expect) out.attempt = d.attempt;
  return out;
}

before(async () => {
  await adminPool.query('CREATE EXTENSION IF NOT EXISTS opledger');
  await adminPool.query('SELECT opledger.create_roles()');
  for (const [kind, login] of Object.entries(LOGINS)) {
    try {
      await adminPool.query(`CREATE ROLE ${login} LOGIN IN ROLE opledger_${kind}`);
    } catch (e) {
      if (!['42710', '23505'].includes((e as { code?: string }).code ?? '')) throw e; // another test file made it
    }
  }
  pools = Object.values(LOGINS).map((user) => new pg.Pool({ user, max: 1 }));
  [ledger, reconciler, approver] = pools.map((p) => new Ledger(p));
});
after(async () => { await Promise.all([adminPool, ...pools].map((p) => p.end())); });

describe('conformance corpus', () => {
  it('names the same next actions as this client, and every one is exercised by a case', () => {
    assert.deepEqual([...NEXT_ACTIONS], corpus.next_actions);
    const used = new Set(corpus.cases.map((c) => c.expect.next_action));
    assert.deepEqual([...used].sort(), [...NEXT_ACTIONS].sort());
    assert.deepEqual(Object.keys(RAISES).sort(), [...corpus.raises].sort());
  });

  it('refuses an op_begin row without a next_action (an extension older than 0.5.0) or with an unknown one', () => {
    const row = { decision: 'replay', operation_id: 'x', status: 'succeeded', attempt: 1, next_action: 'return_result' };
    assert.equal(parseBeginRow(row).nextAction, 'return_result');
    assert.throws(() => parseBeginRow({ ...row, next_action: undefined }), /needs opledger 0\.5\.0 or later/);
    assert.throws(() => parseBeginRow({ ...row, next_action: 'dance' }), /unknown next_action/);
  });

  for (const c of corpus.cases) {
    it(c.name, async () => {
      const id = `conformance-ts-${randomUUID()}`;
      const tool = `conformance.ts.${randomUUID().slice(0, 8)}`;
      await admin.registerTool(tool, c.tool.effect, {
        maxAttempts: c.tool.max_attempts, backoffBase: c.tool.backoff_base, backoffMax: c.tool.backoff_max,
      });
      for (const s of c.steps) {
        const run = STEPS[s.do];
        assert.ok(run, `this client has no handler for the step ${s.do}`);
        await run(id, tool, s);
      }
      const seen: BeginResult[] = [];
      let calls = 0;
      const run = executeOnce(ledger, { operationId: id, tool, args: { case: true } }, async () => {
        calls += 1;
        return corpus.tool_result;
      }, { onDecision: (d) => seen.push(d), maxWaitMs: 0 });
      if (c.client.raises !== undefined) {
        const cls = RAISES[c.client.raises];
        assert.ok(cls, `this client has no error for ${c.client.raises}`);
        await assert.rejects(run, cls);
      } else {
        const got = await run;
        assert.deepEqual(got, c.client.returns === 'tool_result' ? corpus.tool_result : c.client.returns);
      }
      assert.ok(seen.length >= 1, 'executeOnce asked op_begin');
      const first = seen[0];
      assert.deepEqual(
        { decision: first.decision, next_action: first.nextAction, status: first.status, attempt: first.attempt },
        c.expect);
      assert.equal(calls, c.client.calls_tool ? 1 : 0, 'tool calls');
    });
  }
});

// The conformance corpus (tests/conformance/decisions.json), replayed through the
// gateway: for each case the ledger is set up through @opledger/client (as the
// superuser), then the SDK's real client sends the call through opledger-mcp to the
// fault server, and the gateway must do what the case says: call the tool or not,
// answer the stored result, or an isError result naming the decision and next_action.
// The TypeScript and Python clients replay the same file.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Ledger, NEXT_ACTIONS, type ToolEffect } from '@opledger/client';
import { BEGIN_COLUMNS, BEGIN_COLUMNS_LEFT_OUT, ID_NAMESPACE } from '../src/db.js';
import { connectHost, opOf, PKG, pool, SERVERS, sleep, sql, tmp, writeConfig } from './helpers.js';

interface Step { do: string; [k: string]: any }
interface Case {
  name: string;
  tool: { effect: ToolEffect; max_attempts?: number; backoff_base?: string; backoff_max?: string };
  steps: Step[];
  expect: { decision: string; next_action: string; status: string; attempt: number };
  client: { calls_tool: boolean; returns?: unknown; raises?: string };
}
interface Corpus { next_actions: string[]; raises: string[]; cases: Case[] }

const corpus = JSON.parse(fs.readFileSync(path.resolve(PKG, '../../tests/conformance/decisions.json'), 'utf8')) as Corpus;
const ledger = new Ledger(pool);
const FAULT = ['node', SERVERS.fault];
const SERVER = 'conformance';

/** What the gateway's test runs for each kind of set-up step; a kind missing here fails its case. */
const STEPS: Record<string, (id: string, tool: string, args: Record<string, unknown>, s: Step) => Promise<unknown>> = {
  begin: async (id, tool, args, s) => {
    const d = await ledger.begin({ operationId: id, tool, args: args as never, worker: s.worker, lease: s.lease });
    const got: Record<string, unknown> = { decision: d.decision, next_action: d.nextAction };
    if ('status' in s.expect) got.status = d.status;
    if ('attempt' in s.expect) got.attempt = d.attempt;
    assert.deepEqual(got, s.expect, 'a set-up op_begin');
  },
  succeed: (id, _t, _a, s) => ledger.succeed(id, s.result, { attempt: s.attempt }),
  fail: (id, _t, _a, s) => ledger.fail(id, s.error, s.retryable ?? false),
  mark_unknown: (id, _t, _a, s) => ledger.markUnknown(id, s.error),
  resolve: (id, _t, _a, s) => ledger.resolve(id, s.outcome, { result: s.result }),
  approve: (id, _t, _a, s) => ledger.approve(id, s.approver),
  reject: (id, _t, _a, s) => ledger.reject(id, s.approver),
  sleep: (_id, _t, _a, s) => sleep(s.ms),
};

/**
 * How the gateway answers each `raises` of the corpus: an isError result that names
 * the decision (the model is told what to do in words), the tool not called.
 */
const RAISES: Record<string, string[]> = {
  wait_timeout: ['in_progress', 'retry_later'],
  operation_failed: ['failed'],
  reconciliation_required: ['reconcile'],
  needs_approval: ['needs_approval'],
};

before(async () => { await sql('CREATE EXTENSION IF NOT EXISTS opledger'); });
after(async () => { await pool.end(); });

describe('conformance corpus through the gateway', () => {
  test('the corpus names the next actions of @opledger/client, and this test handles every kind of raise', () => {
    assert.deepEqual([...NEXT_ACTIONS], corpus.next_actions);
    assert.deepEqual(Object.keys(RAISES).sort(), [...corpus.raises].sort());
  });

  test("the gateway's op_begin columns are begin_result's, less the ones it leaves out on purpose", async () => {
    const rows = await sql<{ attname: string }>(`SELECT attname FROM pg_attribute
      WHERE attrelid = 'opledger.begin_result'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`);
    const declared = rows.map((r) => r.attname);
    const read = BEGIN_COLUMNS.split(',').map((c) => c.trim());
    for (const c of read) assert.ok(declared.includes(c), `begin_result has no column ${c}`);
    assert.deepEqual(declared.filter((c) => !read.includes(c)).sort(), [...BEGIN_COLUMNS_LEFT_OUT].sort(),
      'every begin_result column is read by the gateway or listed in BEGIN_COLUMNS_LEFT_OUT');
  });

  corpus.cases.forEach((c, i) => {
    test(c.name, async () => {
      const prefix = `conf${i}.${randomUUID().slice(0, 8)}.`;
      const ledgerTool = `${prefix}send`;
      const effects = path.join(tmp, `conformance-${i}.jsonl`);
      const cfg = writeConfig(`conformance-${i}`, {
        server: SERVER,
        toolPrefix: prefix,
        tools: {
          send: {
            effect: c.tool.effect, maxAttempts: c.tool.max_attempts, backoffBase: c.tool.backoff_base,
            backoffMax: c.tool.backoff_max, wait: '0ms',
          },
        },
      });
      await ledger.registerTool(ledgerTool, c.tool.effect, {
        maxAttempts: c.tool.max_attempts, backoffBase: c.tool.backoff_base, backoffMax: c.tool.backoff_max,
      });
      const key = randomUUID();
      const args = { item: `conformance-${i}`, text: 'hello' };
      const id = await ledger.deriveOperationId(ID_NAMESPACE, { server: SERVER, tool: 'send', key });
      for (const s of c.steps) {
        const run = STEPS[s.do];
        assert.ok(run, `the gateway's test has no handler for the step ${s.do}`);
        await run(id, ledgerTool, args, s);
      }
      const host = await connectHost({ config: cfg, server: FAULT, env: { EFFECTS_FILE: effects } });
      let r: any;
      try {
        r = await host.client.callTool({ name: 'send', arguments: args, _meta: { 'opledger/idempotency-key': key } });
      } finally {
        await host.close();
      }
      const op = opOf(r) as any;
      assert.equal(op.operationId, id, 'the gateway derived the operation ID the set-up used');
      assert.equal(op.decision, c.expect.decision);
      assert.equal(op.nextAction, c.expect.next_action);
      assert.equal(op.attempt, c.expect.attempt);
      const called = fs.existsSync(effects)
        ? fs.readFileSync(effects, 'utf8').split('\n').filter((l) => l && JSON.parse(l).op === id).length : 0;
      assert.equal(called, c.client.calls_tool ? 1 : 0, 'tool calls');
      if (c.client.raises !== undefined) {
        const decisions = RAISES[c.client.raises];
        assert.ok(decisions, `the gateway's test has no answer for ${c.client.raises}`);
        assert.equal(r.isError, true);
        assert.ok(decisions.includes(op.decision), `${op.decision} answers ${c.client.raises}`);
      } else if (c.client.returns === 'tool_result') {
        assert.notEqual(r.isError, true);
        assert.equal(JSON.parse(r.content[0].text).item, args.item, "the fault server's own answer");
      } else {
        assert.deepEqual(r.content, (c.client.returns as { content: unknown }).content, 'the stored result');
      }
    });
  });
});

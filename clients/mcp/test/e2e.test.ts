// End-to-end: the SDK's real client -> opledger-mcp -> real MCP servers from npm
// (the reference memory and everything servers) and our fault server.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connectDirect, connectHost, env, MAIN, opOf, pool, ROLES, SERVERS, sleep, sql, tmp, urlFor, writeConfig, type Host } from './helpers.js';

const run = promisify(execFile);
const memoryFile = path.join(tmp, 'memory.jsonl');
const MEMORY = ['node', SERVERS.memory];
const memEnv = { MEMORY_FILE_PATH: memoryFile };

async function gatewayCli(args: string[], user?: string, extra: Record<string, string> = {}) {
  return run(process.execPath, [MAIN, ...args], { env: env({ PGUSER: user, ...memEnv, ...extra }), timeout: 60_000 });
}

before(async () => {
  await sql('CREATE EXTENSION IF NOT EXISTS opledger');
});
after(async () => {
  await pool.end();
});

describe('memory server through the gateway', () => {
  const cfg = writeConfig('memory', {
    server: 'memory-test',
    tools: {
      create_entities: { effect: 'non_idempotent_write', guarantee: 'none', keyArgument: 'request_key' },
      delete_entities: { effect: 'irreversible', lease: '30 seconds' },
    },
  });

  test('register (the admin step) stores the policies; tools not in the config get their hint-derived effect', async () => {
    const { stdout } = await gatewayCli(['register', '--config', cfg, '--', ...MEMORY], ROLES.admin);
    assert.match(stdout, /create_entities\tnon_idempotent_write\t\(config\)/);
    assert.match(stdout, /read_graph\tread_only\t\(hint\)/);
    assert.match(stdout, /delete_observations\tidempotent_write\t\(hint\)/);
    const rows = await sql("SELECT tool, effect::text FROM opledger.tools WHERE tool IN ('create_entities', 'delete_entities') ORDER BY tool");
    assert.deepEqual(rows, [{ tool: 'create_entities', effect: 'non_idempotent_write' }, { tool: 'delete_entities', effect: 'irreversible' }]);
  });

  test('tools/list passes through unchanged', async () => {
    const host = await connectHost({ config: cfg, server: MEMORY, env: memEnv });
    const direct = await connectDirect(MEMORY, memEnv);
    try {
      assert.deepEqual(await host.client.listTools(), await direct.listTools());
      assert.deepEqual(host.client.getServerVersion(), direct.getServerVersion());
    } finally {
      await host.close();
      await direct.close();
    }
  });

  test('a write re-sent by the host is replayed: the stored CallToolResult, the tool not called again', async () => {
    const host = await connectHost({ config: cfg, server: MEMORY, env: memEnv });
    try {
      const args = { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] };
      const first: any = await host.client.callTool({ name: 'create_entities', arguments: args });
      const again: any = await host.client.callTool({ name: 'create_entities', arguments: { entities: [{ observations: ['wrote the first program'], entityType: 'person', name: 'Ada' }] } });
      assert.equal(opOf(first).decision, 'execute');
      assert.equal(opOf(again).decision, 'replay');
      assert.equal(opOf(again).operationId, opOf(first).operationId);
      assert.deepEqual(again.content, first.content);
      assert.deepEqual(again.structuredContent, first.structuredContent);
      assert.equal(again.isError, first.isError);
      assert.equal((first.structuredContent as any).entities.length, 1, 'the first call created Ada');
      const events = await sql("SELECT decision FROM opledger.events WHERE operation_id = $1 AND kind = 'begin' ORDER BY event_id", [opOf(first).operationId]);
      assert.deepEqual(events.map((e) => e.decision), ['execute', 'replay']);
      const lines = fs.readFileSync(memoryFile, 'utf8').split('\n').filter((l) => l.includes('"Ada"'));
      assert.equal(lines.length, 1);
      // Log lines are written just after the answer (buffered to the end of the event-loop turn): wait for them.
      const decisions = () => host.stderr.filter((l) => l.includes('"event":"decision"')).map((l) => JSON.parse(l).decision);
      await waitFor(async () => { if (decisions().at(-1) !== 'replay') throw new Error('not yet'); }, 5_000).catch(() => {});
      assert.deepEqual(decisions().slice(-2), ['execute', 'replay'], 'one structured log line per decision');
    } finally {
      await host.close();
    }
  });

  test('a read-only call is never answered from the ledger: a repeated read returns live data', async () => {
    const host = await connectHost({ config: cfg, server: MEMORY, env: memEnv });
    try {
      const before = (await sql('SELECT count(*)::int AS n FROM opledger.operations'))[0].n;
      const r1: any = await host.client.callTool({ name: 'search_nodes', arguments: { query: 'Grace' } });
      await host.client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'Grace', entityType: 'person', observations: [] }] } });
      const r2: any = await host.client.callTool({ name: 'search_nodes', arguments: { query: 'Grace' } });
      assert.equal(r1.structuredContent.entities.length, 0);
      assert.equal(r2.structuredContent.entities.length, 1);
      const afterN = (await sql('SELECT count(*)::int AS n FROM opledger.operations'))[0].n;
      assert.equal(afterN - before, 1, 'only the write went through the ledger');
    } finally {
      await host.close();
    }
  });

  test('the same key with a changed argument: OL001 as a result that names the differing JSON Pointer (valid for the outputSchema)', async () => {
    const host = await connectHost({ config: cfg, server: MEMORY, env: memEnv });
    try {
      const a1 = { request_key: 'plan-step-7', entities: [{ name: 'Linus', entityType: 'person', observations: [] }] };
      const a2 = { request_key: 'plan-step-7', entities: [{ name: 'Linux', entityType: 'person', observations: [] }] };
      const ok: any = await host.client.callTool({ name: 'create_entities', arguments: a1 });
      assert.equal(opOf(ok).decision, 'execute');
      const bad: any = await host.client.callTool({ name: 'create_entities', arguments: a2 });   // validated by the SDK client
      assert.equal(bad.isError, true);
      assert.equal(opOf(bad).decision, 'argument_mismatch');
      assert.equal(bad.structuredContent, undefined, 'create_entities has an outputSchema: no structured content on decisions');
      assert.match(bad.content[0].text, /\/entities\/0\/name/);
      assert.equal(opOf(bad).operationId, opOf(ok).operationId);
      // The key was stripped before forwarding, and is not part of the stored arguments.
      const row = (await sql('SELECT args FROM opledger.operations WHERE operation_id = $1', [opOf(ok).operationId]))[0];
      assert.equal(row.args.request_key, undefined);
      // The key in _meta works the same way.
      const viaMeta: any = await host.client.callTool({ name: 'create_entities', arguments: a1.entities ? { entities: a1.entities } : {}, _meta: { 'opledger/idempotency-key': 'plan-step-7' } });
      assert.equal(opOf(viaMeta).decision, 'replay');
    } finally {
      await host.close();
    }
  });

  test('an irreversible tool: needs approval; without elicitation the result says who approves and how', async () => {
    const host = await connectHost({ config: cfg, server: MEMORY, env: memEnv });
    try {
      const r: any = await host.client.callTool({ name: 'delete_entities', arguments: { entityNames: ['Grace'] } });
      assert.equal(r.isError, true);
      assert.equal(opOf(r).decision, 'needs_approval');
      assert.match(r.content[0].text, /op_approve\('[0-9a-f-]{36}'/);
      assert.match(r.content[0].text, /opledger-mcp approve/);
      // The admin CLI approves (as the approver role); the re-sent call runs once.
      const { stdout } = await gatewayCli(['approve', opOf(r).operationId, '--approver', 'test-lead'], ROLES.approver);
      assert.match(stdout, /approved/);
      const again: any = await host.client.callTool({ name: 'delete_entities', arguments: { entityNames: ['Grace'] } });
      assert.equal(opOf(again).decision, 'execute');
      assert.notEqual(again.isError, true);
    } finally {
      await host.close();
    }
  });

  test('an irreversible tool with elicitation: accepted runs once (approved by the approver identity), declined never runs', async () => {
    const asked: string[] = [];
    let answer: 'accept' | 'decline' = 'accept';
    const host = await connectHost({
      config: cfg, server: MEMORY, env: memEnv,
      elicit: (message) => { asked.push(message); return answer === 'accept' ? { action: 'accept', content: { approve: true, note: 'ok by test' } } : { action: 'decline' }; },
    });
    try {
      await host.client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'Tmp1', entityType: 't', observations: [] }, { name: 'Tmp2', entityType: 't', observations: [] }] } });
      const r: any = await host.client.callTool({ name: 'delete_entities', arguments: { entityNames: ['Tmp1'] } });
      assert.equal(asked.length, 1);
      assert.match(asked[0], /delete_entities/);
      assert.equal(opOf(r).decision, 'execute');
      const ev = await sql("SELECT kind FROM opledger.events WHERE operation_id = $1 ORDER BY event_id", [opOf(r).operationId]);
      assert.ok(ev.some((e) => e.kind === 'approve'), 'op_approve is in the audit trail');
      answer = 'decline';
      const d: any = await host.client.callTool({ name: 'delete_entities', arguments: { entityNames: ['Tmp2'] } });
      assert.equal(d.isError, true);
      assert.equal(opOf(d).decision, 'declined');
      const graph: any = await host.client.callTool({ name: 'open_nodes', arguments: { names: ['Tmp1', 'Tmp2'] } });
      assert.deepEqual(graph.structuredContent.entities.map((e: any) => e.name), ['Tmp2'], 'declined: Tmp2 is still there');
    } finally {
      await host.close();
    }
  });
});

describe('everything server through the gateway', () => {
  const EVERYTHING = ['node', SERVERS.everything];
  const cfg = writeConfig('everything', {
    server: 'everything-test',
    tools: {
      'trigger-long-running-operation': { effect: 'non_idempotent_write', timeout: '5s' },
      'get-sum': { effect: 'non_idempotent_write', timeout: '300ms', lease: '2 seconds' },
    },
  });

  test('tools/list, prompts and resources pass through unchanged', async () => {
    const host = await connectHost({ config: cfg, server: EVERYTHING });
    const direct = await connectDirect(EVERYTHING);
    try {
      const strip = (x: any) => JSON.parse(JSON.stringify(x));
      assert.deepEqual(strip(await host.client.listTools()), strip(await direct.listTools()));
      assert.deepEqual(strip(await host.client.listPrompts()), strip(await direct.listPrompts()));
      const res = await host.client.listResources();
      assert.ok(res.resources.length > 0);
      const read = await host.client.readResource({ uri: res.resources[0].uri });
      assert.ok(read.contents.length > 0);
    } finally {
      await host.close();
      await direct.close();
    }
  });

  test('progress notifications pass through, for a read-only tool and for a ledgered one', async () => {
    const host = await connectHost({ config: cfg, server: EVERYTHING });
    try {
      const seen: number[] = [];
      const r: any = await host.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
        undefined, { onprogress: (p) => { seen.push(p.progress); } });
      assert.equal(opOf(r).decision, 'execute');
      assert.ok(seen.length >= 3, `progress seen: ${seen.join(',')}`);
      const echo: any = await host.client.callTool({ name: 'echo', arguments: { message: 'hi' } });
      assert.match(JSON.stringify(echo.content), /hi/);
    } finally {
      await host.close();
    }
  });

  test('structuredContent of a tool with an outputSchema passes the SDK client\'s validation, and replays', async () => {
    const c2 = writeConfig('everything-structured', { server: 'everything-test', tools: { 'get-structured-content': { effect: 'non_idempotent_write' } } });
    const host = await connectHost({ config: c2, server: EVERYTHING });
    try {
      const r1: any = await host.client.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } });
      const r2: any = await host.client.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } });
      assert.equal(opOf(r2).decision, 'replay');
      assert.deepEqual(r2.structuredContent, r1.structuredContent);
    } finally {
      await host.close();
    }
  });
});

describe('fault server: outcomes recorded honestly', () => {
  const FAULT = ['node', SERVERS.fault];
  const effects = path.join(tmp, 'effects.jsonl');
  const fenv = { EFFECTS_FILE: effects };
  const cfg = writeConfig('fault', {
    server: 'fault-test',
    toolPrefix: 'fault.',
    tools: {
      send: {
        effect: 'non_idempotent_write', guarantee: 'read_before_write', timeout: '500ms', lease: '5 seconds',
        idempotencyKey: { argument: 'reference' },
        lookup: { tool: 'find_sent', arguments: { reference: '${operation_id}' }, found: '/found/0', providerRef: '/found/0/id' },
      },
      put: { effect: 'idempotent_write', guarantee: 'provider_key', timeout: '500ms', backoffBase: '200 milliseconds', idempotencyKey: { argument: 'idempotency_key' }, errorRetryable: true },
      wire: { effect: 'irreversible' },
      slow_echo: { timeout: '300ms' },
    },
  });
  const count = (tool: string, pred: (e: any) => boolean = () => true) =>
    (fs.existsSync(effects) ? fs.readFileSync(effects, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l)) : [])
      .filter((e) => e.tool === tool && pred(e)).length;

  before(async () => {
    await gatewayCli(['register', '--config', cfg], ROLES.admin);
  });

  test('commit then hang past the timeout: unknown (never failed); the re-send reconciles through the lookup and replays', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r1: any = await host.client.callTool({ name: 'send', arguments: { item: 'hang-1', fault: 'hang' } });
      assert.equal(r1.isError, true);
      assert.match(r1.content[0].text, /unknown/);
      const id = opOf(r1).operationId;
      assert.equal((await sql('SELECT status::text FROM opledger.operations WHERE operation_id = $1', [id]))[0].status, 'unknown');
      const r2: any = await host.client.callTool({ name: 'send', arguments: { item: 'hang-1', fault: 'hang' } });
      assert.notEqual(r2.isError, true, JSON.stringify(r2));
      assert.equal(opOf(r2).decision, 'replay');
      assert.equal(count('send', (e) => e.item === 'hang-1'), 1);
      const row = (await sql('SELECT status::text, provider_ref FROM opledger.operations WHERE operation_id = $1', [id]))[0];
      assert.equal(row.status, 'succeeded');
      assert.match(row.provider_ref, /^m_/);
    } finally {
      await host.close();
    }
  });

  test('commit then drop the connection: unknown; the gateway starts the server again; an idempotent write re-runs with the same key', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r1: any = await host.client.callTool({ name: 'put', arguments: { item: 'drop-1', value: 1, fault: 'drop' } });
      assert.equal(r1.isError, true);
      const id = opOf(r1).operationId;
      assert.equal((await sql('SELECT status::text FROM opledger.operations WHERE operation_id = $1', [id]))[0].status, 'unknown');
      await sleep(400);   // past the tool's backoff
      const r2: any = await host.client.callTool({ name: 'put', arguments: { item: 'drop-1', value: 1, fault: 'ok' } });
      // fault is an argument, so a changed fault would be another intent: the same call is re-sent instead.
      assert.ok(opOf(r2));
      const r3: any = await host.client.callTool({ name: 'put', arguments: { item: 'drop-1', value: 1, fault: 'drop' } });
      assert.ok(['execute', 'retry_later', 'replay'].includes(opOf(r3).decision));
    } finally {
      await host.close();
    }
  });

  test('a definite failure (isError) is op_fail, retryable per tool; a read-only tool past its timeout is not recorded', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r: any = await host.client.callTool({ name: 'put', arguments: { item: 'fail-1', fault: 'fail' } });
      assert.equal(r.isError, true);
      const row = (await sql('SELECT status::text FROM opledger.operations WHERE operation_id = $1', [opOf(r).operationId]))[0];
      assert.equal(row.status, 'retryable');
      const s: any = await host.client.callTool({ name: 'send', arguments: { item: 'fail-2', fault: 'fail' } });
      const row2 = (await sql('SELECT status::text, error FROM opledger.operations WHERE operation_id = $1', [opOf(s).operationId]))[0];
      assert.equal(row2.status, 'failed');
      const again: any = await host.client.callTool({ name: 'send', arguments: { item: 'fail-2', fault: 'fail' } });
      assert.equal(opOf(again).decision, 'failed');
      assert.deepEqual(again.content, s.content, 'failed returns the stored error');
    } finally {
      await host.close();
    }
  });

  test('upstream cancellation after the call was sent: unknown', async () => {
    // The call takes 1.5 s downstream, and the host cancels once the server has the call
    // (its "received" line): a pending row alone does not mean sent, since the gateway
    // sends only after op_begin's answer, and a call cancelled before it was sent is
    // rightly recorded as a retryable failure instead.
    const host = await connectHost({ config: cfg, server: FAULT, env: { ...fenv, FAULT_SLOW_MS: '1500' } });
    try {
      const ac = new AbortController();
      const p = host.client.callTool({ name: 'send', arguments: { item: 'cancel-1', fault: 'slow' } }, undefined, { signal: ac.signal });
      await waitForLine(host, 'fault-server: received send cancel-1');
      ac.abort();
      await assert.rejects(p);
      // The gateway records the outcome after the host has given up on the call: wait for it.
      const rows = await waitForRow('cancel-1', (r) => r.status !== 'pending');
      assert.ok(['unknown', 'succeeded'].includes(rows.status), rows.status);
      // succeeded: the late answer (the server did it) was recorded after the unknown.
      let ev: Array<Record<string, any>> = [];
      await waitFor(async () => {
        ev = await sql("SELECT kind FROM opledger.events e JOIN opledger.operations o USING (operation_id) WHERE o.args->>'item' = 'cancel-1' ORDER BY e.event_id");
        if (!ev.some((e) => e.kind === 'mark_unknown')) throw new Error('not yet');
      }, 10_000).catch(() => {});
      assert.ok(ev.some((e) => e.kind === 'mark_unknown'), JSON.stringify(ev));
    } finally {
      await host.close();
    }
  });

  test('the lying readOnlyHint of an irreversible tool is ignored: no effect without approval', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r: any = await host.client.callTool({ name: 'wire', arguments: { item: 'w-1', amount: 100 } });
      assert.equal(opOf(r).decision, 'needs_approval');
      assert.equal(count('wire'), 0);
    } finally {
      await host.close();
    }
  });

  test('SIGTERM with a call in flight: the gateway reports it unknown before it exits', async () => {
    // The downstream call takes 3 s here, under a 10 s timeout (a config of this test's
    // own), and SIGTERM is sent once the server has the call (its "received" line): the
    // call is in flight then, however loaded the machine is.
    const termCfg = writeConfig('fault-term', {
      server: 'fault-test',
      toolPrefix: 'fault.',
      tools: { send: { effect: 'non_idempotent_write', guarantee: 'read_before_write', timeout: '10s', lease: '30 seconds',
                       idempotencyKey: { argument: 'reference' } } },
    });
    const host = await connectHost({ config: termCfg, server: FAULT, env: { ...fenv, FAULT_SLOW_MS: '3000' } });
    const p = host.client.callTool({ name: 'send', arguments: { item: 'term-1', fault: 'slow' } }).catch((e) => e);
    await waitForLine(host, 'fault-server: received send term-1');
    process.kill(host.pid!, 'SIGTERM');
    await p;
    await sleep(300);
    const rows = await sql("SELECT status::text FROM opledger.operations WHERE args->>'item' = 'term-1'");
    assert.equal(rows.length, 1);
    assert.equal(rows[0].status, 'unknown');
    await host.close().catch(() => {});
  });

  test('SIGTERM while op_begin is being answered: the call is never sent, and is recorded as not sent (retryable) before the gateway exits', async () => {
    // The test holds a lock that makes op_begin's insert wait, sends SIGTERM while the
    // gateway waits on it, then lets op_begin finish: the gateway must not send the call
    // (nor start its server again), and must not leave the operation pending until its
    // lease expires.
    const termCfg = writeConfig('fault-term-begin', {
      server: 'fault-test',
      toolPrefix: 'fault.',
      tools: { send: { effect: 'non_idempotent_write', guarantee: 'read_before_write', timeout: '10s', lease: '30 seconds',
                       idempotencyKey: { argument: 'reference' } } },
    });
    const beginItem = `term-begin-${process.pid}`;
    const host = await connectHost({ config: termCfg, server: FAULT, env: fenv });
    const locker = await pool.connect();
    let locked = false;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE opledger.operations IN SHARE ROW EXCLUSIVE MODE');
      locked = true;
      const p = host.client.callTool({ name: 'send', arguments: { item: beginItem, fault: 'ok' } }).catch((e) => e);
      await waitFor(async () => {
        const r = await sql("SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%op_begin%'");
        if (r[0].n < 1) throw new Error('op_begin is not waiting yet');
      });
      process.kill(host.pid!, 'SIGTERM');
      await waitForLine(host, '"event":"session_close"');
      await locker.query('COMMIT');
      locked = false;
      await p;
      const gone = await waitFor(async () => { try { process.kill(host.pid!, 0); } catch { return; } throw new Error('still running'); }).then(() => true, () => false);
      assert.ok(gone, 'the gateway exited');
      const row = await waitForRow(beginItem, () => true, 1_000);
      assert.equal(row.status, 'retryable', 'reported as not sent, not left pending');
      assert.equal(count('send', (e) => e.item === beginItem), 0, 'never run');
      assert.ok(!host.stderr.some((l) => l.includes(`fault-server: received send ${beginItem}`)), 'never sent');
    } finally {
      if (locked) await locker.query('ROLLBACK').catch(() => {});
      locker.release();
      await host.close().catch(() => {});
    }
  });

  test('reconcile mode claims unknown operations and resolves them with the lookups', async () => {
    const host = await connectHost({ config: cfg, server: FAULT, env: { ...fenv, FAULT_HANG_MS: '3000' } });
    let id: string;
    try {
      const r1: any = await host.client.callTool({ name: 'send', arguments: { item: 'rec-1', fault: 'hang' } });
      id = opOf(r1).operationId;
    } finally {
      await host.close();
    }
    const { stdout } = await gatewayCli(['reconcile', '--config', cfg, '--once', '--', ...FAULT], ROLES.reconciler, fenv);
    assert.match(stdout, /claimed [1-9]\d*, resolved [1-9]/);
    const row = (await sql('SELECT status::text FROM opledger.operations WHERE operation_id = $1', [id!]))[0];
    assert.equal(row.status, 'succeeded');
  });
});

describe('security: what the gateway shows, stores and refuses', () => {
  const FAULT = ['node', SERVERS.fault];
  const effects = path.join(tmp, 'effects-security.jsonl');
  const fenv = { EFFECTS_FILE: effects };
  const count = (tool: string, pred: (e: any) => boolean = () => true) =>
    (fs.existsSync(effects) ? fs.readFileSync(effects, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l)) : [])
      .filter((e) => e.tool === tool && pred(e)).length;
  // Secrets no operation ID, hash or timestamp of a stored row can hold by chance (not hex, not digits only).
  const PIN1 = 'pin_S3CR3T_48213';
  const PIN2 = 'pin_S3CR3T_59324';
  const stored = async (id: string) => ({
    op: (await sql('SELECT o::text AS t FROM opledger.operations o WHERE operation_id = $1', [id]))[0].t as string,
    events: (await sql('SELECT string_agg(e::text, \' \') AS t FROM opledger.events e WHERE operation_id = $1', [id]))[0].t as string,
  });

  test('the approval question lists every argument by JSON Pointer (long values cut in the middle, the cut said) with the ledger\'s fingerprint', async () => {
    const cfg = writeConfig('sec-approve', { server: 'sec', toolPrefix: 'sec.', tools: { wire: { effect: 'irreversible' } } });
    await gatewayCli(['register', '--config', cfg], ROLES.admin);
    const asked: string[] = [];
    const host = await connectHost({
      config: cfg, server: FAULT, env: fenv,
      elicit: (message) => { asked.push(message); return { action: 'accept', content: { approve: true } }; },
    });
    try {
      const memo = 'a'.repeat(260) + 'b'.repeat(260);
      const r: any = await host.client.callTool({ name: 'wire', arguments: { item: 'sec-w-1', memo, amount: 9999999 } });
      assert.equal(asked.length, 1);
      const id = opOf(r).operationId;
      const hash = (await sql("SELECT encode(args_hash, 'hex') AS h FROM opledger.operations WHERE operation_id = $1", [id]))[0].h;
      assert.match(asked[0], /\/amount/);
      assert.match(asked[0], /9999999/);
      assert.ok(asked[0].includes(hash), `the fingerprint ${hash} is shown: ${asked[0]}`);
      assert.match(asked[0], /\/memo/);
      assert.match(asked[0], /cut/);
      assert.ok(!asked[0].includes(memo), 'the long value is cut');
      assert.equal(opOf(r).decision, 'execute');
    } finally {
      await host.close();
    }
  });

  test('an approval question too large to show whole is not asked: the result says how to approve instead', async () => {
    const cfg = writeConfig('sec-approve', { server: 'sec', toolPrefix: 'sec.', tools: { wire: { effect: 'irreversible' } } });
    const asked: string[] = [];
    const host = await connectHost({
      config: cfg, server: FAULT, env: fenv,
      elicit: (message) => { asked.push(message); return { action: 'accept', content: { approve: true } }; },
    });
    try {
      const padding = Object.fromEntries(Array.from({ length: 200 }, (_x, i) => [`p${i}`, i]));
      const r: any = await host.client.callTool({ name: 'wire', arguments: { item: 'sec-w-2', ...padding, amount: 9999999 } });
      assert.equal(asked.length, 0, 'not asked');
      assert.equal(opOf(r).decision, 'needs_approval');
      assert.match(r.content[0].text, /too many/);
      assert.match(r.content[0].text, /op_approve/);
      assert.equal(count('wire', (e) => e.item === 'sec-w-2'), 0);
    } finally {
      await host.close();
    }
  });

  test('a secret argument (redact) echoed in the result is not stored: the caller gets the real result, the ledger and events never hold it', async () => {
    const cfg = writeConfig('sec-redact-echo', { server: 'sec', toolPrefix: 'sec-echo.', tools: { issue_key: { effect: 'non_idempotent_write', redact: ['/pin'] } } });
    await gatewayCli(['register', '--config', cfg], ROLES.admin);
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r1: any = await host.client.callTool({ name: 'issue_key', arguments: { item: 'sec-k-1', pin: PIN1 } });
      assert.equal(opOf(r1).decision, 'execute');
      assert.match(r1.content[0].text, new RegExp(`PIN ${PIN1} set`), 'the caller gets the real result');
      assert.match(r1.structuredContent.note, new RegExp(`PIN ${PIN1} set`));
      const s = await stored(opOf(r1).operationId);
      assert.ok(!s.op.includes(PIN1), `the stored operation holds no secret: ${s.op}`);
      assert.ok(!s.events.includes(PIN1), `the events hold no secret: ${s.events}`);
      assert.match(s.op, /\[REDACTED\]/);
    } finally {
      await host.close();
    }
  });

  test('redactResult: pointers into structuredContent (and the text of a tool with an outputSchema) are not stored; a replay returns the stored, redacted result', async () => {
    const cfg = writeConfig('sec-redact-result', {
      server: 'sec', toolPrefix: 'sec-rr.',
      tools: { issue_key: { effect: 'non_idempotent_write', redact: ['/pin'], redactResult: ['/api_key'] } },
    });
    await gatewayCli(['register', '--config', cfg], ROLES.admin);
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r1: any = await host.client.callTool({ name: 'issue_key', arguments: { item: 'sec-k-2', pin: PIN2 } });
      assert.equal(opOf(r1).decision, 'execute');
      const key = r1.structuredContent.api_key;
      assert.match(key, /^sk_live_/, 'the caller gets the real key');
      assert.ok(r1.content[0].text.includes(key));
      const s = await stored(opOf(r1).operationId);
      assert.ok(!s.op.includes(key) && !s.op.includes(PIN2), `the stored operation holds no secret: ${s.op}`);
      assert.ok(!s.events.includes(key) && !s.events.includes(PIN2), `the events hold no secret: ${s.events}`);
      const r2: any = await host.client.callTool({ name: 'issue_key', arguments: { item: 'sec-k-2', pin: PIN2 } });
      assert.equal(opOf(r2).decision, 'replay');
      assert.ok(!JSON.stringify(r2).includes(key), 'a replay returns the stored, redacted result');
      assert.match(r2.content.map((c: any) => c.text).join(' '), /REDACTED/);
      assert.equal(count('issue_key', (e) => e.item === 'sec-k-2'), 1);
    } finally {
      await host.close();
    }
  });

  test('redactResult: all stores no part of the result', async () => {
    const cfg = writeConfig('sec-redact-all', { server: 'sec', toolPrefix: 'sec-all.', tools: { issue_key: { effect: 'non_idempotent_write', redactResult: 'all' } } });
    await gatewayCli(['register', '--config', cfg], ROLES.admin);
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r1: any = await host.client.callTool({ name: 'issue_key', arguments: { item: 'sec-k-3', pin: '1' } });
      const key = r1.structuredContent.api_key;
      assert.match(key, /^sk_live_/);
      const s = await stored(opOf(r1).operationId);
      assert.ok(!s.op.includes(key) && !s.op.includes('sec-k-3 '), s.op);
      assert.ok(!s.events.includes(key), s.events);
      const row = (await sql('SELECT result FROM opledger.operations WHERE operation_id = $1', [opOf(r1).operationId]))[0];
      assert.equal(row.result.structuredContent, undefined);
      assert.equal(row.result._meta['opledger/redacted'], 'all');
    } finally {
      await host.close();
    }
  });

  test('key-derived IDs are per tenant: two gateways of two tenants with the same client key both run; a restarted gateway replays', async () => {
    if (!ROLES.agent) return;   // tenants need the shipped roles
    const cfg = writeConfig('sec-tenants', { server: 'sec', toolPrefix: 'sec-t.', tools: { send: { effect: 'non_idempotent_write' } } });
    const roleA = `mcp_tenant_a_${process.pid}`;
    const roleB = `mcp_tenant_b_${process.pid}`;
    for (const [role, tenant] of [[roleA, 'tenant-a'], [roleB, 'tenant-b']]) {
      await sql(`DROP ROLE IF EXISTS ${role}`);
      await sql(`CREATE ROLE ${role} LOGIN IN ROLE opledger_agent`);
      await sql('SELECT opledger.set_role_tenant($1::regrole, $2)', [role, tenant]);
    }
    const meta = { 'opledger/idempotency-key': 'order-1001' };
    const call = async (role: string, item: string) => {
      const host = await connectHost({ config: cfg, server: FAULT, env: { ...fenv, PGUSER: role } });
      try {
        return await host.client.callTool({ name: 'send', arguments: { item }, _meta: meta }) as any;
      } finally {
        await host.close();
      }
    };
    try {
      const a = await call(roleA, 'sec-t-a');
      const b = await call(roleB, 'sec-t-b');
      assert.equal(opOf(a).decision, 'execute', JSON.stringify(a));
      assert.equal(opOf(b).decision, 'execute', JSON.stringify(b));
      assert.doesNotMatch(JSON.stringify(b), /another tenant|42501/);
      assert.notEqual(opOf(a).operationId, opOf(b).operationId);
      const rows = await sql('SELECT tenant FROM opledger.operations WHERE operation_id = ANY($1) ORDER BY tenant', [[opOf(a).operationId, opOf(b).operationId]]);
      assert.deepEqual(rows.map((r) => r.tenant), ['tenant-a', 'tenant-b']);
      // A new gateway process of tenant A (a restart) derives the same ID from the key: a replay.
      const again = await call(roleA, 'sec-t-a');
      assert.equal(opOf(again).decision, 'replay');
      assert.equal(opOf(again).operationId, opOf(a).operationId);
      assert.equal(count('send', (e) => e.item === 'sec-t-a'), 1);
      assert.equal(count('send', (e) => e.item === 'sec-t-b'), 1);
    } finally {
      for (const role of [roleA, roleB]) {
        await sql('SELECT opledger.set_role_tenant($1::regrole, NULL)', [role]).catch(() => {});
        await sql(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
      }
    }
  });

  test('fail closed: an irreversible tool the ledger has not registered is refused (at start-up and in its result), never run', async () => {
    const cfg = writeConfig('sec-unregistered', { server: 'sec', toolPrefix: 'sec-unreg.', tools: { wire: { effect: 'irreversible' } } });
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      await waitFor(async () => { if (!host.stderr.some((l) => l.includes('"tool_refused"'))) throw new Error('not yet'); }, 5_000).catch(() => {});
      const startup = host.stderr.find((l) => l.includes('"tool_refused"'));
      assert.ok(startup, `a start-up message: ${host.stderr.join('\n')}`);
      assert.match(startup!, /sec-unreg\.wire/);
      assert.match(startup!, /not registered/);
      const r: any = await host.client.callTool({ name: 'wire', arguments: { item: 'sec-u-1', amount: 5 } });
      assert.equal(r.isError, true);
      assert.equal(opOf(r).decision, 'registration_mismatch');
      assert.match(r.content[0].text, /not registered/);
      assert.match(r.content[0].text, /opledger-mcp register/);
      assert.equal(count('wire', (e) => e.item === 'sec-u-1'), 0, 'never run');
      assert.equal((await sql("SELECT count(*)::int AS n FROM opledger.operations WHERE tool = 'sec-unreg.wire'"))[0].n, 0);
    } finally {
      await host.close();
    }
  });

  test('fail closed: a tool registered with other redact paths is refused until the registration matches', async () => {
    const registered = writeConfig('sec-mismatch-reg', { server: 'sec', toolPrefix: 'sec-mm.', tools: { issue_key: { effect: 'non_idempotent_write', redact: ['/item'] } } });
    const cfg = writeConfig('sec-mismatch', { server: 'sec', toolPrefix: 'sec-mm.', tools: { issue_key: { effect: 'non_idempotent_write', redact: ['/pin'] } } });
    await gatewayCli(['register', '--config', registered], ROLES.admin);
    const host = await connectHost({ config: cfg, server: FAULT, env: fenv });
    try {
      const r: any = await host.client.callTool({ name: 'issue_key', arguments: { item: 'sec-m-1', pin: '77341' } });
      assert.equal(r.isError, true);
      assert.equal(opOf(r).decision, 'registration_mismatch');
      assert.match(r.content[0].text, /redact/);
      assert.match(r.content[0].text, /opledger-mcp register/);
      assert.equal(count('issue_key', (e) => e.item === 'sec-m-1'), 0, 'never run');
      assert.ok(host.stderr.some((l) => l.includes('"tool_refused"') && l.includes('sec-mm.issue_key')), 'said at start-up');
      // The admin registers the config: the same gateway serves the tool from then on.
      await gatewayCli(['register', '--config', cfg], ROLES.admin);
      const ok: any = await host.client.callTool({ name: 'issue_key', arguments: { item: 'sec-m-1', pin: '77341' } });
      assert.equal(opOf(ok).decision, 'execute', JSON.stringify(ok));
      assert.equal(count('issue_key', (e) => e.item === 'sec-m-1'), 1);
    } finally {
      await host.close();
    }
  });
});

describe('Streamable HTTP upstream and downstream', () => {
  test('host --HTTP--> gateway --HTTP--> everything server', async () => {
    // The everything server listens on the PORT it is given: a port free a moment ago,
    // and another one should something have taken it since. The gateway listens on a
    // port the system picks (:0) and says which in its "listening" line.
    let srv: ChildProcess | undefined;
    let port = 0;
    for (let tries = 0; !srv && tries < 5; tries++) {
      port = await freePort();
      const child = spawn(process.execPath, [SERVERS.everything, 'streamableHttp'], { env: env({ PORT: String(port) }), stdio: ['ignore', 'ignore', 'pipe'] });
      const out: string[] = [];
      child.stderr!.on('data', (d) => out.push(String(d)));
      let exited = false;
      child.on('exit', () => { exited = true; });
      await waitFor(async () => { if (!exited && !out.join('').includes(`listening on port ${port}`)) throw new Error(`not yet: ${out.join('')}`); });
      if (exited) continue;
      srv = child;
    }
    assert.ok(srv, 'the everything server started on a free port');
    const cfg = writeConfig('http', { server: 'everything-http', tools: { 'get-sum': { effect: 'non_idempotent_write' } } });
    let gw: ChildProcess | undefined;
    try {
      await waitFor(async () => { await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'GET' }).catch(() => { throw new Error('no'); }); });
      gw = spawn(process.execPath, [MAIN, '--config', cfg, '--listen', '127.0.0.1:0', '--url', `http://127.0.0.1:${port}/mcp`],
        { env: env({ PGUSER: ROLES.agent }), stdio: ['ignore', 'ignore', 'pipe'] });
      const logs: string[] = [];
      gw.stderr!.on('data', (d) => logs.push(String(d)));
      let url = '';
      await waitFor(async () => {
        const m = /"event":"listening","url":"(http:\/\/127\.0\.0\.1:[1-9]\d*\/mcp)"/.exec(logs.join(''));
        if (!m) throw new Error(`not yet: ${logs.join('')}`);
        url = m[1];
      });
      const client = new Client({ name: 'http-host', version: '1' }, { capabilities: {} });
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      const tools = await client.listTools();
      assert.ok(tools.tools.some((t) => t.name === 'get-sum'));
      const a: any = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
      const b: any = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
      assert.equal(opOf(a).decision, 'execute');
      assert.equal(opOf(b).decision, 'replay');
      assert.deepEqual(b.content, a.content);
      await client.close();
    } finally {
      gw?.kill('SIGTERM');
      srv?.kill('SIGTERM');
    }
  });
});

async function waitFor(f: () => Promise<void>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try { await f(); return; } catch (e) { if (Date.now() > end) throw e; await sleep(100); }
  }
}

/** Waits until a line holding `text` is on the host's stderr (the gateway's, and its server's). */
async function waitForLine(host: Host, text: string, ms = 15_000): Promise<void> {
  await waitFor(async () => { if (!host.stderr.some((l) => l.includes(text))) throw new Error(`no "${text}" on stderr: ${host.stderr.join('\n')}`); }, ms);
}

/** The one operation of an item once `ok` holds for it. */
async function waitForRow(item: string, ok: (r: Record<string, any>) => boolean, ms = 15_000): Promise<Record<string, any>> {
  let rows: Array<Record<string, any>> = [];
  await waitFor(async () => {
    rows = await sql("SELECT operation_id, status::text AS status FROM opledger.operations WHERE args->>'item' = $1", [item]);
    if (rows.length !== 1 || !ok(rows[0])) throw new Error('not yet');
  }, ms).catch(() => {});
  assert.equal(rows.length, 1, `one operation for ${item}: ${JSON.stringify(rows)}`);
  assert.ok(ok(rows[0]), `${item}: ${JSON.stringify(rows[0])}`);
  return rows[0];
}

/** A TCP port nothing listens on now (the everything server takes its port from PORT and cannot report one the system chose). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = (s.address() as net.AddressInfo).port; s.close(() => resolve(p)); });
  });
}

void urlFor;

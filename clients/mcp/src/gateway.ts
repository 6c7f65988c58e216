// The gateway: a JSON-RPC proxy between an MCP host (upstream) and an MCP server
// (downstream) that passes every message through unchanged, except tools/call,
// which it runs through the ledger:
//
//   tools/call ─► op_begin ─┬ execute ───────► forward ─┬ result ──────────► op_succeed, answer
//                           │                           ├ isError ─────────► op_fail (retryable per tool), answer
//                           │                           ├ JSON-RPC error that proves it never ran ─► op_fail
//                           │                           └ timeout, drop, cancel, shutdown ─► op_mark_unknown
//                           ├ replay ────────► the stored CallToolResult
//                           ├ in_progress, retry_later ─► wait a little (same-process call: its outcome), or say so
//                           ├ reconcile ─────► the tool's lookup ─► op_resolve, ask again; or say so
//                           ├ needs_approval ► elicitation ─► op_approve (approver connection), ask again; or say who
//                           └ failed ────────► the stored error
//
// One Session per upstream connection (the stdio host, or one Streamable HTTP
// session), each with its own downstream connection; the ledger pool is shared.

import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ArgumentMismatchError, LedgerSqlError, UnstorableJsonError, type BeginResult, type JsonValue, type ToolEffect } from '@opledger/client';
import type { GatewayConfig } from './config.js';
import { parseDuration } from './config.js';
import { ID_NAMESPACE, type LedgerDb } from './db.js';
import { getPointer, isPresent, withoutPointers } from './json.js';
import { flushLogs, log } from './log.js';
import { approvalQuestion } from './approval.js';
import { resolvePolicy, type Policy, type ToolInfo } from './policy.js';
import { redactResultForStorage, scrubArgSecrets, storedResult } from './redact.js';
import { mustMatch, REGISTER_FIX, RegistrationGuard } from './registration.js';
import {
  approvalHowTo, approvalText, decisionResult, inProgressText, META_CONVERSATION, META_KEY, META_OPERATION_ID,
  mismatchText, reconcileText, retryLaterText, unknownText, withOperationMeta, type CallToolResult, type DecisionInfo,
} from './results.js';

type Msg = Record<string, any>;
type Id = string | number;

const NEVER_RAN_CODES = new Set([-32700, -32600, -32601, -32602]);
const ELICITATION_SCHEMA = {
  type: 'object',
  properties: {
    approve: { type: 'boolean', title: 'Approve', description: 'Run this irreversible action once' },
    note: { type: 'string', title: 'Note', description: 'Optional: why (kept in the audit trail)' },
  },
  required: ['approve'],
};

const keyOf = (id: Id) => `${typeof id}:${id}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const errText = (e: unknown) => (e instanceof Error ? e.message : String(e));

export interface GatewayOptions {
  config: GatewayConfig;
  db: LedgerDb;
  /** A ledger connection as an approver role (OPLEDGER_APPROVER_DATABASE_URL); without it elicitation cannot approve. */
  approverDb?: LedgerDb;
  /** A ledger connection as a reconciler role (OPLEDGER_RECONCILER_DATABASE_URL) for inline lookups; default: the agent's. */
  reconcilerDb?: LedgerDb;
  /** A label for the server (ID namespace, logs). */
  serverName: string;
  /** Opens a new downstream connection (a spawned process or an HTTP session). */
  connectDownstream: () => Transport;
}

/** Shared by all sessions: config, ledger, policies. */
export class Gateway {
  readonly worker = `opledger-mcp@${os.hostname()}:${process.pid}`;
  readonly sessions = new Set<Session>();
  /** Operation ID -> the outcome of an execution running in this process (for in_progress re-sends). */
  readonly inflight = new Map<string, Promise<void>>();
  /** Operations this process resolved as applied (attempt), so a late success is not a second effect. */
  readonly resolvedApplied = new Map<string, number>();
  /** Test hook (chaos runs only): probability of SIGKILL between the server's answer and the ledger update. */
  readonly killAfterCall = Number(process.env.OPLEDGER_MCP_FAULT_KILL_AFTER_CALL ?? 0);
  readonly approvalTimeoutMs: number;
  /** Refuses tools that must match their registration in the ledger and don't (registration.ts). */
  readonly registrations: RegistrationGuard;
  private stopping = false;
  private tenantAsked: Promise<string> | undefined;
  /** The ledger tenant of the gateway's role, once known ('' for the unscoped tenant). */
  tenantKnown: string | undefined;

  constructor(readonly o: GatewayOptions) {
    this.approvalTimeoutMs = parseDuration(o.config.approvalTimeout, 300_000);
    this.registrations = new RegistrationGuard(o.db);
    // Asked now, so the first call doesn't wait for it (a failure is asked again by that call).
    this.tenant().catch(() => {});
  }

  get config() { return this.o.config; }
  get db() { return this.o.db; }

  /** Resolved once per server description of a tool (a tools/list gives new ToolInfo objects), or per name without one. */
  private policies = new WeakMap<ToolInfo, Policy>();
  private policiesNoInfo = new Map<string, Policy>();

  policyFor(tool: string, info: ToolInfo | undefined): Policy {
    let policy = info && info.name === tool ? this.policies.get(info) : info ? undefined : this.policiesNoInfo.get(tool);
    if (policy) return policy;
    policy = resolvePolicy(this.o.config, tool, info);
    if (info && info.name === tool) this.policies.set(info, policy);
    else if (!info && this.policiesNoInfo.size < 10_000) this.policiesNoInfo.set(tool, policy);
    return policy;
  }

  /**
   * The tenant the ledger puts this gateway's operations in (opledger.current_tenant() of its
   * role; a role that sees every tenant creates unscoped operations, ''). It is part of every
   * derived ID, so two tenants' gateways never derive the same ID from the same key or call.
   * Asked once: a role's tenant is an administrator's setting, changed with a restart.
   */
  async tenant(): Promise<string> {
    if (this.tenantKnown !== undefined) return this.tenantKnown;
    this.tenantAsked ??= this.db.pool.query('SELECT opledger.current_tenant() AS tenant').then(
      (r) => String(r.rows[0]?.tenant ?? ''),
      (e) => {
        if ((e as { code?: string }).code === '42883') return '';   // a ledger without tenants
        this.tenantAsked = undefined;
        throw e;
      });
    const t = await this.tenantAsked;
    this.tenantKnown = t === '*' ? '' : t;
    return this.tenantKnown;
  }

  /** Opens a session on an upstream transport (already constructed, not started). */
  async open(up: Transport, scope?: string): Promise<Session> {
    const s = new Session(this, up, scope);
    this.sessions.add(s);
    await s.start();
    return s;
  }

  /** Graceful shutdown: every call in flight is reported unknown, then connections close. */
  async shutdown(reason: string): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    await Promise.allSettled([...this.sessions].map((s) => s.close(reason)));
  }
}

interface CallState {
  upId: Id;
  downId?: string;
  opId?: string;
  attempt?: number;
  policy?: Policy;
  args?: unknown;
  phase: 'ledger' | 'sent' | 'done';
  cancelled?: boolean;
  settle?: (r: Answer) => void;
  /** Settled when the host's call is answered (or no answer is due): what shutdown waits for. */
  finished?: Promise<void>;
}

interface Answer { result?: Msg; error?: Msg; closed?: boolean; timeout?: boolean; notSent?: boolean }

export class Session {
  private down: Transport | null = null;
  private downReady: Promise<void> | null = null;
  private initRequest: Msg | null = null;
  private initialized = false;
  private clientCaps: Msg = {};
  private protocolVersion: string | undefined;
  private seq = 0;
  private closed = false;
  private closing: string | null = null;
  readonly scope: string;
  readonly tools = new Map<string, ToolInfo>();
  private toolsFetched = false;
  /** Requests the host sent that we forwarded (upKey -> method). */
  private forwarded = new Map<string, string>();
  /** tools/call of the host, by upKey. */
  private calls = new Map<string, CallState>();
  /** downstream ID of a forwarded tools/call -> its state (also after we stopped waiting: late answers). */
  private byDownId = new Map<string, CallState>();
  /** Requests the gateway itself sent downstream / upstream. */
  private ownDown = new Map<string, (m: Msg) => void>();
  private ownUp = new Map<string, (m: Msg) => void>();
  private progressOwner = new Map<string, Id>();

  constructor(readonly gw: Gateway, readonly up: Transport, scope?: string) {
    const cfgScope = gw.config.scope;
    this.scope = cfgScope && cfgScope !== 'session' ? cfgScope : scope ?? randomUUID();
  }

  private nextId(): string {
    return `opledger-mcp:${++this.seq}`;
  }

  async start(): Promise<void> {
    this.up.onmessage = (m: JSONRPCMessage) => { this.fromUp(m as Msg).catch((e) => log('error', 'upstream_message_failed', { error: errText(e) })); };
    this.up.onclose = () => { void this.close('host disconnected'); };
    this.up.onerror = (e: Error) => log('warn', 'upstream_error', { error: e.message });
    await this.connectDown();
    await this.up.start();
    log('info', 'session_open', { server: this.gw.o.serverName, scope: this.scope, session: this.up.sessionId });
  }

  // --- downstream connection -----------------------------------------------------

  private async connectDown(): Promise<void> {
    const t = this.gw.o.connectDownstream();
    this.down = t;
    t.onmessage = (m: JSONRPCMessage) => { this.fromDown(t, m as Msg); };
    t.onerror = (e: Error) => log('warn', 'downstream_error', { error: e.message });
    t.onclose = () => this.downClosed(t);
    await t.start();
  }

  private downClosed(t: Transport): void {
    if (this.down !== t) return;
    this.down = null;
    this.downReady = null;
    if (this.closed) return;
    log('warn', 'downstream_closed', { inflight: [...this.calls.values()].filter((c) => c.phase === 'sent').length });
    for (const c of this.calls.values()) if (c.phase === 'sent') c.settle?.({ closed: true });
    for (const [k, method] of this.forwarded) {
      this.forwarded.delete(k);
      const id = this.idFromKey(k);
      void this.sendUp({ jsonrpc: '2.0', id, error: { code: -32603, message: `the MCP server closed the connection before answering ${method}` } });
    }
    for (const [k, done] of this.ownDown) { this.ownDown.delete(k); done({ error: { code: -32000, message: 'connection closed' } }); }
    this.byDownId.clear();
    if (!this.initialized) void this.close('the MCP server exited during initialization');
  }

  private idFromKey(k: string): Id {
    const i = k.indexOf(':');
    return k.slice(0, i) === 'number' ? Number(k.slice(i + 1)) : k.slice(i + 1);
  }

  /** A live, initialized downstream: after a crash of the server, a new one, initialized like the first. */
  private async ready(): Promise<void> {
    if (this.closing) throw new Error(`the gateway is shutting down (${this.closing})`);
    if (this.downReady) return this.downReady;
    if (this.down) return;
    if (!this.initRequest) throw new Error('the MCP server is gone and the session was never initialized');
    {
      this.downReady = (async () => {
        log('info', 'downstream_restart', {});
        await this.connectDown();
        const res = await this.requestDown('initialize', this.initRequest!.params, 30_000);
        if (res.error) throw new Error(`re-initialize failed: ${res.error.message}`);
        (this.down as any)?.setProtocolVersion?.(res.result?.protocolVersion);
        await this.down!.send({ jsonrpc: '2.0', method: 'notifications/initialized' } as JSONRPCMessage);
        this.initialized = true;
      })().finally(() => { this.downReady = null; });
    }
    return this.downReady!;
  }

  private async sendDown(m: Msg): Promise<void> {
    if (!this.down || this.downReady) await this.ready();
    await this.down!.send(m as JSONRPCMessage);
  }

  private requestDown(method: string, params: unknown, timeoutMs: number): Promise<Msg> {
    const id = this.nextId();
    return new Promise<Msg>((resolve) => {
      const timer = setTimeout(() => { this.ownDown.delete(id); resolve({ error: { code: -32001, message: 'timeout' } }); }, timeoutMs);
      this.ownDown.set(id, (m) => { clearTimeout(timer); resolve(m); });
      this.down!.send({ jsonrpc: '2.0', id, method, params } as JSONRPCMessage).catch((e) => {
        clearTimeout(timer); this.ownDown.delete(id); resolve({ error: { code: -32000, message: errText(e) } });
      });
    });
  }

  private requestUp(method: string, params: unknown, timeoutMs: number, relatedRequestId?: Id): Promise<Msg> {
    const id = this.nextId();
    return new Promise<Msg>((resolve) => {
      const timer = setTimeout(() => { this.ownUp.delete(id); resolve({ error: { code: -32001, message: 'timeout' } }); }, timeoutMs);
      this.ownUp.set(id, (m) => { clearTimeout(timer); resolve(m); });
      this.up.send({ jsonrpc: '2.0', id, method, params } as JSONRPCMessage, { relatedRequestId }).catch((e) => {
        clearTimeout(timer); this.ownUp.delete(id); resolve({ error: { code: -32000, message: errText(e) } });
      });
    });
  }

  private async sendUp(m: Msg, relatedRequestId?: Id): Promise<void> {
    if (this.closed) return;
    try {
      await this.up.send(m as JSONRPCMessage, relatedRequestId !== undefined ? { relatedRequestId } : undefined);
    } catch (e) {
      log('warn', 'upstream_send_failed', { error: errText(e) });
    }
  }

  // --- messages from the host ------------------------------------------------------

  private async fromUp(m: Msg): Promise<void> {
    if (m.method === undefined) {
      // A response: to one of our requests (elicitation), or to the server's.
      const mine = typeof m.id === 'string' ? this.ownUp.get(m.id) : undefined;
      if (mine) { this.ownUp.delete(m.id); mine(m); return; }
      await this.sendDown(m);
      return;
    }
    if (m.id === undefined) {
      // A notification.
      if (m.method === 'notifications/cancelled') {
        const c = this.calls.get(keyOf(m.params?.requestId));
        if (c) { await this.cancelCall(c, m.params?.reason); return; }
      }
      if (m.method === 'notifications/initialized') this.initialized = true;
      await this.sendDown(m);
      return;
    }
    // A request.
    const token = m.params?._meta?.progressToken;
    if (token !== undefined) this.progressOwner.set(String(token), m.id);
    if (m.method === 'tools/call') {
      await this.toolCall(m);
      return;
    }
    if (m.method === 'initialize') {
      this.initRequest = m;
      this.clientCaps = m.params?.capabilities ?? {};
    }
    this.forwarded.set(keyOf(m.id), m.method);
    try {
      await this.sendDown(m);
    } catch (e) {
      this.forwarded.delete(keyOf(m.id));
      await this.sendUp({ jsonrpc: '2.0', id: m.id, error: { code: -32603, message: `the MCP server is not reachable: ${errText(e)}` } });
    }
  }

  // --- messages from the server ------------------------------------------------------

  private fromDown(t: Transport, m: Msg): void {
    if (m.method === undefined) {
      const own = this.ownDown.get(String(m.id));
      if (own) { this.ownDown.delete(String(m.id)); own(m); return; }
      const call = this.byDownId.get(String(m.id));
      if (call) { this.byDownId.delete(String(m.id)); this.callAnswered(call, m); return; }
      const k = keyOf(m.id);
      const method = this.forwarded.get(k);
      this.forwarded.delete(k);
      if (method === 'initialize' && m.result) {
        this.protocolVersion = m.result.protocolVersion;
        (t as any).setProtocolVersion?.(this.protocolVersion);
      } else if (method === 'tools/list' && Array.isArray(m.result?.tools)) {
        for (const tool of m.result.tools) this.tools.set(tool.name, tool);
      }
      void this.sendUp(m);
      return;
    }
    if (m.method === 'notifications/tools/list_changed') { this.tools.clear(); this.toolsFetched = false; }
    let related: Id | undefined;
    if (m.method === 'notifications/progress') related = this.progressOwner.get(String(m.params?.progressToken));
    void this.sendUp(m, related);
  }

  // --- tools/call ----------------------------------------------------------------------

  private async toolInfo(name: string): Promise<ToolInfo | undefined> {
    const known = this.tools.get(name);
    if (known || this.toolsFetched) return known;
    this.toolsFetched = true;
    try {
      await this.ready();
      let cursor: string | undefined;
      for (let page = 0; page < 50; page++) {
        const res = await this.requestDown('tools/list', cursor ? { cursor } : {}, 10_000);
        if (!res.result) break;
        for (const t of res.result.tools ?? []) this.tools.set(t.name, t);
        cursor = res.result.nextCursor;
        if (!cursor) break;
      }
    } catch (e) {
      log('warn', 'tools_list_failed', { error: errText(e) });
    }
    return this.tools.get(name);
  }

  private async toolCall(m: Msg): Promise<void> {
    const c: CallState = { upId: m.id, phase: 'ledger' };
    let finish!: () => void;
    c.finished = new Promise<void>((r) => { finish = r; });
    this.calls.set(keyOf(m.id), c);
    let answer: Msg | null;
    try {
      answer = await this.runCall(m, c);
    } catch (e) {
      log('error', 'call_failed', { tool: m.params?.name, operationId: c.opId, error: errText(e) });
      answer = { error: { code: -32603, message: `opledger-mcp: the ledger could not be asked, so the tool was not called (${errText(e)})` } };
    }
    this.calls.delete(keyOf(m.id));
    const token = m.params?._meta?.progressToken;
    if (token !== undefined) this.progressOwner.delete(String(token));
    try {
      if (answer && !c.cancelled) await this.sendUp({ jsonrpc: '2.0', id: m.id, ...answer });
    } finally {
      finish();
    }
  }

  /** Returns {result} or {error} for the host, or null when no answer is due (cancelled). */
  private async runCall(m: Msg, c: CallState): Promise<Msg | null> {
    const started = Date.now();
    const name = String(m.params?.name ?? '');
    const rawArgs = (m.params?.arguments ?? {}) as Record<string, unknown>;
    const meta = (m.params?._meta ?? {}) as Record<string, unknown>;
    const info = await this.toolInfo(name);
    const p = this.gw.policyFor(name, info);
    c.policy = p;

    // The caller's key: _meta first, then the configured argument (stripped before forwarding).
    let args: Record<string, unknown> = rawArgs;
    let key = typeof meta[META_KEY] === 'string' ? (meta[META_KEY] as string) : undefined;
    if (p.keyArgument && Object.prototype.hasOwnProperty.call(rawArgs, p.keyArgument)) {
      const { [p.keyArgument]: k, ...rest } = rawArgs;
      args = rest;
      if (key === undefined && (typeof k === 'string' || typeof k === 'number')) key = String(k);
    }
    const conversation = typeof meta[META_CONVERSATION] === 'string' ? (meta[META_CONVERSATION] as string) : this.scope;
    const fwdMeta: Record<string, unknown> = { ...meta };
    delete fwdMeta[META_KEY];
    delete fwdMeta[META_CONVERSATION];

    if (p.effect === 'read_only' && !p.recordReads && key === undefined) {
      // A read is never answered from a stored result: straight through, live data.
      const r = await this.forwardCall(c, name, args, fwdMeta, p);
      log('info', 'decision', { tool: name, effect: p.effect, decision: 'bypass', ms: Date.now() - started });
      if (r.result) return { result: r.result };
      if (r.error) return { error: r.error };
      if (c.cancelled) return null;
      return { error: { code: -32001, message: r.timeout ? 'the MCP server did not answer in time' : 'the MCP server closed the connection' } };
    }
    if (p.ids === 'key' && key === undefined) {
      log('info', 'decision', { tool: name, decision: 'key_required' });
      return {
        result: decisionResult(p, { decision: 'key_required', operationId: '' },
          `This tool needs an idempotency key: send one in _meta["${META_KEY}"]` +
          (p.keyArgument ? ` or in the argument "${p.keyArgument}"` : '') +
          ', the same for every repeat of this one action. The tool was not called.'),
      };
    }

    if (mustMatch(p)) {
      const problem = await this.gw.registrations.problem(p);
      if (problem) {
        log('warn', 'decision', { tool: name, decision: 'registration_mismatch', ledgerTool: p.ledgerTool, problem });
        return {
          result: decisionResult(p, { decision: 'registration_mismatch', operationId: '' },
            `The gateway refuses to call "${name}" until the ledger's registration of ${p.ledgerTool} matches the ` +
            `gateway's policy for it: ${problem}. The tool was not called. To fix it, ${REGISTER_FIX}; the gateway ` +
            `serves the tool again as soon as the registration matches. Tell the user; do not retry before that.`),
        };
      }
    }

    const idArgs = withoutPointers(args, [...p.hashExclude, ...p.redact]) as JsonValue;
    const server = this.gw.o.serverName;
    // The tenant only when there is one: a single-tenant installation derives the IDs it always did.
    const tenant = this.gw.tenantKnown ?? await this.gw.tenant();
    const t: Record<string, string> = tenant === '' ? {} : { tenant };
    const idParts: JsonValue | undefined = key !== undefined
      ? { server, tool: name, key, ...(this.gw.config.scope && this.gw.config.scope !== 'session' ? { scope: this.gw.config.scope } : {}), ...t }
      : p.ids === 'none' ? undefined : { server, scope: conversation, tool: name, args: idArgs, ...t };
    const fixedId = idParts === undefined ? randomUUID() : undefined;

    let rounds = 0;
    let waited = 0;
    for (;;) {
      rounds++;
      let d: BeginResult;
      const t0 = performance.now();
      try {
        d = await this.gw.db.begin({
          operationId: fixedId ?? c.opId, idParts, tool: p.ledgerTool, args, conversationId: conversation,
          worker: this.gw.worker, lease: p.config.lease ?? null,
        });
      } catch (e) {
        if (e instanceof ArgumentMismatchError) {
          const opId = c.opId ?? fixedId ?? (await this.gw.db.ledger.deriveOperationId(ID_NAMESPACE, idParts!).catch(() => ''));
          log('info', 'decision', { tool: name, operationId: opId, decision: 'argument_mismatch', pointers: e.differingPointers });
          return {
            result: decisionResult(p, { decision: 'argument_mismatch', operationId: opId, differingPointers: e.differingPointers },
              mismatchText(opId, e.differingPointers)),
          };
        }
        if (e instanceof UnstorableJsonError) {
          // Refused before anything was sent: the error names the JSON Pointer, never the value.
          log('info', 'decision', { tool: name, decision: 'invalid_arguments', pointer: e.pointer });
          return { result: decisionResult(p, { decision: 'invalid_arguments', operationId: '', pointer: e.pointer }, `${e.message}. The tool was not called.`) };
        }
        if (e instanceof LedgerSqlError) {
          log('warn', 'decision', { tool: name, decision: 'ledger_error', sqlstate: e.sqlstate, error: e.message });
          return { result: decisionResult(p, { decision: 'ledger_error', operationId: c.opId ?? '', sqlstate: e.sqlstate }, `The ledger refused this call (${e.sqlstate}: ${e.message}); the tool was not called.`) };
        }
        throw e;
      }
      c.opId = d.operationId;
      const info: DecisionInfo = { decision: d.decision, nextAction: d.nextAction, operationId: d.operationId, status: d.status, attempt: d.attempt, retryAfter: d.retryAfter };
      log('info', 'decision', {
        tool: name, effect: p.effect, operationId: d.operationId, decision: d.decision, attempt: d.attempt,
        ms: Date.now() - started, ledger_ms: Math.round((performance.now() - t0) * 100) / 100,
      });
      if (c.cancelled) {
        if (d.nextAction === 'call_tool') await this.record('fail', c, { reason: 'cancelled by the client before it was sent' }, true);
        return null;
      }
      // The step each decision calls for is the ledger's (next_action), the same one the
      // TypeScript and Python clients take.
      switch (d.nextAction) {
        case 'call_tool':
          return this.execute(c, name, args, fwdMeta, p, d);
        case 'return_result':
          return { result: storedResult(d.result as CallToolResult, p, info) };
        case 'raise_error':
          return { result: this.failedResult(p, info, d.error) };
        case 'wait': {
          const local = this.gw.inflight.get(d.operationId);
          const untilMs = d.retryAfter ? d.retryAfter.getTime() - Date.now() : 0;
          if (local && rounds < 6) {
            await Promise.race([local, sleep(p.timeoutMs + 1000)]);
            continue;
          }
          if (rounds < 6 && waited + Math.max(untilMs, 0) <= p.waitMs) {
            const ms = Math.max(untilMs + 20, 20);
            await sleep(ms);
            waited += ms;
            continue;
          }
          return { result: decisionResult(p, info, d.decision === 'in_progress' ? inProgressText(info) : retryLaterText(info)) };
        }
        case 'reconcile': {
          if (p.lookup && rounds < 4) {
            const outcome = await this.lookup(p, d.operationId, d.providerRef, args, info.attempt ?? 0);
            if (outcome) continue;
          }
          return { result: decisionResult(p, info, reconcileText(info)) };
        }
        case 'get_approval': {
          const r = await this.approval(m.id, forwardedArgs(args, p, d.operationId), p, info, rounds);
          if (r === 'approved') continue;
          return { result: r };
        }
      }
    }
  }

  private failedResult(p: Policy, info: DecisionInfo, error: unknown): CallToolResult {
    const e = error as Msg | null;
    if (e && e.source === 'tool' && e.result && Array.isArray(e.result.content)) {
      return storedResult(e.result as CallToolResult, p, info);
    }
    return decisionResult(p, { ...info, error: error as unknown },
      `This call (operation ${info.operationId}) has finally failed and will not be run again: ${JSON.stringify(error)}. ` +
      `Do not repeat it; tell the user, or fix the cause first.`);
  }

  /** Sends the call downstream and waits for its answer, a timeout, a drop or a cancellation. */
  private forwardCall(c: CallState, name: string, args: Record<string, unknown>, meta: Record<string, unknown>, p: Policy):
    Promise<Answer> {
    return new Promise((resolve) => {
      // Nothing is sent once shutdown has begun: the calls in flight are being reported.
      if (this.closing) { resolve({ notSent: true }); return; }
      const downId = this.nextId();
      c.downId = downId;
      let timer: NodeJS.Timeout | undefined;
      c.settle = (r) => {
        if (c.phase !== 'sent') return;
        c.phase = 'done';
        if (timer) clearTimeout(timer);
        resolve(r);
      };
      c.phase = 'sent';
      this.byDownId.set(downId, c);
      const params: Msg = { name, arguments: args };
      if (Object.keys(meta).length) params._meta = meta;
      // The timeout is the server's time to answer, so it starts when the call is sent: after
      // a restart of the server, not while it starts. A call settled before that (shutdown,
      // the connection lost during the restart) is not sent at all: the gateway has stopped
      // waiting for it, and a call sent after that could take effect after a re-send's
      // lookup found nothing.
      const send = () => {
        const down = this.down;
        if (c.phase !== 'sent') return;
        if (!down) { c.settle?.({ notSent: true }); return; }
        timer = setTimeout(() => {
          down.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: downId, reason: 'opledger-mcp: timeout' } } as JSONRPCMessage).catch(() => {});
          c.settle?.({ timeout: true });
        }, p.timeoutMs);
        return down.send({ jsonrpc: '2.0', id: downId, method: 'tools/call', params } as JSONRPCMessage)
          .catch(() => c.settle?.({ closed: true }));
      };
      // A live connection: send now (not a turn of the event loop later); else (re)connect first.
      if (this.down && !this.downReady) void send();
      else this.ready().then(send, () => c.settle?.({ notSent: true }));
    });
  }

  /** A downstream answer to a forwarded tools/call: in time, or late (after we recorded unknown). */
  private callAnswered(c: CallState, m: Msg): void {
    if (c.phase === 'sent') {
      c.settle?.(m.error ? { error: m.error } : { result: m.result });
      return;
    }
    if (c.opId && c.attempt) void this.lateAnswer(c, m);
  }

  private async execute(c: CallState, name: string, args: Record<string, unknown>, meta: Record<string, unknown>,
    p: Policy, d: BeginResult): Promise<Msg | null> {
    c.attempt = d.attempt;
    c.args = args;
    const opId = d.operationId;
    const fwdArgs = forwardedArgs(args, p, opId);
    const fwdMeta: Record<string, unknown> = { ...meta, [META_OPERATION_ID]: opId };
    if (p.idempotencyKey?.meta) fwdMeta[p.idempotencyKey.meta] = opId;
    let done!: () => void;
    this.gw.inflight.set(opId, new Promise<void>((r) => { done = r; }));
    const info: DecisionInfo = { decision: 'execute', nextAction: d.nextAction, operationId: opId, attempt: d.attempt };
    try {
      if (this.closing) {
        // The gateway is shutting down while this call's op_begin was answered: it is not
        // sent (the server may already be gone, and it must not be started again), and the
        // ledger learns at once that it never ran, instead of holding it pending until
        // its lease expires.
        await this.record('fail', c, { reason: `not sent: the gateway shut down first (${this.closing})` }, true);
        log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: 'retryable', reason: 'not sent: shutdown' });
        return { error: { code: -32603, message: 'opledger-mcp: the gateway is shutting down; the call was not sent' } };
      }
      const r = await this.forwardCall(c, name, fwdArgs, fwdMeta, p);
      if (this.gw.killAfterCall > 0 && Math.random() < this.gw.killAfterCall) {
        log('warn', 'fault_injection_sigkill', { operationId: opId });
        flushLogs();
        process.kill(process.pid, 'SIGKILL');
      }
      if (r.result) {
        const result = r.result as CallToolResult;
        if (result.isError) {
          await this.record('fail', c, { source: 'tool', result: result as unknown as JsonValue }, p.errorRetryable);
          log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: p.errorRetryable ? 'retryable' : 'failed' });
        } else {
          await this.record('succeed', c, result as unknown as JsonValue);
          log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: 'succeeded' });
        }
        return { result: withOperationMeta(result, info) };
      }
      if (r.error) {
        if (NEVER_RAN_CODES.has(r.error.code)) {
          await this.record('fail', c, { source: 'jsonrpc', code: r.error.code, message: r.error.message }, false);
          log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: 'failed', code: r.error.code });
          return { error: r.error };
        }
        await this.record('unknown', c, { reason: 'server error', code: r.error.code, message: r.error.message });
        log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: 'unknown', code: r.error.code });
        return { result: decisionResult(p, { ...info, status: 'unknown' }, unknownText(info, `the server answered with error ${r.error.code}: ${r.error.message}`, p.effect === 'idempotent_write')) };
      }
      if (r.notSent) {
        await this.record('fail', c, { reason: 'the MCP server could not be reached; the call was not sent' }, true);
        log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: 'retryable', reason: 'not sent' });
        return { error: { code: -32603, message: 'opledger-mcp: the MCP server could not be reached; the call was not sent' } };
      }
      const reason = r.timeout ? `no answer within ${p.timeoutMs} ms` : c.cancelled ? 'cancelled by the client after it was sent'
        : this.closing ? `gateway shutdown (${this.closing})` : 'the server connection was lost';
      await this.record('unknown', c, { reason });
      log('info', 'outcome', { tool: name, operationId: opId, attempt: d.attempt, outcome: 'unknown', reason });
      if (c.cancelled) return null;
      return { result: decisionResult(p, { ...info, status: 'unknown' }, unknownText(info, reason, p.effect === 'idempotent_write')) };
    } finally {
      this.gw.inflight.delete(opId);
      done();
    }
  }

  /** Reports an outcome to the ledger; a failure to do so is logged (the lease expires as usual). */
  private async record(kind: 'succeed' | 'fail' | 'unknown', c: CallState, payload: JsonValue, retryable = false): Promise<void> {
    const opId = c.opId!;
    const o = { attempt: c.attempt, providerRef: undefined as string | undefined };
    try {
      if (kind === 'succeed') {
        const pr = c.policy?.providerRef ? getPointer((payload as Msg)?.structuredContent, c.policy.providerRef) : undefined;
        if (typeof pr === 'string' || typeof pr === 'number') o.providerRef = String(pr);
        await this.gw.db.succeed(opId, redactResultForStorage(payload as CallToolResult, c.policy, c.args, opId), o.attempt, o.providerRef);
      } else if (kind === 'fail') {
        await this.gw.db.fail(opId, this.storedError(c, payload), retryable, o.attempt);
      } else {
        await this.gw.db.ledger.markUnknown(opId, scrubArgSecrets(payload, c.policy, c.args), o);
      }
    } catch (e) {
      if (e instanceof UnstorableJsonError) {
        // The server's answer holds what jsonb cannot (a NUL...): the outcome is recorded
        // as unknown with where (the message has the pointer, never the value, so this
        // second report is storable); the re-send reconciles.
        log('warn', 'ledger_report_unstorable', { operationId: opId, report: kind, pointer: e.pointer });
        return this.record('unknown', c, { reason: `the server's answer cannot be stored: ${e.message}` });
      }
      log('error', 'ledger_report_failed', { operationId: opId, report: kind, error: errText(e) });
    }
  }

  /** An error payload as stored: a tool's isError result redacted like any result, anything else without argument secrets. */
  private storedError(c: CallState, payload: JsonValue): JsonValue {
    const e = payload as Msg | null;
    if (e && e.source === 'tool' && e.result && typeof e.result === 'object') {
      return { ...e, result: redactResultForStorage(e.result as CallToolResult, c.policy, c.args, c.opId!) } as JsonValue;
    }
    return scrubArgSecrets(payload, c.policy, c.args);
  }

  /** The server answered after we stopped waiting: record it honestly, unless reconciliation already did. */
  private async lateAnswer(c: CallState, m: Msg): Promise<void> {
    const opId = c.opId!;
    const now = await this.gw.db.peek(opId);
    const isError = !!(m.error || m.result?.isError);
    log('info', 'late_answer', { operationId: opId, attempt: c.attempt, isError, status: now?.status });
    if (now && now.attempt !== c.attempt) return;
    if (!isError) {
      if (now?.status === 'succeeded' || this.gw.resolvedApplied.get(opId) === c.attempt) return;
      await this.record('succeed', c, m.result as JsonValue);
      return;
    }
    if (now?.status !== 'unknown') return;
    if (m.error && !NEVER_RAN_CODES.has(m.error.code)) return;
    try {
      await this.gw.db.ledger.resolve(opId, c.policy?.errorRetryable || m.error ? 'not_applied' : 'failed', {
        attempt: c.attempt, result: m.error ? undefined : this.storedError(c, { source: 'tool', result: m.result } as JsonValue), resolver: this.gw.worker,
      });
    } catch (e) {
      log('warn', 'ledger_report_failed', { operationId: opId, report: 'resolve', error: errText(e) });
    }
  }

  private async cancelCall(c: CallState, reason: unknown): Promise<void> {
    c.cancelled = true;
    log('info', 'cancelled', { operationId: c.opId, phase: c.phase, reason });
    if (c.phase === 'sent' && c.downId) {
      await this.sendDown({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: c.downId, reason } }).catch(() => {});
      c.settle?.({});
    }
  }

  // --- reconcile: the tool's lookup ---------------------------------------------------

  private async lookup(p: Policy, opId: string, providerRef: string | null, args: unknown, attempt: number): Promise<boolean> {
    const outcome = await runLookup(p, opId, providerRef, args, (name, a) => this.callOwn(name, a, p.timeoutMs));
    log('info', 'lookup', { tool: p.tool, lookup: p.lookup!.tool, operationId: opId, outcome: outcome?.outcome ?? 'undecided' });
    if (!outcome) return false;
    try {
      await (this.gw.o.reconcilerDb ?? this.gw.db).ledger.resolve(opId, outcome.outcome, {
        result: outcome.result, providerRef: outcome.providerRef, resolver: `${this.gw.worker} lookup:${p.lookup!.tool}`,
      });
      if (outcome.outcome === 'applied') {
        this.gw.resolvedApplied.set(opId, attempt);
        if (this.gw.resolvedApplied.size > 10_000) this.gw.resolvedApplied.delete(this.gw.resolvedApplied.keys().next().value as string);
      }
    } catch (e) {
      if (!(e instanceof LedgerSqlError && e.sqlstate === 'OL002')) {
        // e.g. 42501: this role may not resolve (give the gateway OPLEDGER_RECONCILER_DATABASE_URL, or run opledger-mcp reconcile)
        log('warn', 'resolve_failed', { operationId: opId, error: errText(e), code: (e as { code?: string }).code });
        return false;
      }
      // someone else resolved it: ask again
    }
    return true;
  }

  private async callOwn(name: string, args: unknown, timeoutMs: number): Promise<Msg> {
    await this.ready();
    return this.requestDown('tools/call', { name, arguments: args }, timeoutMs);
  }

  // --- needs_approval: elicitation ----------------------------------------------------

  private async approval(upId: Id, args: Record<string, unknown>, p: Policy, info: DecisionInfo, rounds: number): Promise<CallToolResult | 'approved'> {
    const approver = this.gw.o.approverDb;
    const canElicit = this.clientCaps.elicitation !== undefined && this.clientCaps.elicitation !== null;
    if (!canElicit || !approver || rounds > 2) {
      const why = !canElicit ? 'Your MCP client cannot ask the user here (no elicitation support).'
        : !approver ? 'The gateway has no approver connection (OPLEDGER_APPROVER_DATABASE_URL), so it cannot ask the user here.' : '';
      return decisionResult(p, info, approvalText(info, `${why} ${approvalHowTo(info.operationId)}`.trim()));
    }
    // The fingerprint the ledger holds for this operation, read as the approver (the agent role reads no operations).
    let fingerprint: string | undefined;
    try {
      const r = await approver.pool.query("SELECT pg_catalog.encode(args_hash, 'hex') AS h FROM opledger.operations WHERE operation_id = $1", [info.operationId]);
      fingerprint = r.rows[0]?.h ?? undefined;
    } catch (e) {
      log('warn', 'fingerprint_unreadable', { operationId: info.operationId, error: errText(e) });
    }
    if (!fingerprint) {
      return decisionResult(p, info, approvalText(info, `The gateway cannot read this call's fingerprint with its approver connection, ` +
        `so it does not ask the user here. ${approvalHowTo(info.operationId)}`));
    }
    const question = approvalQuestion(p.tool, info.operationId, fingerprint, args, p.redact);
    if ('tooLarge' in question) {
      log('info', 'elicitation', { tool: p.tool, operationId: info.operationId, action: 'not_asked', why: 'too large' });
      return decisionResult(p, info, approvalText(info, `${question.tooLarge} Review the arguments in the ledger ` +
        `(opledger.operations.args) before approving. ${approvalHowTo(info.operationId)}`));
    }
    const res = await this.requestUp('elicitation/create', {
      message: question.message,
      requestedSchema: ELICITATION_SCHEMA,
    }, this.gw.approvalTimeoutMs, upId);
    const action = res.result?.action;
    const accepted = action === 'accept' && res.result?.content?.approve === true;
    log('info', 'elicitation', { tool: p.tool, operationId: info.operationId, action: action ?? 'error', approved: accepted });
    if (accepted) {
      try {
        // The ledger keeps at most 4096 bytes of a note: the user's words are cut to leave room for the fingerprint.
        let given = typeof res.result.content.note === 'string' ? res.result.content.note : '';
        while (Buffer.byteLength(given) > 3800) given = Array.from(given).slice(0, -64).join('');
        const note = `${given}${given ? ' ' : ''}(approved in an elicitation that showed the arguments with fingerprint ${fingerprint})`;
        await approver.ledger.approve(info.operationId, this.gw.config.approver ?? 'mcp-user (elicitation)', note);
        return 'approved';
      } catch (e) {
        if (e instanceof LedgerSqlError && e.sqlstate === 'OL002') return 'approved';   // already approved: ask again
        return decisionResult(p, info, approvalText(info, `The approval could not be recorded (${errText(e)}). ${approvalHowTo(info.operationId)}`));
      }
    }
    if (res.error) {
      return decisionResult(p, info, approvalText(info, `Asking the user failed (${res.error.message}). ${approvalHowTo(info.operationId)}`));
    }
    // A refusal ends the operation as failed (where the installed extension allows that transition).
    let ended = false;
    try {
      // op_reject (awaiting_approval -> failed) where the installed extension has it.
      const r = await approver.pool.query("SELECT to_regprocedure('opledger.op_reject(text,text,text)') IS NOT NULL AS has");
      if (r.rows[0]?.has) {
        await approver.pool.query('SELECT * FROM opledger.op_reject($1, $2, $3)', [info.operationId, this.gw.config.approver ?? 'mcp-user (elicitation)', `declined (${action ?? 'no answer'})`]);
        ended = true;
      }
    } catch (e) {
      log('info', 'decline_not_recorded', { operationId: info.operationId, error: errText(e) });
    }
    return decisionResult(p, { ...info, decision: 'declined', status: ended ? 'failed' : info.status },
      `The user declined this irreversible action (operation ${info.operationId}); it was not run` +
      `${ended ? ' and is now failed' : ''}. Do not try it again unless the user asks for it.`);
  }

  // --- shutdown --------------------------------------------------------------------------

  async close(reason: string): Promise<void> {
    if (this.closing) return;
    this.closing = reason;
    const inflight = [...this.calls.values()].filter((c) => c.phase === 'sent');
    const asking = [...this.calls.values()].filter((c) => c.phase === 'ledger');
    log('info', 'session_close', { reason, inflight: inflight.length, not_sent: asking.length });
    // Calls in flight: the server may or may not have done them. Record that (unknown) before going.
    for (const c of inflight) c.settle?.({ closed: true });
    const reported = inflight.map((c) => (c.opId ? this.gw.inflight.get(c.opId) : undefined)).filter((x) => x);
    // Calls still at the ledger (op_begin asked, an approval asked of the host) are never
    // sent now (see execute): wait for them too, so a begun operation is reported not sent
    // before the connections close, instead of staying pending until its lease expires.
    // A question to the host is answered "shutting down" so it does not hold the exit.
    for (const [k, done] of this.ownUp) { this.ownUp.delete(k); done({ error: { code: -32000, message: 'the gateway is shutting down' } }); }
    await Promise.race([Promise.allSettled([...reported, ...asking.map((c) => c.finished)]), sleep(5000)]);
    this.closed = true;
    this.gw.sessions.delete(this);
    await Promise.allSettled([this.down?.close(), this.up.close()]);
  }
}

export interface LookupOutcome {
  outcome: 'applied' | 'not_applied' | 'failed';
  result?: JsonValue;
  providerRef?: string;
}

function fillTemplate(v: unknown, vars: { operation_id: string; provider_ref: string | null; args: unknown }): unknown {
  if (typeof v === 'string') {
    const one = /^\$\{(operation_id|provider_ref|arg:([^}]*))\}$/.exec(v);
    const value = (name: string, ptr?: string) =>
      name === 'operation_id' ? vars.operation_id : name === 'provider_ref' ? vars.provider_ref : getPointer(vars.args, ptr ?? '');
    if (one) return value(one[1].startsWith('arg:') ? 'arg' : one[1], one[2]);
    return v.replace(/\$\{(operation_id|provider_ref|arg:([^}]*))\}/g, (_a, n: string, ptr?: string) => {
      const x = value(n.startsWith('arg:') ? 'arg' : n, ptr);
      return x === null || x === undefined ? '' : typeof x === 'string' ? x : JSON.stringify(x);
    });
  }
  if (Array.isArray(v)) return v.map((x) => fillTemplate(x, vars));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fillTemplate(x, vars)]));
  return v;
}

/** The arguments sent to the server: the call's, with the operation ID where the server takes a key. */
function forwardedArgs(args: Record<string, unknown>, p: Policy, opId: string): Record<string, unknown> {
  const fwd = { ...args };
  if (p.idempotencyKey?.argument) fwd[p.idempotencyKey.argument] = opId;
  return fwd;
}

/** Runs a tool's lookup and says applied / not_applied, or undefined when it cannot tell. */
export async function runLookup(p: Policy, opId: string, providerRef: string | null, args: unknown,
  call: (name: string, args: unknown) => Promise<Msg>): Promise<LookupOutcome | undefined> {
  const l = p.lookup!;
  const lookupArgs = fillTemplate(l.arguments ?? { operation_id: '${operation_id}' }, { operation_id: opId, provider_ref: providerRef, args });
  let res: Msg;
  try {
    res = await call(l.tool, lookupArgs);
  } catch {
    return undefined;
  }
  if (!res.result || res.result.isError) return undefined;
  let answer: unknown = res.result.structuredContent;
  if (answer === undefined) {
    const text = (res.result.content ?? []).find((x: Msg) => x.type === 'text')?.text;
    try { answer = text === undefined ? undefined : JSON.parse(text); } catch { answer = text; }
  }
  const found = getPointer(answer, l.found ?? '');
  if (!isPresent(found)) return (l.missing ?? 'not_applied') === 'not_applied' ? { outcome: 'not_applied' } : undefined;
  const ref = l.providerRef ? getPointer(answer, l.providerRef) : undefined;
  const stored = l.result ? getPointer(answer, l.result) : found;
  const result: CallToolResult = {
    content: [{ type: 'text', text: `This call had already taken effect (found by ${l.tool}): ${JSON.stringify(found)}` }],
    _meta: { 'opledger/reconciled': { lookup: l.tool } },
  };
  if ((!p.hasOutputSchema || l.result) && stored && typeof stored === 'object' && !Array.isArray(stored)) {
    result.structuredContent = stored as Record<string, unknown>;
  }
  return {
    outcome: 'applied',
    result: redactResultForStorage(result, p, args, opId) as unknown as JsonValue,
    providerRef: typeof ref === 'string' || typeof ref === 'number' ? String(ref) : undefined,
  };
}

export type { ToolEffect };

// Typed errors: the SQLSTATEs of the SQL contract (OL001..OL003) and the decisions
// that executeOnce cannot settle on its own. Every error says what to do next
// (`nextStep`, also the last part of its message).

import type { BeginResult } from './types.js';

const resolveHint = (operationId: string) =>
  'pass a reconcile hook (options.reconcile, one that asks the provider) to executeOnce and call it again, ' +
  'run reconcileBatch in a reconciler worker, or have the reconciler/admin record what the provider says: ' +
  `SELECT opledger.op_resolve('${operationId}', 'applied' | 'not_applied' | 'failed', manual => true)`;

const when = (d: Date | null | undefined) => (d ? d.toISOString() : 'an unknown time');

/** Base class of every error this client raises. */
export class OpledgerError extends Error {
  /** What the caller should do about it, in one sentence. */
  nextStep: string | undefined;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An error raised by the database, with its SQLSTATE, DETAIL and HINT (the next step). */
export class LedgerSqlError extends OpledgerError {
  readonly sqlstate: string;
  readonly detail: string | undefined;
  readonly hint: string | undefined;
  constructor(message: string, sqlstate: string, detail?: string, hint?: string, cause?: unknown) {
    super(`${message} (${sqlstate})${detail ? `\nDETAIL: ${detail}` : ''}${hint ? `\nHINT: ${hint}` : ''}`, { cause });
    this.sqlstate = sqlstate;
    this.detail = detail;
    this.hint = hint;
    this.nextStep = hint;
  }
  /** The SQLSTATE under pg's name for it. */
  get code(): string { return this.sqlstate; }
}

/**
 * OL001: the operation ID was already used with different arguments or another tool.
 * `detail` names both fingerprints and the JSON Pointers of the members that differ;
 * `differingPointers` is that list, parsed. Fix the call; do not mint a new ID.
 */
export class ArgumentMismatchError extends LedgerSqlError {
  get differingPointers(): string[] {
    // DETAIL: "The arguments differ at: /a, /b/0. Stored fingerprint ..." (or "differ only
    // under redacted paths (values are never shown): /card/cvv. Stored ...").
    const m = /differ (?:at|only under redacted paths \(values are never shown\)): ([\s\S]*?)\. Stored fingerprint/
      .exec(this.detail ?? '');
    if (!m) return [];
    return m[1].split(', ').map((p) => (p === '"" (the whole document)' ? '' : p));
  }
}

/** OL002: an impossible state transition, an unknown operation ID or a stale attempt. */
export class InvalidTransitionError extends LedgerSqlError {}

/** OL003: the tool is not registered and opledger.require_registered_tools is on. */
export class UnregisteredToolError extends LedgerSqlError {}

/**
 * A value the ledger must store (a tool's result, args) is not JSON: a BigInt, a
 * circular structure, a Map or Set, NaN or Infinity. Thrown before anything is sent.
 */
export class NotJsonSerializableError extends OpledgerError {
  constructor(what: string, reason: string, cause?: unknown) {
    super(`${what} is not JSON-serialisable: ${reason}`, { cause });
    this.nextStep = 'return (or pass) plain JSON values: convert BigInt to a string, Map to an object, ' +
      'Set to an array, and break cycles';
  }
}

/**
 * A value PostgreSQL's jsonb cannot hold: a string or member name with a NUL character
 * (U+0000) or an unpaired UTF-16 surrogate. Raised before anything is sent; `pointer`
 * (RFC 6901) says where, and the message never carries the value.
 */
export class UnstorableJsonError extends NotJsonSerializableError {
  /** `problem`: "a NUL character (\u0000)" or "an unpaired UTF-16 surrogate" (either may add "in the member name"). */
  constructor(what: string, readonly pointer: string, readonly problem: string) {
    const where = pointer === '' ? '(the whole value)' : pointer;
    super(what, `${problem} at ${where}`);
    this.nextStep = `remove that character at ${where}: the ledger stores JSON as PostgreSQL jsonb, which cannot ` +
      'hold it; nothing was sent';
    this.message = `${what} cannot be stored in the ledger: ${problem} at ${where}. Next: ${this.nextStep}`;
  }
}

/** The operation has finally failed (decision `failed`); `error` is the stored error. */
export class OperationFailedError extends OpledgerError {
  constructor(readonly begin: BeginResult) {
    const next = 'the failure is final and every retry with this operation ID answers the same; show the error ' +
      'to the user, and if they want it tried again, that is a new action with a new operation ID';
    super(`operation ${begin.operationId} failed: ${JSON.stringify(begin.error)}. Next: ${next}`);
    this.nextStep = next;
  }
  get error(): unknown { return this.begin.error; }
}

/** The tool is irreversible and the operation waits for a person's op_approve. */
export class NeedsApprovalError extends OpledgerError {
  constructor(readonly begin: BeginResult) {
    const next = 'a person in the opledger_approver role must approve it (SELECT opledger.op_approve(' +
      `'${begin.operationId}', approver => 'name')); then call again with the same ID`;
    super(`operation ${begin.operationId} needs approval before it may run. Next: ${next}`);
    this.nextStep = next;
  }
}

/**
 * The outcome of an earlier attempt is unknown and no reconcile hook was given (or it
 * could not tell, or this role may not op_resolve). Someone must ask the provider and
 * call op_resolve.
 */
export class ReconciliationRequiredError extends OpledgerError {
  readonly reason: string;
  constructor(readonly begin: BeginResult, cause?: unknown, reason?: string) {
    const why = reason ?? 'no reconcile hook was given, or it could not tell';
    const next = resolveHint(begin.operationId);
    super(`operation ${begin.operationId} has an unknown outcome and must be reconciled (${why}). Next: ${next}`,
      { cause });
    this.reason = why;
    this.nextStep = next;
  }
}

/**
 * Where the outcome was lost: the tool threw, it did not answer within `timeoutMs`, its
 * result is not JSON, or op_succeed failed.
 */
export type UnknownStage = 'tool' | 'timeout' | 'result' | 'report';

/**
 * The tool did not answer within executeOnce's `timeoutMs` (the `cause` of the
 * OutcomeUnknownError that follows: the provider may still be doing it).
 */
export class ToolTimeoutError extends OpledgerError {
  constructor(readonly timeoutMs: number) {
    super(`the tool did not answer within timeoutMs=${timeoutMs}`);
    this.nextStep = 'treat the outcome as unknown: reconcile it with the provider';
  }
}

/**
 * executeOnce was given a `timeoutMs` that the attempt's lease does not outlast: the
 * lease would end while the tool may still run, and another worker could then take the
 * operation over. Raised before the tool is called; the attempt is recorded as a
 * retryable failure (nothing ran).
 */
export class LeaseTooShortError extends OpledgerError {
  constructor(readonly operationId: string, readonly timeoutMs: number, readonly leaseLeftMs: number,
    readonly marginMs: number) {
    const next = `give the attempt a lease longer than timeoutMs + ${marginMs} ms (op.lease, e.g. ` +
      `'${Math.ceil((timeoutMs + marginMs) / 1000) + 1} seconds', or register_tool(lease => ...) as admin), ` +
      'or lower timeoutMs';
    super(`operation ${operationId}: the attempt's lease ends in ${Math.max(0, Math.round(leaseLeftMs))} ms, ` +
      `before timeoutMs=${timeoutMs} (+ ${marginMs} ms to record the outcome) would end the tool call, so the tool ` +
      `was not called (recorded as a retryable failure). Next: ${next}`);
    this.nextStep = next;
  }
}

/**
 * The tool was called and its outcome could not be observed: it threw, its result
 * could not be stored, or reporting it failed. The operation is now `unknown` in the
 * ledger (`recorded`), or becomes so when its lease expires (`recorded` false: the
 * ledger could not be reached). The original error is `cause`.
 */
export class OutcomeUnknownError extends OpledgerError {
  readonly stage: UnknownStage;
  readonly recorded: boolean;
  constructor(readonly operationId: string, readonly attempt: number, cause: unknown,
    opts: { stage?: UnknownStage; recorded?: boolean; leaseExpiresAt?: Date | null } = {}) {
    const stage = opts.stage ?? 'tool';
    const recorded = opts.recorded ?? true;
    const what = { tool: 'the tool threw', timeout: 'the tool did not answer within timeoutMs',
      result: 'the tool returned a result that cannot be stored as JSON',
      report: 'reporting its success to the ledger failed' }[stage];
    const where = recorded ? 'the ledger now holds it as unknown'
      : 'the ledger could not be told either; op_begin treats it as unknown once its lease expires ' +
        `(at ${when(opts.leaseExpiresAt)})`;
    const next = resolveHint(operationId);
    super(`the outcome of operation ${operationId} (attempt ${attempt}) is unknown: ${what}, so the provider ` +
      `may or may not have done it; ${where}. Next: ${next}`, { cause });
    this.stage = stage;
    this.recorded = recorded;
    this.nextStep = next;
  }
}

/** Waiting for another attempt (in_progress / retry_later) took longer than maxWaitMs. */
export class WaitTimeoutError extends OpledgerError {
  readonly waitedMs: number;
  readonly retryAfter: Date | null;
  readonly leaseOwner: string | null;
  constructor(readonly begin: BeginResult, waitedMs: number,
    opts: { maxWaitMs?: number; leaseOwner?: string | null } = {}) {
    const limit = opts.maxWaitMs !== undefined ? ` (maxWaitMs=${opts.maxWaitMs})` : '';
    const owner = opts.leaseOwner ?? null;
    let state: string;
    let next: string;
    if (begin.decision === 'in_progress') {
      state = `its lease is held by ${owner ? `worker '${owner}'` : 'another attempt (owner not visible to this role)'}` +
        ` until ${when(begin.retryAfter)} (retry_after)`;
      next = 'call again after retry_after, or raise maxWaitMs; if that worker is gone, its lease ends at ' +
        'retry_after and the operation becomes unknown, to be reconciled';
    } else {
      state = `the tool's backoff ends at ${when(begin.retryAfter)} (retry_after)`;
      next = 'call again after retry_after, or raise maxWaitMs';
    }
    super(`operation ${begin.operationId} still ${begin.decision} after ${Math.round(waitedMs)} ms${limit}: ` +
      `${state}. Next: ${next}`);
    this.waitedMs = waitedMs;
    this.retryAfter = begin.retryAfter;
    this.leaseOwner = owner;
    this.nextStep = next;
  }
}

/**
 * 42501: this connection's role may not call the function (or read the table). The
 * message names the shipped group role that may (`requiredRole`); the next step is to
 * make the call as a login role in it.
 */
export class PermissionDeniedError extends LedgerSqlError {
  /** The opledger object the call needed (function, table or view name), if known. */
  readonly object: string | undefined;
  /** The shipped group role that may use it, if it is one of opledger's. */
  readonly requiredRole: string | undefined;
  constructor(message: string, detail: string | undefined, object: string | undefined, cause?: unknown) {
    const role = object !== undefined ? REQUIRED_ROLE[object] : undefined;
    const what = object !== undefined ? `opledger.${object}` : 'this opledger function';
    const hint = role
      ? `${what} needs a role in ${role}, and this connection's role is not in it: make this call on a ` +
        `connection that logs in as a member of ${role} (a superuser grants it once: GRANT ${role} TO ` +
        'your_login_role; the group roles come from SELECT opledger.create_roles()). See docs/security.md, the ' +
        'role matrix.'
      : `this connection's role may not use ${what}: use a login role that was granted it (docs/security.md, ` +
        'the role matrix).';
    super(message, '42501', detail, hint, cause);
    this.object = object;
    this.requiredRole = role;
  }
}

/**
 * The shipped group role for each opledger function and table a client calls
 * (control/install/46_ledger_roles.sql grants them; opledger_admin may use them all).
 */
export const REQUIRED_ROLE: Readonly<Record<string, string>> = {
  op_begin: 'opledger_agent', op_succeed: 'opledger_agent', op_fail: 'opledger_agent',
  op_mark_unknown: 'opledger_agent', notify_token: 'opledger_agent',
  op_claim_reconciliation: 'opledger_reconciler', op_resolve: 'opledger_reconciler', op_sweep: 'opledger_reconciler',
  op_approve: 'opledger_approver', op_reject: 'opledger_approver',
  register_tool: 'opledger_admin', op_purge: 'opledger_admin', set_role_tenant: 'opledger_admin',
  reset_rejected_reuses: 'opledger_admin',
  metrics_since: 'opledger_dashboard', metrics: 'opledger_dashboard', tool_stats: 'opledger_dashboard',
  metrics_hourly: 'opledger_dashboard', rejected_reuses: 'opledger_dashboard',
  operations: 'opledger_reconciler', events: 'opledger_reconciler', unknown_operations: 'opledger_reconciler',
};

const BY_SQLSTATE: Record<string, typeof LedgerSqlError> = {
  OL001: ArgumentMismatchError,
  OL002: InvalidTransitionError,
  OL003: UnregisteredToolError,
};

const isSqlstate = (code: unknown): code is string => typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * Maps an error the database raised (a `pg` DatabaseError: it has a SQLSTATE) with an
 * opledger SQLSTATE (OL001..OL003) to its typed class, and 42501 to
 * PermissionDeniedError (naming the role the call needs; `fn` is the opledger function
 * that was called, when the caller knows it). Other errors pass through unchanged.
 */
export function mapDatabaseError(err: unknown, fn?: string): unknown {
  if (err instanceof LedgerSqlError) return err;
  const e = err as { code?: unknown; message?: unknown; detail?: unknown; hint?: unknown; severity?: unknown } | null;
  if (!e || !isSqlstate(e.code) || typeof e.severity !== 'string') return err;
  const message = String(e.message);
  if (e.code === '42501') {
    const named = /permission denied for (?:function|table|view|relation) (\w+)/.exec(message)?.[1];
    return new PermissionDeniedError(message, str(e.detail), named ?? fn, err);
  }
  const Cls = BY_SQLSTATE[e.code];
  return Cls ? new Cls(message, e.code, str(e.detail), str(e.hint), err) : err;
}

/**
 * mapDatabaseError, and every other error the database raised becomes a LedgerSqlError
 * too, so its message carries the DETAIL and HINT (what happened, what to do) that a
 * `pg` DatabaseError's message leaves out. The Ledger's calls raise these.
 */
export function databaseErrorWithHint(err: unknown, fn?: string): unknown {
  const mapped = mapDatabaseError(err, fn);
  if (mapped !== err) return mapped;
  const e = err as { code?: unknown; message?: unknown; detail?: unknown; hint?: unknown; severity?: unknown } | null;
  if (!e || !isSqlstate(e.code) || typeof e.severity !== 'string') return err;
  return new LedgerSqlError(String(e.message), e.code, str(e.detail), str(e.hint), err);
}

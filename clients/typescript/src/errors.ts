// Typed errors: the SQLSTATEs of the SQL contract (OL001..OL003) and the decisions
// that executeOnce cannot settle on its own.

import type { BeginResult } from './types.js';

/** Base class of every error this client raises. */
export class OpledgerError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An error raised by the database, with its SQLSTATE, DETAIL and HINT. */
export class LedgerSqlError extends OpledgerError {
  readonly sqlstate: string;
  readonly detail: string | undefined;
  readonly hint: string | undefined;
  constructor(message: string, sqlstate: string, detail?: string, hint?: string, cause?: unknown) {
    super(message, { cause });
    this.sqlstate = sqlstate;
    this.detail = detail;
    this.hint = hint;
  }
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

/** The operation has finally failed (decision `failed`); `error` is the stored error. */
export class OperationFailedError extends OpledgerError {
  constructor(readonly begin: BeginResult) {
    super(`operation ${begin.operationId} failed: ${JSON.stringify(begin.error)}`);
  }
  get error(): unknown { return this.begin.error; }
}

/** The tool is irreversible and the operation waits for a person's op_approve. */
export class NeedsApprovalError extends OpledgerError {
  constructor(readonly begin: BeginResult) {
    super(`operation ${begin.operationId} needs approval before it may run`);
  }
}

/**
 * The outcome of an earlier attempt is unknown and no reconcile hook was given (or it
 * could not tell). Someone must ask the provider and call op_resolve.
 */
export class ReconciliationRequiredError extends OpledgerError {
  constructor(readonly begin: BeginResult, cause?: unknown) {
    super(`operation ${begin.operationId} has an unknown outcome and must be reconciled`, { cause });
  }
}

/**
 * The tool call threw and its outcome could not be observed: the operation is now
 * `unknown` in the ledger. The original error is `cause`.
 */
export class OutcomeUnknownError extends OpledgerError {
  constructor(readonly operationId: string, readonly attempt: number, cause: unknown) {
    super(`the outcome of operation ${operationId} (attempt ${attempt}) is unknown`, { cause });
  }
}

/** Waiting for another attempt (in_progress / retry_later) took longer than maxWaitMs. */
export class WaitTimeoutError extends OpledgerError {
  constructor(readonly begin: BeginResult, waitedMs: number) {
    super(`operation ${begin.operationId} still ${begin.decision} after ${waitedMs} ms`);
  }
}

const BY_SQLSTATE: Record<string, typeof LedgerSqlError> = {
  OL001: ArgumentMismatchError,
  OL002: InvalidTransitionError,
  OL003: UnregisteredToolError,
};

/** Maps a `pg` DatabaseError with an opledger SQLSTATE to its typed class; others pass through. */
export function mapDatabaseError(err: unknown): unknown {
  const e = err as { code?: unknown; message?: unknown; detail?: unknown; hint?: unknown };
  if (e && typeof e.code === 'string' && e.code in BY_SQLSTATE) {
    const Cls = BY_SQLSTATE[e.code];
    return new Cls(String(e.message), e.code,
      typeof e.detail === 'string' ? e.detail : undefined,
      typeof e.hint === 'string' ? e.hint : undefined, err);
  }
  return err;
}

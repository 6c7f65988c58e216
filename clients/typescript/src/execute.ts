// executeOnce: the loop every agent framework needs around a side-effecting tool.

import {
  InvalidTransitionError, LeaseTooShortError, NeedsApprovalError, OperationFailedError, OutcomeUnknownError,
  ReconciliationRequiredError, ToolTimeoutError, WaitTimeoutError, type UnknownStage,
} from './errors.js';
import { storableText, toJsonText } from './json.js';
import { Ledger, type Queryable } from './ledger.js';
import type { NoticeHandler } from './notices.js';
import type {
  BeginResult, ErrorClass, JsonValue, Operation, OperationRow, ReconcileOutcome, Reconciled,
} from './types.js';

export interface ToolCallContext<A = JsonValue> {
  /** Pass this to the provider as its idempotency key / reference. */
  operationId: string;
  /** The attempt number (1, 2, ...): the fencing token of this attempt. */
  attempt: number;
  /** The operation's arguments, typed as given in `op.args`. */
  args: A;
  /** Aborted when `timeoutMs` has passed (pass it to fetch or the provider's SDK). */
  signal: AbortSignal;
}

export interface ReconcileContext<A = JsonValue> {
  operationId: string;
  tool: string;
  args: A;
  /** The provider's reference, if an earlier attempt reported one. */
  providerRef: string | null;
  attempt: number;
}

/** The defaults of executeOnce, documented in docs/clients.md. */
export const EXECUTE_DEFAULTS = { maxWaitMs: 60_000, minSleepMs: 50, maxSleepMs: 5_000 } as const;

/**
 * With `timeoutMs`, the attempt's lease must outlast the timeout by this much: the
 * time to record the unknown outcome (op_mark_unknown) before the lease ends.
 */
export const LEASE_MARGIN_MS = 1_000;

export interface ExecuteOptions<T = JsonValue, A = JsonValue> {
  /**
   * Asks the provider what happened to an operation whose outcome is unknown (by
   * operationId / providerRef) and says applied, not_applied or failed. Return
   * `undefined` when the provider cannot tell yet. Without it, `reconcile` throws
   * ReconciliationRequiredError.
   */
  reconcile?: (ctx: ReconcileContext<A>) => Promise<ReconcileOutcome | undefined>;
  /**
   * Where the hook's verdict is recorded (op_resolve): a pool or client whose role is
   * in opledger_reconciler. Default: the `db` given to executeOnce, which under the
   * shipped roles (agent in opledger_agent) may not call op_resolve.
   */
  reconciler?: Queryable | Ledger;
  /** Classifies an error thrown by callTool. Default: every error is 'unknown'. */
  classifyError?: (err: unknown) => ErrorClass;
  /** The provider's own reference for a successful result (stored as provider_ref). */
  providerRefOf?: (result: T) => string | undefined;
  /**
   * Longest time callTool may run, in ms (default: no limit). Past it, the attempt's
   * outcome is unknown (the provider may still do it): op_mark_unknown records it, and
   * the call ends like any unknown outcome (OutcomeUnknownError with stage 'timeout', or
   * the reconcile hook asks the provider). `ctx.signal` aborts at that moment; a result
   * that comes later is ignored. The attempt's lease must end at least LEASE_MARGIN_MS
   * after the timeout would, or executeOnce refuses to call the tool (LeaseTooShortError).
   */
  timeoutMs?: number;
  /** Longest total time to wait for in_progress / retry_later. Default 60 s. */
  maxWaitMs?: number;
  /** Shortest and longest single sleep while waiting. Defaults 50 ms and 5 s. */
  minSleepMs?: number;
  maxSleepMs?: number;
  /** Observes every decision (logging, metrics). */
  onDecision?: (d: BeginResult) => void;
  /**
   * Receives the database's NOTICEs and WARNINGs during the ledger calls (e.g. "the
   * tool of this call is not registered"). Default: the Ledger's (console.warn).
   */
  onNotice?: NoticeHandler;
  /** Injected for tests. */
  sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const serializeError = (err: unknown, stage?: UnknownStage): JsonValue => {
  let out: JsonValue;
  if (err instanceof Error) out = { name: storableText(err.name), message: storableText(err.message) };
  else {
    try { out = JSON.parse(toJsonText(err ?? null) ?? 'null') as JsonValue; } catch { out = storableText(String(err)); }
  }
  if (stage && out !== null && typeof out === 'object' && !Array.isArray(out)) out.stage = stage;
  return out;
};

function ledgerOf(db: Queryable | Ledger, onNotice?: NoticeHandler): Ledger {
  if (db instanceof Ledger) return onNotice ? new Ledger(db.db, { onNotice }) : db;
  return new Ledger(db, { onNotice });
}

function resolveArgs(found: ReconcileOutcome, resolver: string | undefined) {
  return {
    result: found.outcome === 'applied' ? found.result ?? null : found.outcome === 'failed' ? found.error ?? null : undefined,
    providerRef: found.outcome === 'not_applied' ? undefined : found.providerRef,
    resolver,
  };
}

const isPermissionDenied = (err: unknown) => (err as { code?: unknown } | null)?.code === '42501';

/** The decision `failed` for a row op_resolve has just finally failed. */
const failedFrom = (row: OperationRow): BeginResult => ({
  decision: 'failed', nextAction: 'raise_error', operationId: row.operationId, status: row.status, attempt: row.attempt, result: row.result,
  error: row.error, providerRef: row.providerRef, retryAfter: null, finishedAt: null, purged: false,
});

/**
 * Calls the tool, at most `timeoutMs` long: past it, rejects with ToolTimeoutError and
 * aborts the signal the tool was given.
 */
async function callWithTimeout<T, A>(callTool: (ctx: ToolCallContext<A>) => Promise<T>,
  ctx: Omit<ToolCallContext<A>, 'signal'>, timeoutMs: number | undefined): Promise<T> {
  const controller = new AbortController();
  const call = callTool({ ...ctx, signal: controller.signal });
  if (timeoutMs === undefined) return call;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new ToolTimeoutError(timeoutMs);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  call.catch(() => {}); // a rejection after the timeout has no one to tell
  try {
    return await Promise.race([call, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `callTool` at most once per operation ID, however often it is called, by any
 * number of workers: it asks op_begin and does what its next_action says (the extension
 * decides it for each decision, so every opledger client takes the same step):
 *  - call_tool (execute): calls the tool and reports op_succeed / op_fail / op_mark_unknown. Any
 *    failure after the tool returned (a result that is not JSON, op_succeed failing,
 *    a lost connection) is op_mark_unknown and OutcomeUnknownError, never a bare error;
 *  - return_result (replay): returns the stored result without calling the tool;
 *  - wait (in_progress, retry_later): waits until retry_after, at most maxWaitMs in all, then
 *    throws WaitTimeoutError (with retry_after and the lease owner);
 *  - reconcile: runs the reconcile hook and op_resolve (on `reconciler`); applied returns
 *    the result op_resolve recorded, failed throws OperationFailedError, not_applied asks again;
 *  - get_approval (needs_approval), raise_error (failed): throws NeedsApprovalError /
 *    OperationFailedError.
 * Returns the tool's result (or the stored one). Pass a pg.Pool (each call commits
 * on its own), not a client inside an open transaction.
 */
export async function executeOnce<T = JsonValue, A = JsonValue>(
  db: Queryable | Ledger,
  op: Operation<A>,
  callTool: (ctx: ToolCallContext<A>) => Promise<T>,
  options: ExecuteOptions<T, A> = {},
): Promise<T> {
  const ledger = ledgerOf(db, options.onNotice);
  const resolverLedger = options.reconciler ? ledgerOf(options.reconciler, options.onNotice) : ledger;
  const sleep = options.sleep ?? defaultSleep;
  const maxWaitMs = options.maxWaitMs ?? EXECUTE_DEFAULTS.maxWaitMs;
  const minSleep = options.minSleepMs ?? EXECUTE_DEFAULTS.minSleepMs;
  const maxSleep = options.maxSleepMs ?? EXECUTE_DEFAULTS.maxSleepMs;
  const classify = options.classifyError ?? (() => 'unknown' as const);
  const timeoutMs = options.timeoutMs;
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError(`timeoutMs must be a positive number of milliseconds, not ${String(timeoutMs)}`);
  }
  let waited = 0;
  let reconciledUndecided = 0;

  /** Sleeps for `wantedMs` within what is left of maxWaitMs; false when nothing is left. */
  const pause = async (wantedMs: number): Promise<boolean> => {
    const left = maxWaitMs - waited;
    if (left <= 0) return false;
    const ms = Math.min(maxSleep, Math.max(minSleep, wantedMs), left);
    await sleep(ms);
    waited += ms;
    return true;
  };

  /** op_mark_unknown after a failure past the tool call; false when even that failed. */
  const reportUnknown = async (attempt: number, err: unknown, stage: UnknownStage): Promise<boolean> => {
    try {
      await ledger.markUnknown(op.operationId, serializeError(err, stage), { attempt });
      return true;
    } catch {
      return false; // the connection is gone: the lease expires into unknown on its own
    }
  };

  for (;;) {
    const d = await ledger.begin(op);
    options.onDecision?.(d);
    switch (d.nextAction) {
      case 'return_result':
        return d.result as T;

      case 'raise_error':
        throw new OperationFailedError(d);

      case 'get_approval':
        throw new NeedsApprovalError(d);

      case 'wait': {
        const untilMs = d.retryAfter ? d.retryAfter.getTime() - Date.now() : minSleep;
        if (await pause(untilMs)) continue;
        let owner = d.leaseOwner ?? null;
        if (owner === null && d.decision === 'in_progress') owner = await ledger.leaseOwner(op.operationId);
        throw new WaitTimeoutError(d, waited, { maxWaitMs, leaseOwner: owner });
      }

      case 'reconcile': {
        if (!options.reconcile) throw new ReconciliationRequiredError(d);
        const found = await options.reconcile({
          operationId: op.operationId, tool: op.tool, args: op.args, providerRef: d.providerRef, attempt: d.attempt,
        });
        if (found === undefined) {
          // The provider cannot tell yet: back off like in_progress, then ask again.
          reconciledUndecided += 1;
          if (await pause(minSleep * 2 ** reconciledUndecided)) continue;
          throw new ReconciliationRequiredError(d, undefined,
            `the reconcile hook could not tell within maxWaitMs=${maxWaitMs}`);
        }
        let resolved: OperationRow;
        try {
          resolved = await resolverLedger.resolve(op.operationId, found.outcome, resolveArgs(found, op.worker));
        } catch (err) {
          if (isPermissionDenied(err)) {
            throw new ReconciliationRequiredError(d, err, "this connection's role may not call op_resolve: pass " +
              'options.reconciler (a pool or client as a role in opledger_reconciler)');
          }
          // Another reconciler resolved it first: the next op_begin tells us how.
          if (!(err instanceof InvalidTransitionError)) throw err;
          continue;
        }
        // The row op_resolve returned answers the call: asking op_begin again would count
        // this call's own second look as a duplicate the ledger prevented. Only
        // not_applied (retryable: the tool may run again after its backoff) asks again.
        if (resolved.status === 'succeeded') return resolved.result as T;
        if (resolved.status === 'failed') throw new OperationFailedError(failedFrom(resolved));
        continue;
      }

      case 'call_tool': {
        if (timeoutMs !== undefined && d.leaseExpiresAt) {
          // The lease must outlast the tool call: else it ends while the tool may still
          // run, and another worker takes the operation over. Nothing ran yet.
          const leaseLeftMs = d.leaseExpiresAt.getTime() - Date.now();
          if (leaseLeftMs < timeoutMs + LEASE_MARGIN_MS) {
            const err = new LeaseTooShortError(op.operationId, timeoutMs, leaseLeftMs, LEASE_MARGIN_MS);
            await ledger.fail(op.operationId, serializeError(err), true, { attempt: d.attempt });
            throw err;
          }
        }
        // From here on the provider may act: no outcome may be lost.
        let result: T;
        try {
          result = await callWithTimeout(callTool, { operationId: op.operationId, attempt: d.attempt, args: op.args },
            timeoutMs);
        } catch (err) {
          const timedOut = err instanceof ToolTimeoutError;
          let cls: ErrorClass;
          try { cls = timedOut ? 'unknown' : classify(err); } catch { cls = 'unknown'; }
          if (cls === 'unknown') {
            const stage: UnknownStage = timedOut ? 'timeout' : 'tool';
            const recorded = await reportUnknown(d.attempt, err, stage);
            if (options.reconcile && recorded) continue;
            throw new OutcomeUnknownError(op.operationId, d.attempt, err,
              { stage, recorded, leaseExpiresAt: d.leaseExpiresAt });
          }
          await ledger.fail(op.operationId, serializeError(err), cls === 'retryable', { attempt: d.attempt });
          continue; // retryable: op_begin answers retry_later/execute; failed: it answers failed
        }
        let stage: UnknownStage = 'result';
        try {
          const providerRef = options.providerRefOf?.(result);
          toJsonText(result, 'the result');
          stage = 'report';
          await ledger.succeed(op.operationId, result, { attempt: d.attempt, providerRef });
        } catch (err) {
          const recorded = await reportUnknown(d.attempt, err, stage);
          throw new OutcomeUnknownError(op.operationId, d.attempt, err,
            { stage, recorded, leaseExpiresAt: d.leaseExpiresAt });
        }
        return result;
      }

      default: {
        const never: never = d.nextAction;
        throw new Error(`unhandled next_action ${JSON.stringify(never)}`);
      }
    }
  }
}

/**
 * One pass of a reconciler worker: claims up to maxRows unknown operations
 * (op_claim_reconciliation) and resolves each one the hook can decide. `db` is the
 * reconciler's own pool or client, as a role in opledger_reconciler (not the
 * agent's). Returns `{ operation, outcome }` for each operation it resolved; those the
 * hook returned `undefined` for stay unknown and are offered again when the claim
 * expires; one that changed meanwhile (a late op_succeed) is skipped.
 */
export async function reconcileBatch<A = JsonValue>(
  db: Queryable | Ledger,
  worker: string,
  hook: (ctx: ReconcileContext<A>) => Promise<ReconcileOutcome | undefined>,
  options: { maxRows?: number; lease?: string } = {},
): Promise<Reconciled[]> {
  const ledger = ledgerOf(db);
  const claimed = await ledger.claimReconciliation(worker, options.maxRows ?? 10, options.lease ?? '1 minute');
  const done: Reconciled[] = [];
  for (const row of claimed) {
    const found = await hook({
      operationId: row.operationId, tool: row.tool, args: row.args as A,
      providerRef: row.providerRef, attempt: row.attempt,
    });
    if (found === undefined) continue;
    let operation: OperationRow;
    try {
      operation = await ledger.resolve(row.operationId, found.outcome, resolveArgs(found, worker));
    } catch (err) {
      if (err instanceof InvalidTransitionError) continue;
      throw err;
    }
    done.push({ operation, outcome: found.outcome });
  }
  return done;
}

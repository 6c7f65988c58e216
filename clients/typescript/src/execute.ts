// executeOnce: the loop every agent framework needs around a side-effecting tool.

import {
  InvalidTransitionError, NeedsApprovalError, OperationFailedError, OutcomeUnknownError,
  ReconciliationRequiredError, WaitTimeoutError,
} from './errors.js';
import { Ledger, type Queryable } from './ledger.js';
import type { BeginResult, ErrorClass, JsonValue, Operation, OperationRow, ReconcileOutcome } from './types.js';

export interface ToolCallContext {
  /** Pass this to the provider as its idempotency key / reference. */
  operationId: string;
  /** The attempt number (1, 2, ...): the fencing token of this attempt. */
  attempt: number;
  args: JsonValue;
}

export interface ReconcileContext {
  operationId: string;
  tool: string;
  args: JsonValue;
  /** The provider's reference, if an earlier attempt reported one. */
  providerRef: string | null;
  attempt: number;
}

export interface ExecuteOptions<T> {
  /**
   * Asks the provider what happened to an operation whose outcome is unknown (by
   * operationId / providerRef) and says applied, not_applied or failed. Return
   * `undefined` when the provider cannot tell yet. Without it, `reconcile` throws
   * ReconciliationRequiredError.
   */
  reconcile?: (ctx: ReconcileContext) => Promise<ReconcileOutcome | undefined>;
  /** Classifies an error thrown by callTool. Default: every error is 'unknown'. */
  classifyError?: (err: unknown) => ErrorClass;
  /** The provider's own reference for a successful result (stored as provider_ref). */
  providerRefOf?: (result: T) => string | undefined;
  /** Longest total time to wait for in_progress / retry_later. Default 60 s. */
  maxWaitMs?: number;
  /** Shortest and longest single sleep while waiting. Defaults 50 ms and 5 s. */
  minSleepMs?: number;
  maxSleepMs?: number;
  /** Observes every decision (logging, metrics). */
  onDecision?: (d: BeginResult) => void;
  /** Injected for tests. */
  sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const serializeError = (err: unknown): JsonValue => {
  if (err instanceof Error) return { name: err.name, message: err.message };
  try { return JSON.parse(JSON.stringify(err ?? null)) as JsonValue; } catch { return String(err); }
};

function ledgerOf(db: Queryable | Ledger): Ledger {
  return db instanceof Ledger ? db : new Ledger(db);
}

/**
 * Runs `callTool` at most once per operation ID, however often it is called, by any
 * number of workers: it asks op_begin, and
 *  - execute: calls the tool and reports op_succeed / op_fail / op_mark_unknown;
 *  - replay: returns the stored result without calling the tool;
 *  - in_progress, retry_later: waits until retry_after (bounded by maxWaitMs), asks again;
 *  - reconcile: runs the reconcile hook and op_resolve, asks again;
 *  - needs_approval, failed: throws NeedsApprovalError / OperationFailedError.
 * Returns the tool's result (or the stored one). Pass a pg.Pool (each call commits
 * on its own), not a client inside an open transaction.
 */
export async function executeOnce<T extends JsonValue>(
  db: Queryable | Ledger,
  op: Operation,
  callTool: (ctx: ToolCallContext) => Promise<T>,
  options: ExecuteOptions<T> = {},
): Promise<T> {
  const ledger = ledgerOf(db);
  const sleep = options.sleep ?? defaultSleep;
  const maxWaitMs = options.maxWaitMs ?? 60_000;
  const minSleep = options.minSleepMs ?? 50;
  const maxSleep = options.maxSleepMs ?? 5_000;
  const classify = options.classifyError ?? (() => 'unknown' as const);
  let waited = 0;
  let reconciledUndecided = 0;

  for (;;) {
    const d = await ledger.begin(op);
    options.onDecision?.(d);
    switch (d.decision) {
      case 'replay':
        return d.result as T;

      case 'failed':
        throw new OperationFailedError(d);

      case 'needs_approval':
        throw new NeedsApprovalError(d);

      case 'in_progress':
      case 'retry_later': {
        const untilMs = d.retryAfter ? d.retryAfter.getTime() - Date.now() : minSleep;
        const ms = Math.min(maxSleep, Math.max(minSleep, untilMs));
        if (waited + ms > maxWaitMs) throw new WaitTimeoutError(d, waited);
        await sleep(ms);
        waited += ms;
        continue;
      }

      case 'reconcile': {
        if (!options.reconcile) throw new ReconciliationRequiredError(d);
        const found = await options.reconcile({
          operationId: op.operationId, tool: op.tool, args: op.args, providerRef: d.providerRef, attempt: d.attempt,
        });
        if (found === undefined) {
          // The provider cannot tell yet: back off like in_progress, then ask again.
          reconciledUndecided += 1;
          const ms = Math.min(maxSleep, minSleep * 2 ** reconciledUndecided);
          if (waited + ms > maxWaitMs) throw new ReconciliationRequiredError(d);
          await sleep(ms);
          waited += ms;
          continue;
        }
        try {
          await ledger.resolve(op.operationId, found.outcome, {
            result: found.outcome === 'applied' ? found.result ?? null : found.outcome === 'failed' ? found.error ?? null : undefined,
            providerRef: found.outcome === 'not_applied' ? undefined : found.providerRef,
            resolver: op.worker,
          });
        } catch (err) {
          // Another reconciler resolved it first: the next op_begin tells us how.
          if (!(err instanceof InvalidTransitionError)) throw err;
        }
        continue;
      }

      case 'execute': {
        let result: T;
        try {
          result = await callTool({ operationId: op.operationId, attempt: d.attempt, args: op.args });
        } catch (err) {
          const cls = classify(err);
          if (cls === 'unknown') {
            await ledger.markUnknown(op.operationId, serializeError(err), { attempt: d.attempt });
            if (options.reconcile) continue;
            throw new OutcomeUnknownError(op.operationId, d.attempt, err);
          }
          await ledger.fail(op.operationId, serializeError(err), cls === 'retryable', { attempt: d.attempt });
          continue; // retryable: op_begin answers retry_later/execute; failed: it answers failed
        }
        await ledger.succeed(op.operationId, result, {
          attempt: d.attempt, providerRef: options.providerRefOf?.(result),
        });
        return result;
      }

      default: {
        const never: never = d;
        throw new Error(`unhandled decision ${JSON.stringify(never)}`);
      }
    }
  }
}

/**
 * One pass of a reconciler worker: claims up to maxRows unknown operations
 * (op_claim_reconciliation) and resolves each one the hook can decide. Returns the
 * operations it resolved, with their outcome.
 */
export async function reconcileBatch(
  db: Queryable | Ledger,
  worker: string,
  hook: (ctx: ReconcileContext) => Promise<ReconcileOutcome | undefined>,
  options: { maxRows?: number; lease?: string } = {},
): Promise<{ operation: OperationRow; outcome: ReconcileOutcome['outcome'] }[]> {
  const ledger = ledgerOf(db);
  const claimed = await ledger.claimReconciliation(worker, options.maxRows ?? 10, options.lease ?? '1 minute');
  const done: { operation: OperationRow; outcome: ReconcileOutcome['outcome'] }[] = [];
  for (const row of claimed) {
    const found = await hook({
      operationId: row.operationId, tool: row.tool, args: row.args as JsonValue,
      providerRef: row.providerRef, attempt: row.attempt,
    });
    if (found === undefined) continue;
    const operation = await ledger.resolve(row.operationId, found.outcome, {
      result: found.outcome === 'applied' ? found.result ?? null : found.outcome === 'failed' ? found.error ?? null : undefined,
      providerRef: found.outcome === 'not_applied' ? undefined : found.providerRef,
      resolver: worker,
    });
    done.push({ operation, outcome: found.outcome });
  }
  return done;
}

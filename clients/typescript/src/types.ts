// Types mirroring the SQL contract (opledger.begin_result, opledger.operations).

/** opledger.op_status */
export type OpStatus = 'awaiting_approval' | 'pending' | 'succeeded' | 'failed' | 'unknown' | 'retryable';

/** opledger.tool_effect */
export type ToolEffect = 'read_only' | 'idempotent_write' | 'non_idempotent_write' | 'irreversible';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object: what a tool's `args` must be. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * What the client must do with op_begin's answer (begin_result.next_action), decided
 * by the extension for each decision, so every client takes the same step:
 * call_tool (execute), return_result (replay), wait (in_progress, retry_later),
 * reconcile, get_approval (needs_approval), raise_error (failed).
 */
export type NextAction = 'call_tool' | 'return_result' | 'wait' | 'reconcile' | 'get_approval' | 'raise_error';

export const NEXT_ACTIONS: readonly NextAction[] =
  ['call_tool', 'return_result', 'wait', 'reconcile', 'get_approval', 'raise_error'];

interface BeginCommon {
  /** What to do next; executeOnce dispatches on it. */
  nextAction: NextAction;
  operationId: string;
  status: OpStatus;
  attempt: number;
  result: unknown;
  error: unknown;
  providerRef: string | null;
  retryAfter: Date | null;
  finishedAt: Date | null;
  purged: boolean;
  /** Who holds the lease (in_progress), when the extension reports it. */
  leaseOwner?: string | null;
  /** When this attempt's (or the holder's) lease ends, when the extension reports it. */
  leaseExpiresAt?: Date | null;
}

/** The row op_begin returns, as a discriminated union over `decision`. */
export type BeginResult =
  /** Run the tool now (this attempt holds the lease), then report its outcome. */
  | (BeginCommon & { decision: 'execute' })
  /** Already succeeded: use `result`, never call the tool. */
  | (BeginCommon & { decision: 'replay' })
  /** Another attempt holds a live lease: wait until `retryAfter`. */
  | (BeginCommon & { decision: 'in_progress'; retryAfter: Date })
  /** Retryable, backoff not elapsed: wait until `retryAfter`. */
  | (BeginCommon & { decision: 'retry_later'; retryAfter: Date })
  /** Outcome unknown: ask the provider, then op_resolve. */
  | (BeginCommon & { decision: 'reconcile' })
  /** Irreversible tool waiting for a person's op_approve. */
  | (BeginCommon & { decision: 'needs_approval' })
  /** Final failure: surface `error`. */
  | (BeginCommon & { decision: 'failed' });

export type Decision = BeginResult['decision'];

export const DECISIONS: readonly Decision[] =
  ['execute', 'replay', 'in_progress', 'retry_later', 'reconcile', 'needs_approval', 'failed'];

/** A row of opledger.operations (the columns this client uses; the row has more). */
export interface OperationRow {
  operationId: string;
  tool: string;
  args: unknown;
  status: OpStatus;
  attempt: number;
  result: unknown;
  error: unknown;
  providerRef: string | null;
  conversationId: string | null;
  raw: Record<string, unknown>;
}

/**
 * One logical action of an agent. `A` is the type of its arguments (a JSON object;
 * inferred from `args`), so the tool call sees them typed as `ctx.args`.
 */
export interface Operation<A = JsonValue> {
  /** Stable across retries: derive it from the plan step, never inside the retry loop. */
  operationId: string;
  tool: string;
  /** The tool's arguments: a JSON object (fingerprinted; never a JSON string). */
  args: A;
  conversationId?: string;
  /** Who runs the attempt (shown in the audit trail). */
  worker?: string;
  /** Lease for this attempt, as a PostgreSQL interval ('30 seconds'); default: the tool's. */
  lease?: string;
}

/** What a reconcile hook found at the provider. */
export type ReconcileOutcome =
  | { outcome: 'applied'; result?: JsonValue; providerRef?: string }
  | { outcome: 'not_applied' }
  | { outcome: 'failed'; error?: JsonValue; providerRef?: string };

/** One operation that reconcileBatch resolved: the updated row and the hook's outcome. */
export interface Reconciled {
  operation: OperationRow;
  outcome: ReconcileOutcome['outcome'];
}

/** opledger.register_tool's effect classes, for a client-side check. */
export const TOOL_EFFECTS: readonly ToolEffect[] = ['read_only', 'idempotent_write', 'non_idempotent_write', 'irreversible'];

/** The guarantees register_tool accepts. */
export const GUARANTEES = ['provider_key', 'unique_constraint', 'read_before_write', 'none'] as const;

/** How a thrown tool error is recorded. */
export type ErrorClass =
  /** The provider may or may not have done it (timeout, dropped connection). */
  | 'unknown'
  /** The provider definitely did nothing and a later attempt may succeed (429, 503). */
  | 'retryable'
  /** The provider definitely did nothing and retrying will not help (400, declined). */
  | 'failed';

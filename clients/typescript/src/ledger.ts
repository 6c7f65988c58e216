// Thin, typed wrappers around the opledger.* SQL functions. Each method is one SQL
// call; it runs in whatever transaction the given connection is in (a pg.Pool runs
// each call in its own). Errors with an opledger SQLSTATE become typed errors.

import { databaseErrorWithHint } from './errors.js';
import { assertArgsObject, toJsonText } from './json.js';
import { queryReportingNotices, warnNotice, type LedgerNotice, type NoticeHandler } from './notices.js';
import {
  DECISIONS, GUARANTEES, NEXT_ACTIONS, TOOL_EFFECTS, type BeginResult, type JsonValue, type OperationRow, type Operation,
  type OpStatus, type ToolEffect,
} from './types.js';

/** Anything with pg's query(text, values): a pg.Pool, pg.Client or pg.PoolClient. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, any>[] }>;
}

export interface ToolOptions {
  guarantee?: 'provider_key' | 'unique_constraint' | 'read_before_write' | 'none';
  maxAttempts?: number;
  lease?: string;
  backoffBase?: string;
  backoffMax?: string;
  hashExclude?: string[];
  redact?: string[];
}

export interface ReportOptions {
  /** Fencing token: the attempt being reported (from the `execute` decision). */
  attempt?: number;
  providerRef?: string;
}

/** The opledger function a statement calls (for notices and errors). */
const sqlFunctionOf = (text: string) => /opledger\.(\w+)/.exec(text)?.[1] ?? 'query';

const json = (v: unknown, what = 'the value'): string | null =>
  (v === undefined || v === null ? null : toJsonText(v, what) ?? null);

function toDate(v: unknown): Date | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v : new Date(String(v));
}

export function parseBeginRow(row: Record<string, any>): BeginResult {
  const decision = row.decision;
  if (!DECISIONS.includes(decision)) {
    throw new Error(`op_begin returned an unknown decision: ${String(decision)}`);
  }
  const nextAction = row.next_action;
  if (!NEXT_ACTIONS.includes(nextAction)) {
    throw new Error(nextAction === undefined || nextAction === null
      ? 'op_begin returned no next_action: this client needs opledger 0.5.0 or later (ALTER EXTENSION opledger UPDATE)'
      : `op_begin returned an unknown next_action: ${String(nextAction)}`);
  }
  return {
    decision,
    nextAction,
    operationId: row.operation_id,
    status: row.status as OpStatus,
    attempt: Number(row.attempt),
    result: row.result ?? null,
    error: row.error ?? null,
    providerRef: row.provider_ref ?? null,
    retryAfter: toDate(row.retry_after),
    finishedAt: toDate(row.finished_at),
    purged: row.purged === true,
    leaseOwner: row.lease_owner ?? null,
    leaseExpiresAt: toDate(row.lease_expires_at),
  } as BeginResult;
}

export function parseOperationRow(row: Record<string, any>): OperationRow {
  return {
    operationId: row.operation_id,
    tool: row.tool,
    args: row.args ?? null,
    status: row.status as OpStatus,
    attempt: Number(row.attempt),
    result: row.result ?? null,
    error: row.error ?? null,
    providerRef: row.provider_ref ?? null,
    conversationId: row.conversation_id ?? null,
    raw: row,
  };
}

export interface LedgerOptions {
  /**
   * Receives each NOTICE or WARNING the database sends during a Ledger call (such as
   * "the tool of this call is not registered"). Default: console.warn of its text.
   */
  onNotice?: (notice: LedgerNotice) => void;
}

export class Ledger {
  readonly onNotice: NoticeHandler;
  constructor(readonly db: Queryable, options: LedgerOptions = {}) {
    this.onNotice = options.onNotice ?? warnNotice;
  }

  private async q(text: string, values: unknown[], call: LedgerNotice['call'] = { fn: sqlFunctionOf(text) }):
    Promise<Record<string, any>[]> {
    try {
      return await queryReportingNotices(this.db, text, values, call, this.onNotice);
    } catch (err) {
      throw databaseErrorWithHint(err, call.fn);
    }
  }

  /**
   * opledger.register_tool: declare a tool's effect class and retry policy. Run it as
   * the admin (a role in opledger_admin), e.g. in a migration: the agent's role may not.
   */
  async registerTool(tool: string, effect: ToolEffect, o: ToolOptions = {}): Promise<Record<string, any>> {
    if (!TOOL_EFFECTS.includes(effect)) {
      throw new TypeError(`unknown tool effect ${JSON.stringify(effect)}: use one of ${TOOL_EFFECTS.join(', ')}`);
    }
    if (o.guarantee !== undefined && !(GUARANTEES as readonly string[]).includes(o.guarantee)) {
      throw new TypeError(`unknown guarantee ${JSON.stringify(o.guarantee)}: use one of ${GUARANTEES.join(', ')}`);
    }
    const rows = await this.q(
      `SELECT * FROM opledger.register_tool($1, $2::opledger.tool_effect,
          guarantee => $3,
          max_attempts => coalesce($4::int, 5),
          lease => coalesce($5::interval, '5 minutes'),
          backoff_base => coalesce($6::interval, '1 second'),
          backoff_max => coalesce($7::interval, '5 minutes'),
          hash_exclude => coalesce($8::text[], '{}'),
          redact => coalesce($9::text[], '{}'))`,
      [tool, effect, o.guarantee ?? null, o.maxAttempts ?? null, o.lease ?? null, o.backoffBase ?? null,
        o.backoffMax ?? null, o.hashExclude ?? null, o.redact ?? null]);
    return rows[0];
  }

  /** opledger.derive_operation_id: a deterministic UUID from a namespace and JSON parts. */
  async deriveOperationId(namespace: string, parts: JsonValue): Promise<string> {
    const rows = await this.q('SELECT opledger.derive_operation_id($1, $2::jsonb)::text AS id',
      [namespace, json(parts, 'parts')]);
    return rows[0].id;
  }

  /** opledger.op_begin: may this attempt run? `args` must be a JSON object. */
  async begin<A>(op: Operation<A>): Promise<BeginResult> {
    assertArgsObject(op.args);
    const rows = await this.q(
      'SELECT * FROM opledger.op_begin($1, $2, $3::jsonb, $4, $5, $6::interval)',
      [op.operationId, op.tool, json(op.args, 'args'), op.conversationId ?? null, op.worker ?? null, op.lease ?? null],
      { fn: 'op_begin', tool: op.tool, operationId: op.operationId });
    return parseBeginRow(rows[0]);
  }

  /**
   * opledger.op_succeed. `undefined` is stored as JSON null; a result that is not JSON
   * (BigInt, a cycle, Map, Set, NaN) throws NotJsonSerializableError and sends nothing.
   */
  async succeed(operationId: string, result: unknown, o: ReportOptions = {}): Promise<OperationRow> {
    const rows = await this.q(
      'SELECT * FROM opledger.op_succeed($1, $2::jsonb, attempt => $3::int, provider_ref => $4)',
      [operationId, json(result, 'the result') ?? 'null', o.attempt ?? null, o.providerRef ?? null]);
    return parseOperationRow(rows[0]);
  }

  async fail(operationId: string, error: JsonValue, retryable = false, o: ReportOptions = {}): Promise<OperationRow> {
    const rows = await this.q(
      'SELECT * FROM opledger.op_fail($1, $2::jsonb, $3::boolean, attempt => $4::int, provider_ref => $5)',
      [operationId, json(error, 'the error'), retryable, o.attempt ?? null, o.providerRef ?? null]);
    return parseOperationRow(rows[0]);
  }

  async markUnknown(operationId: string, error?: JsonValue, o: ReportOptions = {}): Promise<OperationRow> {
    const rows = await this.q(
      'SELECT * FROM opledger.op_mark_unknown($1, $2::jsonb, attempt => $3::int, provider_ref => $4)',
      [operationId, json(error, 'the error'), o.attempt ?? null, o.providerRef ?? null]);
    return parseOperationRow(rows[0]);
  }

  /** opledger.op_resolve (a role in opledger_reconciler). */
  async resolve(operationId: string, outcome: 'applied' | 'not_applied' | 'failed',
    o: ReportOptions & { result?: JsonValue; resolver?: string; manual?: boolean } = {}): Promise<OperationRow> {
    const rows = await this.q(
      `SELECT * FROM opledger.op_resolve($1, $2, $3::jsonb, attempt => $4::int, provider_ref => $5,
                                         resolver => $6, manual => $7::boolean)`,
      [operationId, outcome, json(o.result, 'the result'), o.attempt ?? null, o.providerRef ?? null, o.resolver ?? null,
        o.manual ?? false]);
    return parseOperationRow(rows[0]);
  }

  /** opledger.op_approve (a role in opledger_approver). */
  async approve(operationId: string, approver: string, note?: string): Promise<OperationRow> {
    const rows = await this.q('SELECT * FROM opledger.op_approve($1, $2, $3)', [operationId, approver, note ?? null]);
    return parseOperationRow(rows[0]);
  }

  /** opledger.op_reject (a role in opledger_approver): the operation ends failed and never runs. */
  async reject(operationId: string, approver: string, note?: string): Promise<OperationRow> {
    const rows = await this.q('SELECT * FROM opledger.op_reject($1, $2, $3)', [operationId, approver, note ?? null]);
    return parseOperationRow(rows[0]);
  }

  /** opledger.op_claim_reconciliation (opledger_reconciler): the unknown operations this reconciler now owns. */
  async claimReconciliation(worker: string, maxRows = 10, lease = '1 minute'): Promise<OperationRow[]> {
    const rows = await this.q('SELECT * FROM opledger.op_claim_reconciliation($1, $2::int, $3::interval)',
      [worker, maxRows, lease]);
    return rows.map(parseOperationRow);
  }

  /** opledger.op_sweep (a role in opledger_reconciler). */
  async sweep(maxRows = 1000): Promise<number> {
    const rows = await this.q('SELECT opledger.op_sweep($1::int) AS n', [maxRows]);
    return Number(rows[0].n);
  }

  /**
   * Who holds the operation's lease, if this role may read opledger.operations (the
   * agent role may not: then null). Used for WaitTimeoutError's message.
   */
  async leaseOwner(operationId: string): Promise<string | null> {
    try {
      const rows = await this.q('SELECT lease_owner FROM opledger.operations WHERE operation_id = $1', [operationId]);
      return rows[0]?.lease_owner ?? null;
    } catch {
      return null;
    }
  }
}

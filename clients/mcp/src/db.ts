// The gateway's connections to the ledger, and the one statement of the hot path:
// op_begin with the operation ID derived in the same statement (one round trip).

import pg from 'pg';
import { assertStorableJsonText, Ledger, mapDatabaseError, parseBeginRow, type BeginResult, type JsonValue } from '@opledger/client';

/** A pool from DATABASE_URL (or the variable named), else from the libpq PG* variables. */
export function makePool(urlVar = 'DATABASE_URL', max = 4): pg.Pool {
  const url = process.env[urlVar];
  const pool = new pg.Pool({
    ...(url ? { connectionString: url } : {}),
    max,
    application_name: 'opledger-mcp',
  });
  // An idle client that loses its connection must not take the gateway down.
  pool.on('error', () => {});
  return pool;
}

export const ID_NAMESPACE = 'opledger-mcp/v1';

/**
 * JSON text for a ::jsonb parameter. A value jsonb cannot hold (a NUL character, an
 * unpaired surrogate) is an UnstorableJsonError naming its JSON Pointer, raised before
 * anything is sent: PostgreSQL would put the text before it, secrets included, in the
 * error's CONTEXT and so in the server log.
 */
function jsonText(v: unknown, what: string): string {
  const text = JSON.stringify(v);
  assertStorableJsonText(text, what);
  return text;
}

// Named prepared statements (parsed and planned once per connection), and only the
// columns the gateway reads: op_begin's row without the fingerprint (args_hash, bytea),
// op_succeed's and op_fail's row (the whole operation, with its args and result as jsonb)
// reduced to its status. The statements and their durability are those of the TS client.
// The columns are checked against the installed opledger.begin_result type by the
// gateway's tests (every one exists, and only BEGIN_COLUMNS_LEFT_OUT are not read).
export const BEGIN_COLUMNS = 'decision, operation_id, status, attempt, result, error, provider_ref, retry_after, lease_expires_at, finished_at, purged, lease_owner, next_action';
/** The begin_result columns the gateway does not read. */
export const BEGIN_COLUMNS_LEFT_OUT = ['fingerprint_alg', 'args_hash'] as const;
const BEGIN_DERIVED = {
  name: 'opledger_mcp_begin_derived',
  text: `SELECT ${BEGIN_COLUMNS} FROM opledger.op_begin(opledger.derive_operation_id($1, $2::jsonb)::text, $3, $4::jsonb, $5, $6, $7::interval)`,
};
const BEGIN_GIVEN = {
  name: 'opledger_mcp_begin_given',
  text: `SELECT ${BEGIN_COLUMNS} FROM opledger.op_begin($1, $2, $3::jsonb, $4, $5, $6::interval)`,
};
const SUCCEED = {
  name: 'opledger_mcp_succeed',
  text: 'SELECT status::text AS status FROM opledger.op_succeed($1, $2::jsonb, attempt => $3::int, provider_ref => $4)',
};
const FAIL = {
  name: 'opledger_mcp_fail',
  text: 'SELECT status::text AS status FROM opledger.op_fail($1, $2::jsonb, $3::boolean, attempt => $4::int, provider_ref => $5)',
};

export interface BeginCall {
  /** Either the ID itself, or the parts it is derived from (with ID_NAMESPACE). */
  operationId?: string;
  idParts?: JsonValue;
  tool: string;
  args: unknown;
  conversationId?: string | null;
  worker?: string | null;
  lease?: string | null;
}

export class LedgerDb {
  readonly ledger: Ledger;
  constructor(readonly pool: pg.Pool) {
    this.ledger = new Ledger(pool);
  }

  async begin(c: BeginCall): Promise<BeginResult> {
    const args = jsonText(c.args ?? {}, 'the arguments');
    const idParts = c.operationId !== undefined ? undefined : jsonText(c.idParts, 'the parts of the operation ID');
    try {
      const r = c.operationId !== undefined
        ? await this.pool.query({ ...BEGIN_GIVEN, values: [c.operationId, c.tool, args, c.conversationId ?? null, c.worker ?? null, c.lease ?? null] })
        : await this.pool.query({
          ...BEGIN_DERIVED,
          values: [ID_NAMESPACE, idParts, c.tool, args, c.conversationId ?? null, c.worker ?? null, c.lease ?? null],
        });
      return parseBeginRow(r.rows[0]);
    } catch (e) {
      throw mapDatabaseError(e);
    }
  }

  /**
   * op_succeed with a result that came off the wire (JSON.parse output, so plain JSON):
   * one autocommit statement, like Ledger.succeed, without reading the row back.
   */
  async succeed(operationId: string, result: unknown, attempt: number | undefined, providerRef?: string): Promise<void> {
    const text = jsonText(result ?? null, 'the result');
    try {
      await this.pool.query({ ...SUCCEED, values: [operationId, text, attempt ?? null, providerRef ?? null] });
    } catch (e) {
      throw mapDatabaseError(e);
    }
  }

  /** op_fail, like Ledger.fail, without reading the row back. */
  async fail(operationId: string, error: unknown, retryable: boolean, attempt: number | undefined, providerRef?: string): Promise<void> {
    const text = error === undefined || error === null ? null : jsonText(error, 'the error');
    try {
      await this.pool.query({ ...FAIL, values: [operationId, text, retryable, attempt ?? null, providerRef ?? null] });
    } catch (e) {
      throw mapDatabaseError(e);
    }
  }

  /** The status and attempt of an operation, or null (also when this role may not read the ledger table). */
  async peek(operationId: string): Promise<{ status: string; attempt: number } | null> {
    try {
      const r = await this.pool.query('SELECT status::text AS status, attempt FROM opledger.operations WHERE operation_id = $1', [operationId]);
      return r.rows[0] ? { status: r.rows[0].status, attempt: Number(r.rows[0].attempt) } : null;
    } catch {
      return null;
    }
  }
}

"""Thin wrappers around the opledger.* SQL functions, one SQL call each.

Each call runs in its own transaction block (``conn.transaction()``): on an
autocommit connection, or an idle one, it commits when it returns. Inside a
transaction you opened yourself it becomes a savepoint of yours, which is what
you want when the tool's only effect is a write to the same database."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .errors import map_database_error
from .types import BeginResult, Operation, OperationRow, ToolEffect


def _json(value: Any) -> Optional[Jsonb]:
    return None if value is None else Jsonb(value)


class Ledger:
    def __init__(self, conn: psycopg.Connection):
        self.conn = conn

    def _rows(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        try:
            with self.conn.transaction(), self.conn.cursor(row_factory=dict_row) as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        except psycopg.Error as err:
            mapped = map_database_error(err)
            if mapped is err:
                raise
            raise mapped from err

    def register_tool(self, tool: str, effect: ToolEffect | str, *, guarantee: Optional[str] = None,
                      max_attempts: int = 5, lease: str = "5 minutes",
                      backoff_base: str = "1 second", backoff_max: str = "5 minutes",
                      hash_exclude: Sequence[str] = (), redact: Sequence[str] = ()) -> dict[str, Any]:
        """opledger.register_tool: declare a tool's effect class and retry policy."""
        return self._rows(
            "SELECT * FROM opledger.register_tool(%s, %s::opledger.tool_effect, guarantee => %s,"
            " max_attempts => %s, lease => %s::interval, backoff_base => %s::interval,"
            " backoff_max => %s::interval, hash_exclude => %s::text[], redact => %s::text[])",
            [tool, ToolEffect(effect).value, guarantee, max_attempts, lease, backoff_base, backoff_max,
             list(hash_exclude), list(redact)])[0]

    def derive_operation_id(self, namespace: str, parts: Any) -> str:
        """opledger.derive_operation_id: a deterministic UUID from a namespace and JSON parts."""
        return self._rows("SELECT opledger.derive_operation_id(%s, %s)::text AS id",
                          [namespace, Jsonb(parts)])[0]["id"]

    def begin(self, op: Operation) -> BeginResult:
        """opledger.op_begin: may this attempt run?"""
        rows = self._rows("SELECT * FROM opledger.op_begin(%s, %s, %s, %s, %s, %s::interval)",
                          [op.operation_id, op.tool, Jsonb(op.args), op.conversation_id, op.worker, op.lease])
        return BeginResult.from_row(rows[0])

    def succeed(self, operation_id: str, result: Any, *, attempt: Optional[int] = None,
                provider_ref: Optional[str] = None) -> OperationRow:
        rows = self._rows("SELECT * FROM opledger.op_succeed(%s, %s, attempt => %s::int, provider_ref => %s)",
                          [operation_id, Jsonb(result), attempt, provider_ref])
        return OperationRow.from_row(rows[0])

    def fail(self, operation_id: str, error: Any, retryable: bool = False, *,
             attempt: Optional[int] = None, provider_ref: Optional[str] = None) -> OperationRow:
        rows = self._rows("SELECT * FROM opledger.op_fail(%s, %s, %s, attempt => %s::int, provider_ref => %s)",
                          [operation_id, _json(error), retryable, attempt, provider_ref])
        return OperationRow.from_row(rows[0])

    def mark_unknown(self, operation_id: str, error: Any = None, *, attempt: Optional[int] = None,
                     provider_ref: Optional[str] = None) -> OperationRow:
        rows = self._rows("SELECT * FROM opledger.op_mark_unknown(%s, %s, attempt => %s::int, provider_ref => %s)",
                          [operation_id, _json(error), attempt, provider_ref])
        return OperationRow.from_row(rows[0])

    def resolve(self, operation_id: str, outcome: str, result: Any = None, *,
                attempt: Optional[int] = None, provider_ref: Optional[str] = None,
                resolver: Optional[str] = None, manual: bool = False) -> OperationRow:
        rows = self._rows(
            "SELECT * FROM opledger.op_resolve(%s, %s, %s, attempt => %s::int, provider_ref => %s,"
            " resolver => %s, manual => %s)",
            [operation_id, outcome, _json(result), attempt, provider_ref, resolver, manual])
        return OperationRow.from_row(rows[0])

    def approve(self, operation_id: str, approver: str, note: Optional[str] = None) -> OperationRow:
        rows = self._rows("SELECT * FROM opledger.op_approve(%s, %s, %s)", [operation_id, approver, note])
        return OperationRow.from_row(rows[0])

    def claim_reconciliation(self, worker: str, max_rows: int = 10,
                             lease: str = "1 minute") -> list[OperationRow]:
        rows = self._rows("SELECT * FROM opledger.op_claim_reconciliation(%s, %s, %s::interval)",
                          [worker, max_rows, lease])
        return [OperationRow.from_row(r) for r in rows]

    def sweep(self, max_rows: int = 1000) -> int:
        return int(self._rows("SELECT opledger.op_sweep(%s) AS n", [max_rows])[0]["n"])

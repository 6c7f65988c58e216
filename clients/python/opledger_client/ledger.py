"""Thin wrappers around the opledger.* SQL functions, one SQL call each.

A ``Ledger`` wraps either a psycopg connection or a connection pool (anything
with a ``connection()`` context manager, such as ``psycopg_pool.ConnectionPool``).

Each call runs in its own transaction block (``conn.transaction()``): on an
autocommit connection, or an idle one, it commits when it returns. Inside a
transaction you opened yourself it becomes a savepoint of yours, which is what
you want when the tool's only effect is a write to the same database. With a
pool, each call borrows a connection, so a connection dropped while the tool
ran does not stop the report that follows."""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .errors import LedgerNotice, LedgerSqlError, NotJsonSerializable, map_database_error
from .types import BeginResult, Operation, OperationRow, ToolEffect

GUARANTEES = ("provider_key", "unique_constraint", "read_before_write", "none")


def dumps(value: Any, what: str = "the value") -> str:
    """Strict JSON text of ``value`` (no NaN/Infinity, no sets, bytes or objects):
    raises NotJsonSerializable instead of sending something the ledger can't hold."""
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as err:
        raise NotJsonSerializable(what, err) from err


def _jsonb(value: Any, what: str) -> Jsonb:
    text = dumps(value, what)
    return Jsonb(value, dumps=lambda _obj: text)


def _json(value: Any, what: str = "the value") -> Optional[Jsonb]:
    return None if value is None else _jsonb(value, what)


def check_effect(effect: Union[ToolEffect, str]) -> ToolEffect:
    try:
        return ToolEffect(effect)
    except ValueError:
        valid = ", ".join(e.value for e in ToolEffect)
        raise ValueError(f"unknown tool effect {effect!r}: use one of {valid}") from None


def check_args(args: Any) -> None:
    if not isinstance(args, Mapping):
        hint = (" (a JSON string? pass the dict itself, not json.dumps(...))" if isinstance(args, (str, bytes))
                else "")
        raise TypeError(f"args must be a JSON object (a dict of the tool's arguments), not "
                        f"{type(args).__name__}{hint}")


_FUNCTION = re.compile(r"opledger\.(\w+)")

#: on_notice(notice): receives each NOTICE / WARNING of a Ledger call.
NoticeHandler = Callable[[LedgerNotice], None]


def warn_notice(notice: LedgerNotice) -> None:
    """The default notice handler: ``warnings.warn`` with category LedgerNotice."""
    warnings.warn(notice, stacklevel=2)


class Ledger:
    def __init__(self, conn: Any, *, on_notice: Optional[NoticeHandler] = None):
        """``conn``: a psycopg Connection (autocommit recommended) or a pool with a
        ``connection()`` context manager. ``on_notice`` receives the NOTICEs and
        WARNINGs the database sends during this Ledger's calls (such as "the tool of
        this call is not registered") as LedgerNotice; default: ``warnings.warn``."""
        self.conn = conn
        self.on_notice = on_notice or warn_notice

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        if isinstance(self.conn, psycopg.Connection) or not hasattr(self.conn, "connection"):
            yield self.conn
        else:
            with self.conn.connection() as c:
                yield c

    def _rows(self, sql: str, params: Sequence[Any], *, tool: Optional[str] = None,
              operation_id: Optional[str] = None) -> list[dict[str, Any]]:
        m = _FUNCTION.search(sql)
        function = m.group(1) if m else "query"

        def notice(diag: psycopg.errors.Diagnostic) -> None:
            # psycopg drops notices unless someone listens; a mistyped tool name must
            # not run silently.
            self.on_notice(LedgerNotice(diag.message_primary or "", severity=diag.severity or "NOTICE",
                                        sqlstate=diag.sqlstate, detail=diag.message_detail,
                                        hint=diag.message_hint, function=function, tool=tool,
                                        operation_id=operation_id))
        try:
            with self._connection() as conn:
                listens = hasattr(conn, "add_notice_handler")  # a psycopg connection (not a stand-in)
                if listens:
                    conn.add_notice_handler(notice)
                try:
                    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                        cur.execute(sql, params)
                        return cur.fetchall()
                finally:
                    if listens:
                        conn.remove_notice_handler(notice)
        except psycopg.Error as err:
            mapped = map_database_error(err, function)
            if mapped is err:
                raise
            raise mapped from err

    def register_tool(self, tool: str, effect: ToolEffect | str, *, guarantee: Optional[str] = None,
                      max_attempts: int = 5, lease: str = "5 minutes",
                      backoff_base: str = "1 second", backoff_max: str = "5 minutes",
                      hash_exclude: Sequence[str] = (), redact: Sequence[str] = ()) -> dict[str, Any]:
        """opledger.register_tool: declare a tool's effect class and retry policy.
        Run it as the admin (a role in opledger_admin), e.g. in a migration: the
        agent's role may not."""
        effect = check_effect(effect)
        if guarantee is not None and guarantee not in GUARANTEES:
            raise ValueError(f"unknown guarantee {guarantee!r}: use one of {', '.join(GUARANTEES)}")
        return self._rows(
            "SELECT * FROM opledger.register_tool(%s, %s::opledger.tool_effect, guarantee => %s,"
            " max_attempts => %s, lease => %s::interval, backoff_base => %s::interval,"
            " backoff_max => %s::interval, hash_exclude => %s::text[], redact => %s::text[])",
            [tool, effect.value, guarantee, max_attempts, lease, backoff_base, backoff_max,
             list(hash_exclude), list(redact)])[0]

    def derive_operation_id(self, namespace: str, parts: Any) -> str:
        """opledger.derive_operation_id: a deterministic UUID from a namespace and JSON parts."""
        return self._rows("SELECT opledger.derive_operation_id(%s, %s)::text AS id",
                          [namespace, _jsonb(parts, "parts")])[0]["id"]

    def begin(self, op: Operation | str, tool: Optional[str] = None, args: Any = None, *,
              conversation_id: Optional[str] = None, worker: Optional[str] = None,
              lease: Optional[str] = None) -> BeginResult:
        """opledger.op_begin: may this attempt run?

        ``begin(op)`` with an Operation, or ``begin(operation_id, tool, args,
        conversation_id=..., worker=..., lease=...)`` like the SQL function. Keyword
        arguments given with an Operation override its fields."""
        if isinstance(op, Operation):
            operation_id, tool, args = op.operation_id, op.tool, op.args
            conversation_id = conversation_id if conversation_id is not None else op.conversation_id
            worker = worker if worker is not None else op.worker
            lease = lease if lease is not None else op.lease
        else:
            if tool is None:
                raise TypeError("begin(operation_id, tool, args, ...) needs the tool name")
            operation_id = op
        check_args(args)
        rows = self._rows("SELECT * FROM opledger.op_begin(%s, %s, %s, %s, %s, %s::interval)",
                          [operation_id, tool, _jsonb(args, "args"), conversation_id, worker, lease],
                          tool=tool, operation_id=operation_id)
        return BeginResult.from_row(rows[0])

    def succeed(self, operation_id: str, result: Any, *, attempt: Optional[int] = None,
                provider_ref: Optional[str] = None) -> OperationRow:
        """opledger.op_succeed. Raises NotJsonSerializable (sending nothing) when
        ``result`` is not JSON."""
        rows = self._rows("SELECT * FROM opledger.op_succeed(%s, %s, attempt => %s::int, provider_ref => %s)",
                          [operation_id, _jsonb(result, "the result"), attempt, provider_ref])
        return OperationRow.from_row(rows[0])

    def fail(self, operation_id: str, error: Any, retryable: bool = False, *,
             attempt: Optional[int] = None, provider_ref: Optional[str] = None) -> OperationRow:
        rows = self._rows("SELECT * FROM opledger.op_fail(%s, %s, %s, attempt => %s::int, provider_ref => %s)",
                          [operation_id, _json(error, "the error"), retryable, attempt, provider_ref])
        return OperationRow.from_row(rows[0])

    def mark_unknown(self, operation_id: str, error: Any = None, *, attempt: Optional[int] = None,
                     provider_ref: Optional[str] = None) -> OperationRow:
        rows = self._rows("SELECT * FROM opledger.op_mark_unknown(%s, %s, attempt => %s::int, provider_ref => %s)",
                          [operation_id, _json(error, "the error"), attempt, provider_ref])
        return OperationRow.from_row(rows[0])

    def resolve(self, operation_id: str, outcome: str, result: Any = None, *,
                attempt: Optional[int] = None, provider_ref: Optional[str] = None,
                resolver: Optional[str] = None, manual: bool = False) -> OperationRow:
        """opledger.op_resolve (a role in opledger_reconciler)."""
        rows = self._rows(
            "SELECT * FROM opledger.op_resolve(%s, %s, %s, attempt => %s::int, provider_ref => %s,"
            " resolver => %s, manual => %s)",
            [operation_id, outcome, _json(result, "the result"), attempt, provider_ref, resolver, manual])
        return OperationRow.from_row(rows[0])

    def approve(self, operation_id: str, approver: str, note: Optional[str] = None) -> OperationRow:
        """opledger.op_approve (a role in opledger_approver)."""
        rows = self._rows("SELECT * FROM opledger.op_approve(%s, %s, %s)", [operation_id, approver, note])
        return OperationRow.from_row(rows[0])

    def reject(self, operation_id: str, approver: str, note: Optional[str] = None) -> OperationRow:
        """opledger.op_reject (a role in opledger_approver): the operation ends failed and never runs."""
        rows = self._rows("SELECT * FROM opledger.op_reject(%s, %s, %s)", [operation_id, approver, note])
        return OperationRow.from_row(rows[0])

    def claim_reconciliation(self, worker: str, max_rows: int = 10,
                             lease: str = "1 minute") -> list[OperationRow]:
        """opledger.op_claim_reconciliation (a role in opledger_reconciler)."""
        rows = self._rows("SELECT * FROM opledger.op_claim_reconciliation(%s, %s, %s::interval)",
                          [worker, max_rows, lease])
        return [OperationRow.from_row(r) for r in rows]

    def sweep(self, max_rows: int = 1000) -> int:
        """opledger.op_sweep (a role in opledger_reconciler)."""
        return int(self._rows("SELECT opledger.op_sweep(%s) AS n", [max_rows])[0]["n"])

    def lease_owner(self, operation_id: str) -> Optional[str]:
        """Who holds the operation's lease, if this role may read opledger.operations
        (the agent role may not: then None). Used for WaitTimeout's message."""
        try:
            rows = self._rows("SELECT lease_owner FROM opledger.operations WHERE operation_id = %s",
                              [operation_id])
        except (psycopg.Error, LedgerSqlError):
            return None
        return rows[0]["lease_owner"] if rows else None

"""Exceptions: the SQLSTATEs of the SQL contract and the decisions execute_once
cannot settle on its own. Every exception says what to do next (``next_step``,
also the last part of its message)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional, TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .types import BeginResult


def _resolve_hint(operation_id: str) -> str:
    return ("pass reconcile= (a hook that asks the provider) to execute_once and call it again, run "
            "reconcile_batch in a reconciler worker, or have the reconciler/admin record what the provider "
            f"says: SELECT opledger.op_resolve('{operation_id}', 'applied' | 'not_applied' | 'failed', "
            "manual => true)")


def _when(t: Optional[datetime]) -> str:
    return t.isoformat(timespec="milliseconds") if t else "an unknown time"


class OpledgerError(Exception):
    """Base class of every exception this client raises."""

    #: What the caller should do about it, in one sentence.
    next_step: Optional[str] = None


class LedgerSqlError(OpledgerError):
    """An error raised by the database, with its SQLSTATE, DETAIL and HINT.
    ``str()`` shows all three; the HINT is the next step."""

    def __init__(self, message: str, sqlstate: str, detail: Optional[str] = None,
                 hint: Optional[str] = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint
        self.next_step = hint

    def __str__(self) -> str:
        text = f"{self.args[0]} ({self.sqlstate})"
        if self.detail:
            text += f"\nDETAIL: {self.detail}"
        if self.hint:
            text += f"\nHINT: {self.hint}"
        return text


# DETAIL: "The arguments differ at: /a, /b/0. Stored fingerprint ..." (or "differ only
# under redacted paths (values are never shown): /card/cvv. Stored ...").
_DIFFER = re.compile(r"differ (?:at|only under redacted paths \(values are never shown\)): (.*?)\. Stored fingerprint",
                     re.S)


class ArgumentMismatch(LedgerSqlError):
    """OL001: the operation ID was already used with different arguments or tool.

    ``detail`` names both fingerprints and the JSON Pointers of the members that
    differ; ``differing_pointers`` is that list. Fix the call, keep the ID."""

    @property
    def differing_pointers(self) -> list[str]:
        m = _DIFFER.search(self.detail or "")
        if not m:
            return []
        return ["" if p == '"" (the whole document)' else p for p in m.group(1).split(", ")]


class InvalidTransition(LedgerSqlError):
    """OL002: impossible state transition, unknown operation ID or stale attempt."""


class UnregisteredTool(LedgerSqlError):
    """OL003: unregistered tool while opledger.require_registered_tools is on."""


class NotJsonSerializable(OpledgerError, TypeError):
    """A value the ledger must store (a tool's result, args) is not JSON: a set,
    bytes, a datetime, NaN, an object. Raised before anything is sent."""

    def __init__(self, what: str, cause: BaseException):
        super().__init__(f"{what} is not JSON-serialisable: {cause}")
        self.next_step = (f"return (or pass) plain JSON values: dicts, lists, str, int, float, bool, None; "
                          f"convert sets to sorted lists, datetimes to ISO strings")


class OperationFailed(OpledgerError):
    """The operation has finally failed (decision ``failed``)."""

    def __init__(self, begin: "BeginResult"):
        self.next_step = ("the failure is final and every retry with this operation ID answers the same; "
                          "show the error to the user, and if they want it tried again, that is a new action "
                          "with a new operation ID")
        super().__init__(f"operation {begin.operation_id} failed: {begin.error!r}. Next: {self.next_step}")
        self.begin = begin
        self.error = begin.error


class NeedsApproval(OpledgerError):
    """An irreversible tool's operation waits for a person's op_approve."""

    def __init__(self, begin: "BeginResult"):
        self.next_step = (f"a person in the opledger_approver role must approve it (SELECT opledger.op_approve("
                          f"'{begin.operation_id}', approver => 'name')); then call again with the same ID")
        super().__init__(f"operation {begin.operation_id} needs approval before it may run. Next: {self.next_step}")
        self.begin = begin


class ReconciliationRequired(OpledgerError):
    """The outcome of an earlier attempt is unknown and no reconcile hook settled it."""

    def __init__(self, begin: "BeginResult", reason: Optional[str] = None):
        self.next_step = _resolve_hint(begin.operation_id)
        why = reason or "no reconcile hook was given, or it could not tell"
        super().__init__(f"operation {begin.operation_id} has an unknown outcome and must be reconciled "
                         f"({why}). Next: {self.next_step}")
        self.begin = begin
        self.reason = why


class OutcomeUnknown(OpledgerError):
    """The tool was called and its outcome could not be observed: the tool raised,
    its result could not be stored, or reporting it failed. The operation is now
    ``unknown`` in the ledger (``recorded``), or becomes so when its lease expires
    (``recorded`` false: the ledger could not be reached). The original exception
    is ``__cause__``.

    ``stage`` says where it happened: ``"tool"`` (the tool raised), ``"result"``
    (the result is not JSON), ``"report"`` (op_succeed failed)."""

    def __init__(self, operation_id: str, attempt: int, *, stage: str = "tool", recorded: bool = True,
                 lease_expires_at: Optional[datetime] = None):
        self.operation_id = operation_id
        self.attempt = attempt
        self.stage = stage
        self.recorded = recorded
        self.next_step = _resolve_hint(operation_id)
        what = {"tool": "the tool raised",
                "result": "the tool returned a result that cannot be stored as JSON",
                "report": "reporting its success to the ledger failed"}.get(stage, stage)
        where = ("the ledger now holds it as unknown" if recorded else
                 "the ledger could not be told either; op_begin treats it as unknown once its lease expires "
                 f"(at {_when(lease_expires_at)})")
        super().__init__(f"the outcome of operation {operation_id} (attempt {attempt}) is unknown: {what}, "
                         f"so the provider may or may not have done it; {where}. Next: {self.next_step}")


class WaitTimeout(OpledgerError):
    """Waiting for another attempt (in_progress / retry_later) took longer than max_wait."""

    def __init__(self, begin: "BeginResult", waited: float, *, max_wait: Optional[float] = None,
                 lease_owner: Optional[str] = None):
        self.begin = begin
        self.waited = waited
        self.retry_after = begin.retry_after
        self.lease_owner = lease_owner
        limit = f" (max_wait={max_wait:g} s)" if max_wait is not None else ""
        if begin.decision.value == "in_progress":
            owner = f"worker {lease_owner!r}" if lease_owner else "another attempt (owner not visible to this role)"
            state = f"its lease is held by {owner} until {_when(begin.retry_after)} (retry_after)"
            self.next_step = ("call again after retry_after, or raise max_wait; if that worker is gone, its lease "
                              "ends at retry_after and the operation becomes unknown, to be reconciled")
        else:
            state = f"the tool's backoff ends at {_when(begin.retry_after)} (retry_after)"
            self.next_step = "call again after retry_after, or raise max_wait"
        super().__init__(f"operation {begin.operation_id} still {begin.decision.value} after {waited:.1f} s{limit}: "
                         f"{state}. Next: {self.next_step}")


_BY_SQLSTATE = {"OL001": ArgumentMismatch, "OL002": InvalidTransition, "OL003": UnregisteredTool}


def map_database_error(err: Any) -> Exception:
    """A psycopg error with an opledger SQLSTATE becomes its typed exception."""
    state = getattr(err, "sqlstate", None)
    cls = _BY_SQLSTATE.get(state or "")
    if cls is None:
        return err
    diag = getattr(err, "diag", None)
    return cls(getattr(diag, "message_primary", None) or str(err), state,
               getattr(diag, "message_detail", None), getattr(diag, "message_hint", None))

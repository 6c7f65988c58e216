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


#: The shipped group role for each opledger function and table a client calls
#: (opledger.create_roles() grants them; opledger_admin may use them all).
REQUIRED_ROLE = {
    **dict.fromkeys(("op_begin", "op_succeed", "op_fail", "op_mark_unknown", "notify_token"), "opledger_agent"),
    **dict.fromkeys(("op_claim_reconciliation", "op_resolve", "op_sweep", "operations", "events",
                     "unknown_operations"), "opledger_reconciler"),
    **dict.fromkeys(("op_approve", "op_reject"), "opledger_approver"),
    **dict.fromkeys(("register_tool", "op_purge", "set_role_tenant", "reset_rejected_reuses"), "opledger_admin"),
    **dict.fromkeys(("metrics_since", "metrics", "tool_stats", "metrics_hourly", "rejected_reuses"),
                    "opledger_dashboard"),
}


class PermissionDenied(LedgerSqlError):
    """42501: this connection's role may not call the function (or read the table).
    The message names the shipped group role that may (``required_role``); the next
    step is to make the call as a login role in it."""

    def __init__(self, message: str, detail: Optional[str] = None, obj: Optional[str] = None):
        self.object = obj
        self.required_role = REQUIRED_ROLE.get(obj or "")
        what = f"opledger.{obj}" if obj else "this opledger function"
        if self.required_role:
            role = self.required_role
            hint = (f"{what} needs a role in {role}, and this connection's role is not in it: make this call on a "
                    f"connection that logs in as a member of {role} (a superuser grants it once: GRANT {role} TO "
                    "your_login_role; the group roles come from SELECT opledger.create_roles()). See "
                    "docs/security.md, the role matrix.")
        else:
            hint = (f"this connection's role may not use {what}: use a login role that was granted it "
                    "(docs/security.md, the role matrix).")
        super().__init__(message, "42501", detail, hint)


class LedgerNotice(UserWarning):
    """A NOTICE (or WARNING) the database sent during a Ledger call, such as "the tool
    of this call is not registered", issued with ``warnings.warn``. ``str()`` gives the
    message with the call, DETAIL and HINT; the parts are attributes."""

    def __init__(self, message: str, *, severity: str = "NOTICE", sqlstate: Optional[str] = None,
                 detail: Optional[str] = None, hint: Optional[str] = None, function: str = "",
                 tool: Optional[str] = None, operation_id: Optional[str] = None):
        about = ", ".join(x for x in (f"tool {tool!r}" if tool is not None else "",
                                      f"operation {operation_id}" if operation_id is not None else "") if x)
        text = f"{message} ({function}{': ' + about if about else ''})"
        if detail:
            text += f"\nDETAIL: {detail}"
        if hint:
            text += f"\nHINT: {hint}"
        super().__init__(text)
        self.message, self.severity, self.sqlstate, self.detail, self.hint = message, severity, sqlstate, detail, hint
        self.function, self.tool, self.operation_id = function, tool, operation_id


class ToolTimeout(OpledgerError):
    """The tool did not answer within execute_once's ``timeout`` (the ``__cause__`` of
    the OutcomeUnknown that follows: the provider may still be doing it)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.next_step = "treat the outcome as unknown: reconcile it with the provider"
        super().__init__(f"the tool did not answer within timeout={timeout:g} s")


class LeaseTooShort(OpledgerError):
    """execute_once was given a ``timeout`` that the attempt's lease does not outlast:
    the lease would end while the tool may still run, and another worker could then
    take the operation over. Raised before the tool is called; the attempt is recorded
    as a retryable failure (nothing ran)."""

    def __init__(self, operation_id: str, timeout: float, lease_left: float, margin: float):
        self.operation_id, self.timeout, self.lease_left, self.margin = operation_id, timeout, lease_left, margin
        self.next_step = (f"give the attempt a lease longer than timeout + {margin:g} s (Operation(lease=...), e.g. "
                          f"'{int(timeout + margin) + 2} seconds', or register_tool(lease => ...) as admin), "
                          "or lower timeout")
        super().__init__(f"operation {operation_id}: the attempt's lease ends in {max(0.0, lease_left):.1f} s, before "
                         f"timeout={timeout:g} s (+ {margin:g} s to record the outcome) would end the tool call, so "
                         f"the tool was not called (recorded as a retryable failure). Next: {self.next_step}")


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
        what = {"tool": "the tool raised", "timeout": "the tool did not answer within its timeout",
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
_DENIED = re.compile(r"permission denied for (?:function|table|view|relation) (\w+)")


def map_database_error(err: Any, function: Optional[str] = None) -> Exception:
    """A psycopg error raised by the database (it has a SQLSTATE) becomes a
    LedgerSqlError whose message carries DETAIL and HINT (psycopg's leaves them out):
    OL001..OL003 their typed exceptions, 42501 PermissionDenied naming the role the
    call needs (``function``: the opledger function called, when known). Other errors
    (a lost connection) are returned unchanged."""
    state = getattr(err, "sqlstate", None)
    if not state:
        return err
    diag = getattr(err, "diag", None)
    message = getattr(diag, "message_primary", None) or str(err)
    detail, hint = getattr(diag, "message_detail", None), getattr(diag, "message_hint", None)
    if state == "42501":
        m = _DENIED.search(message)
        return PermissionDenied(message, detail, m.group(1) if m else function)
    return _BY_SQLSTATE.get(state, LedgerSqlError)(message, state, detail, hint)

"""Exceptions: the SQLSTATEs of the SQL contract and the decisions execute_once
cannot settle on its own."""

from __future__ import annotations

import re
from typing import Any, Optional, TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .types import BeginResult


class OpledgerError(Exception):
    """Base class of every exception this client raises."""


class LedgerSqlError(OpledgerError):
    """An error raised by the database, with its SQLSTATE, DETAIL and HINT."""

    def __init__(self, message: str, sqlstate: str, detail: Optional[str] = None,
                 hint: Optional[str] = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint


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


class OperationFailed(OpledgerError):
    """The operation has finally failed (decision ``failed``)."""

    def __init__(self, begin: "BeginResult"):
        super().__init__(f"operation {begin.operation_id} failed: {begin.error!r}")
        self.begin = begin
        self.error = begin.error


class NeedsApproval(OpledgerError):
    """An irreversible tool's operation waits for a person's op_approve."""

    def __init__(self, begin: "BeginResult"):
        super().__init__(f"operation {begin.operation_id} needs approval before it may run")
        self.begin = begin


class ReconciliationRequired(OpledgerError):
    """The outcome of an earlier attempt is unknown and no reconcile hook settled it."""

    def __init__(self, begin: "BeginResult"):
        super().__init__(f"operation {begin.operation_id} has an unknown outcome and must be reconciled")
        self.begin = begin


class OutcomeUnknown(OpledgerError):
    """The tool raised and its outcome could not be observed: the operation is now
    ``unknown`` in the ledger. The tool's exception is ``__cause__``."""

    def __init__(self, operation_id: str, attempt: int):
        super().__init__(f"the outcome of operation {operation_id} (attempt {attempt}) is unknown")
        self.operation_id = operation_id
        self.attempt = attempt


class WaitTimeout(OpledgerError):
    """Waiting for another attempt (in_progress / retry_later) took longer than max_wait."""

    def __init__(self, begin: "BeginResult", waited: float):
        super().__init__(f"operation {begin.operation_id} still {begin.decision.value} after {waited:.1f} s")
        self.begin = begin


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

"""Types mirroring the SQL contract (opledger.begin_result, opledger.operations)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Optional, Union


class Decision(str, enum.Enum):
    """What op_begin tells the caller to do."""
    EXECUTE = "execute"                # run the tool now, then report its outcome
    REPLAY = "replay"                  # already succeeded: use result, never call the tool
    IN_PROGRESS = "in_progress"        # another attempt holds a live lease: wait
    RETRY_LATER = "retry_later"        # retryable, backoff not elapsed: wait
    RECONCILE = "reconcile"            # outcome unknown: ask the provider, then op_resolve
    NEEDS_APPROVAL = "needs_approval"  # irreversible tool waiting for op_approve
    FAILED = "failed"                  # final failure: surface error


class NextAction(str, enum.Enum):
    """What the client must do with op_begin's answer (begin_result.next_action).

    The extension decides it for each decision, so every opledger client takes the
    same step; execute_once dispatches on it."""
    CALL_TOOL = "call_tool"          # execute
    RETURN_RESULT = "return_result"  # replay
    WAIT = "wait"                    # in_progress, retry_later: wait until retry_after, ask again
    RECONCILE = "reconcile"          # ask the provider, op_resolve, ask again
    GET_APPROVAL = "get_approval"    # needs_approval: a person must op_approve
    RAISE_ERROR = "raise_error"      # failed: surface error


class OpStatus(str, enum.Enum):
    AWAITING_APPROVAL = "awaiting_approval"
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"
    RETRYABLE = "retryable"


class ToolEffect(str, enum.Enum):
    READ_ONLY = "read_only"
    IDEMPOTENT_WRITE = "idempotent_write"
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    IRREVERSIBLE = "irreversible"


class ErrorClass(str, enum.Enum):
    """How an exception raised by the tool is recorded."""
    UNKNOWN = "unknown"      # the provider may or may not have done it (timeout)
    RETRYABLE = "retryable"  # definitely not done; a later attempt may succeed (503)
    FAILED = "failed"        # definitely not done; retrying will not help (declined)


@dataclass(frozen=True)
class BeginResult:
    """One row of op_begin."""
    decision: Decision
    operation_id: str
    status: OpStatus
    attempt: int
    result: Any = None
    error: Any = None
    provider_ref: Optional[str] = None
    retry_after: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    purged: bool = False
    #: who holds the lease (in_progress), when the extension reports it; else None
    lease_owner: Optional[str] = None
    lease_expires_at: Optional[datetime] = None
    #: what to do next (decided by the extension for the decision)
    next_action: NextAction = NextAction.RAISE_ERROR

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "BeginResult":
        if row.get("next_action") is None:
            raise ValueError("op_begin returned no next_action: this client needs opledger 0.5.0 or later "
                             "(ALTER EXTENSION opledger UPDATE)")
        return cls(
            decision=Decision(row["decision"]),
            next_action=NextAction(row["next_action"]),
            operation_id=row["operation_id"],
            status=OpStatus(row["status"]),
            attempt=int(row["attempt"]),
            result=row.get("result"),
            error=row.get("error"),
            provider_ref=row.get("provider_ref"),
            retry_after=row.get("retry_after"),
            finished_at=row.get("finished_at"),
            purged=bool(row.get("purged") or False),
            lease_owner=row.get("lease_owner"),
            lease_expires_at=row.get("lease_expires_at"),
        )


@dataclass(frozen=True)
class OperationRow:
    """A row of opledger.operations (the columns this client uses; ``raw`` has all)."""
    operation_id: str
    tool: str
    args: Any
    status: OpStatus
    attempt: int
    result: Any
    error: Any
    provider_ref: Optional[str]
    raw: Mapping[str, Any] = field(repr=False, default_factory=dict)
    conversation_id: Optional[str] = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "OperationRow":
        return cls(row["operation_id"], row["tool"], row.get("args"), OpStatus(row["status"]),
                   int(row["attempt"]), row.get("result"), row.get("error"), row.get("provider_ref"),
                   dict(row), row.get("conversation_id"))


@dataclass(frozen=True)
class Reconciled:
    """One operation that reconcile_batch resolved: the updated row and the hook's
    outcome (``"applied"``, ``"not_applied"`` or ``"failed"``). The same shape as the
    TypeScript client's ``{ operation, outcome }``."""
    operation: OperationRow
    outcome: str

    @property
    def operation_id(self) -> str:
        return self.operation.operation_id

    @property
    def status(self) -> "OpStatus":
        return self.operation.status


@dataclass(frozen=True)
class Operation:
    """One logical action of an agent. ``operation_id`` is stable across retries:
    derive it from the plan step, never inside the retry loop."""
    operation_id: str
    tool: str
    args: Any
    conversation_id: Optional[str] = None
    worker: Optional[str] = None
    lease: Optional[str] = None  # a PostgreSQL interval, e.g. '30 seconds'; default: the tool's


@dataclass(frozen=True)
class Applied:
    """The provider did it."""
    result: Any = None
    provider_ref: Optional[str] = None


@dataclass(frozen=True)
class NotApplied:
    """The provider has no trace of it: it may run again."""


@dataclass(frozen=True)
class Failed:
    """The provider rejected it: final failure."""
    error: Any = None
    provider_ref: Optional[str] = None


ReconcileOutcome = Union[Applied, NotApplied, Failed]

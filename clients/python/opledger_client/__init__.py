"""opledger_client: orchestrator client for the opledger PostgreSQL extension.

Run each tool call of an agent at most once per operation ID::

    import psycopg
    from opledger_client import Ledger, Operation, Applied, NotApplied, execute_once

    conn = psycopg.connect(autocommit=True)
    op = Operation(operation_id, "payments.refund", {"charge": "ch_1", "amount_cents": 2000})
    result = execute_once(conn, op, lambda op, attempt: provider.refund(..., key=op.operation_id),
                          reconcile=lambda op, begin: Applied(found) if (found := provider.find(op.operation_id))
                                                      else NotApplied())
"""

from .errors import (ArgumentMismatch, InvalidTransition, LeaseTooShort, LedgerNotice, LedgerSqlError, NeedsApproval,
                     NotJsonSerializable, OperationFailed, OpledgerError, OutcomeUnknown, PermissionDenied,
                     ReconciliationRequired, ToolTimeout, UnregisteredTool, WaitTimeout)
from .execute import execute_once, idempotent_tool, reconcile_batch
from .ledger import Ledger
from .types import (Applied, BeginResult, Decision, ErrorClass, Failed, NextAction, NotApplied, Operation, OperationRow,
                    OpStatus, Reconciled, ToolEffect)

__all__ = [
    "Applied", "ArgumentMismatch", "BeginResult", "Decision", "ErrorClass", "Failed", "InvalidTransition",
    "LeaseTooShort", "Ledger", "NextAction", "LedgerNotice", "LedgerSqlError", "PermissionDenied", "ToolTimeout", "NeedsApproval", "NotApplied", "NotJsonSerializable", "Operation", "OperationFailed", "OperationRow",
    "OpStatus", "OpledgerError", "OutcomeUnknown", "Reconciled", "ReconciliationRequired", "ToolEffect", "UnregisteredTool",
    "WaitTimeout", "execute_once", "idempotent_tool", "reconcile_batch",
]
__version__ = "0.1.0"

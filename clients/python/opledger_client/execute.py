"""execute_once: the loop every agent framework needs around a side-effecting tool."""

from __future__ import annotations

import functools
import inspect
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional, TypeVar

import psycopg

from .errors import (InvalidTransition, NeedsApproval, OperationFailed, OutcomeUnknown,
                     ReconciliationRequired, WaitTimeout)
from .ledger import Ledger
from .types import (Applied, BeginResult, Decision, ErrorClass, Failed, NotApplied, Operation,
                    OperationRow, ReconcileOutcome)

T = TypeVar("T")

#: reconcile(op, begin) -> Applied | NotApplied | Failed | None (None: the provider cannot tell yet)
ReconcileHook = Callable[[Operation, BeginResult], Optional[ReconcileOutcome]]


def _error_json(err: BaseException) -> dict[str, str]:
    return {"type": type(err).__name__, "message": str(err)}


def _ledger(db: psycopg.Connection | Ledger) -> Ledger:
    return db if isinstance(db, Ledger) else Ledger(db)


def _resolve(ledger: Ledger, operation_id: str, found: ReconcileOutcome, resolver: Optional[str]) -> OperationRow:
    if isinstance(found, Applied):
        return ledger.resolve(operation_id, "applied", found.result, provider_ref=found.provider_ref,
                              resolver=resolver)
    if isinstance(found, NotApplied):
        return ledger.resolve(operation_id, "not_applied", resolver=resolver)
    if isinstance(found, Failed):
        return ledger.resolve(operation_id, "failed", found.error, provider_ref=found.provider_ref,
                              resolver=resolver)
    raise TypeError(f"a reconcile hook must return Applied, NotApplied, Failed or None, not {found!r}")


def execute_once(db: psycopg.Connection | Ledger, op: Operation, call_tool: Callable[[Operation, int], T], *,
                 reconcile: Optional[ReconcileHook] = None,
                 classify_error: Callable[[BaseException], ErrorClass] = lambda e: ErrorClass.UNKNOWN,
                 provider_ref_of: Callable[[T], Optional[str]] = lambda r: None,
                 max_wait: float = 60.0, min_sleep: float = 0.05, max_sleep: float = 5.0,
                 on_decision: Optional[Callable[[BeginResult], None]] = None,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``call_tool(op, attempt)`` at most once per operation ID, however often
    this is called and by however many workers.

    Asks op_begin, then on
      * execute: calls the tool (pass ``op.operation_id`` to the provider as its
        idempotency key) and reports op_succeed; an exception is classified by
        ``classify_error``: UNKNOWN (default: a timeout says nothing about what the
        provider did) -> op_mark_unknown, RETRYABLE / FAILED -> op_fail;
      * replay: returns the stored result, never calls the tool;
      * in_progress / retry_later: sleeps until retry_after (at most ``max_wait``
        seconds in all), asks again;
      * reconcile: calls ``reconcile(op, begin)``, then op_resolve, asks again;
      * needs_approval / failed: raises NeedsApproval / OperationFailed.

    The connection should be in autocommit mode (or idle): every ledger call commits
    on its own, so other workers see this attempt's lease.
    """
    ledger = _ledger(db)
    waited = 0.0
    undecided = 0
    while True:
        d = ledger.begin(op)
        if on_decision:
            on_decision(d)
        if d.decision is Decision.REPLAY:
            return d.result
        if d.decision is Decision.FAILED:
            raise OperationFailed(d)
        if d.decision is Decision.NEEDS_APPROVAL:
            raise NeedsApproval(d)
        if d.decision in (Decision.IN_PROGRESS, Decision.RETRY_LATER):
            until = (d.retry_after - datetime.now(timezone.utc)).total_seconds() if d.retry_after else min_sleep
            pause = min(max_sleep, max(min_sleep, until))
            if waited + pause > max_wait:
                raise WaitTimeout(d, waited)
            sleep(pause)
            waited += pause
            continue
        if d.decision is Decision.RECONCILE:
            if reconcile is None:
                raise ReconciliationRequired(d)
            found = reconcile(op, d)
            if found is None:
                undecided += 1
                pause = min(max_sleep, min_sleep * 2 ** undecided)
                if waited + pause > max_wait:
                    raise ReconciliationRequired(d)
                sleep(pause)
                waited += pause
                continue
            try:
                _resolve(ledger, op.operation_id, found, op.worker)
            except InvalidTransition:
                pass  # someone else resolved it first; the next op_begin says how
            continue
        # Decision.EXECUTE
        try:
            result = call_tool(op, d.attempt)
        except Exception as err:
            cls = ErrorClass(classify_error(err))
            if cls is ErrorClass.UNKNOWN:
                ledger.mark_unknown(op.operation_id, _error_json(err), attempt=d.attempt)
                if reconcile is not None:
                    continue
                raise OutcomeUnknown(op.operation_id, d.attempt) from err
            ledger.fail(op.operation_id, _error_json(err), cls is ErrorClass.RETRYABLE, attempt=d.attempt)
            continue  # retryable: op_begin answers retry_later / execute; failed: failed
        ledger.succeed(op.operation_id, result, attempt=d.attempt, provider_ref=provider_ref_of(result))
        return result


def reconcile_batch(db: psycopg.Connection | Ledger, worker: str, hook: ReconcileHook, *,
                    max_rows: int = 10, lease: str = "1 minute") -> list[OperationRow]:
    """One pass of a reconciler worker: claims up to ``max_rows`` unknown operations
    (op_claim_reconciliation) and resolves those the hook can decide."""
    ledger = _ledger(db)
    done = []
    for row in ledger.claim_reconciliation(worker, max_rows, lease):
        op = Operation(row.operation_id, row.tool, row.args, worker=worker)
        begin = BeginResult(Decision.RECONCILE, row.operation_id, row.status, row.attempt,
                            provider_ref=row.provider_ref)
        found = hook(op, begin)
        if found is not None:
            done.append(_resolve(ledger, row.operation_id, found, worker))
    return done


def idempotent_tool(db: psycopg.Connection | Ledger, tool: str, *,
                    operation_id: Callable[..., str], worker: Optional[str] = None,
                    **execute_options: Any) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: make a tool function safe to repeat.

    ``operation_id(**kwargs)`` returns the stable ID of the intent (from the
    conversation and plan step, not from the retry). The wrapped function receives
    ``operation_id`` as a keyword argument, to pass to the provider::

        ledger = Ledger(psycopg.connect(autocommit=True))

        @idempotent_tool(ledger, "payments.refund",
                         operation_id=lambda **kw: ledger.derive_operation_id(
                             "support-agent", {"conversation": kw["conversation_id"], "step": kw["step"]}),
                         reconcile=lambda op, begin: lookup_refund(op.operation_id))
        def refund(*, charge: str, amount_cents: int, conversation_id: str, step: int,
                   operation_id: str) -> dict:
            return payments.refunds.create(charge=charge, amount=amount_cents,
                                           idempotency_key=operation_id)

    The call arguments (without ``operation_id``) are the fingerprinted args, so
    keyword-only parameters that are JSON values work best. The wrapper's signature
    leaves ``operation_id`` out, so a LangChain-style ``@tool`` put on top builds
    its schema from the real arguments only.
    """
    ledger = _ledger(db)

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> T:
            op_id = operation_id(**kwargs)
            op = Operation(op_id, tool, kwargs, conversation_id=kwargs.get("conversation_id"), worker=worker)
            return execute_once(ledger, op, lambda o, attempt: fn(operation_id=o.operation_id, **kwargs),
                                **execute_options)
        # Callers (and a framework reading the signature to build the tool schema)
        # never see operation_id: the decorator supplies it.
        sig = inspect.signature(fn)
        wrapper.__signature__ = sig.replace(
            parameters=[p for name, p in sig.parameters.items() if name != "operation_id"])
        wrapper.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "operation_id"}
        del wrapper.__wrapped__
        return wrapper
    return wrap

"""execute_once: the loop every agent framework needs around a side-effecting tool."""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional, TypeVar

from .errors import (InvalidTransition, LeaseTooShort, NeedsApproval, OperationFailed, OutcomeUnknown,
                     PermissionDenied, ReconciliationRequired, ToolTimeout, WaitTimeout)
from .ledger import Ledger, NoticeHandler, dumps
from .types import (Applied, BeginResult, Decision, ErrorClass, Failed, NextAction, NotApplied, Operation,
                    OperationRow, OpStatus, ReconcileOutcome, Reconciled)

T = TypeVar("T")

#: reconcile(op, begin) -> Applied | NotApplied | Failed | None (None: the provider cannot tell yet)
ReconcileHook = Callable[[Operation, BeginResult], Optional[ReconcileOutcome]]

#: Defaults of execute_once (seconds), documented in docs/clients.md.
DEFAULT_MAX_WAIT = 60.0
DEFAULT_MIN_SLEEP = 0.05
DEFAULT_MAX_SLEEP = 5.0
#: With ``timeout``, the attempt's lease must outlast the timeout by this much (seconds):
#: the time to record the unknown outcome (op_mark_unknown) before the lease ends.
LEASE_MARGIN = 1.0


# Characters jsonb cannot hold: NUL, and any surrogate (a Python str holds only unpaired
# ones, e.g. from the surrogateescape error handler).
_UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")


def _storable_text(s: str) -> str:
    """A description the client writes itself, with what jsonb cannot hold as U+FFFD: losing
    one character of an error's message is better than leaving the operation unrecorded."""
    return _UNSTORABLE_CHARS.sub("\ufffd", s)


def _error_json(err: BaseException, stage: Optional[str] = None) -> dict[str, str]:
    """What the ledger stores for an error; ``stage`` (for unknown outcomes) says where
    it happened: "tool", "result" (not JSON) or "report" (op_succeed failed)."""
    out = {"type": _storable_text(type(err).__name__), "message": _storable_text(str(err))}
    if stage:
        out["stage"] = stage
    return out


def _ledger(db: Any, on_notice: Optional[NoticeHandler] = None) -> Ledger:
    if isinstance(db, Ledger):
        return Ledger(db.conn, on_notice=on_notice) if on_notice else db
    return Ledger(db, on_notice=on_notice)


def _failed_from(row: OperationRow) -> BeginResult:
    """The decision ``failed`` for a row op_resolve has just finally failed."""
    return BeginResult(Decision.FAILED, row.operation_id, row.status, row.attempt, result=row.result,
                       error=row.error, provider_ref=row.provider_ref, next_action=NextAction.RAISE_ERROR)


def _call_with_timeout(call_tool: Callable[[Operation, int], T], op: Operation, attempt: int,
                       timeout: Optional[float]) -> T:
    """Calls the tool; with a timeout, in a worker thread (daemon, with the caller's
    context variables) that it waits for at most ``timeout`` seconds, then raises
    ToolTimeout. Python cannot stop a thread: the tool may still run, and what it
    returns later is dropped."""
    if timeout is None:
        return call_tool(op, attempt)
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call_tool(op, attempt)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = err
        finally:
            done.set()
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name=f"opledger-tool-{op.operation_id}", daemon=True).start()
    if not done.wait(timeout):
        raise ToolTimeout(timeout)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _outcome_name(found: ReconcileOutcome) -> str:
    if isinstance(found, Applied):
        return "applied"
    if isinstance(found, NotApplied):
        return "not_applied"
    if isinstance(found, Failed):
        return "failed"
    raise TypeError(f"a reconcile hook must return Applied, NotApplied, Failed or None, not {found!r}")


def _resolve(ledger: Ledger, operation_id: str, found: ReconcileOutcome, resolver: Optional[str]) -> OperationRow:
    outcome = _outcome_name(found)
    if isinstance(found, NotApplied):
        return ledger.resolve(operation_id, outcome, resolver=resolver)
    payload = found.result if isinstance(found, Applied) else found.error
    return ledger.resolve(operation_id, outcome, payload, provider_ref=found.provider_ref, resolver=resolver)


def _report_unknown(ledger: Ledger, op: Operation, attempt: int, err: BaseException, stage: str) -> bool:
    """op_mark_unknown after a failure past the tool call; False when even that failed
    (the connection is gone): the lease then expires into unknown on its own."""
    try:
        ledger.mark_unknown(op.operation_id, _error_json(err, stage), attempt=attempt)
        return True
    except Exception:  # noqa: BLE001 - the original error is what the caller needs to see
        return False


def execute_once(db: Any, op: Operation, call_tool: Callable[[Operation, int], T], *,
                 reconcile: Optional[ReconcileHook] = None,
                 classify_error: Callable[[BaseException], ErrorClass] = lambda e: ErrorClass.UNKNOWN,
                 provider_ref_of: Callable[[T], Optional[str]] = lambda r: None,
                 max_wait: float = DEFAULT_MAX_WAIT, min_sleep: float = DEFAULT_MIN_SLEEP,
                 max_sleep: float = DEFAULT_MAX_SLEEP,
                 on_decision: Optional[Callable[[BeginResult], None]] = None,
                 sleep: Callable[[float], None] = time.sleep,
                 reconciler: Any = None, timeout: Optional[float] = None,
                 on_notice: Optional[NoticeHandler] = None) -> T:
    """Run ``call_tool(op, attempt)`` at most once per operation ID, however often
    this is called and by however many workers.

    ``db`` is a psycopg connection (autocommit), a pool, or a Ledger. Asks op_begin,
    then on
      * execute: calls the tool (pass ``op.operation_id`` to the provider as its
        idempotency key) and reports op_succeed; an exception is classified by
        ``classify_error``: UNKNOWN (default: a timeout says nothing about what the
        provider did) -> op_mark_unknown, RETRYABLE / FAILED -> op_fail. Any failure
        after the tool returned (a result that is not JSON, op_succeed failing, a
        lost connection) -> op_mark_unknown and OutcomeUnknown, never a bare error;
      * replay: returns the stored result, never calls the tool;
      * in_progress / retry_later: sleeps until retry_after, at most ``max_wait``
        seconds in all, then raises WaitTimeout (with retry_after and the lease owner);
      * reconcile: calls ``reconcile(op, begin)``, then op_resolve on ``reconciler``
        (a connection as a role in opledger_reconciler; default ``db``): Applied
        returns the result op_resolve recorded, Failed raises OperationFailed,
        NotApplied asks again;
      * needs_approval / failed: raises NeedsApproval / OperationFailed.

    ``timeout`` (seconds; default none) bounds the tool call: past it the outcome is
    unknown (the provider may still do it), op_mark_unknown records it, and the call
    ends like any unknown outcome (OutcomeUnknown with stage "timeout", or the
    reconcile hook asks the provider). The tool then runs in a worker thread, which
    Python cannot stop: what it returns after the timeout is dropped. The attempt's
    lease must end at least LEASE_MARGIN seconds after the timeout would, or
    execute_once raises LeaseTooShort before calling the tool.

    ``on_notice`` receives the database's NOTICEs (e.g. "the tool of this call is not
    registered"); default: ``warnings.warn`` with category LedgerNotice.

    Every ledger call commits on its own, so other workers see this attempt's lease.
    """
    ledger = _ledger(db, on_notice)
    resolver_ledger = _ledger(reconciler, on_notice) if reconciler is not None else ledger
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    waited = 0.0
    undecided = 0

    def pause_for(wanted: float, d: BeginResult, on_timeout: Callable[[], Exception]) -> None:
        nonlocal waited
        left = max_wait - waited
        if left <= 1e-9:
            raise on_timeout()
        pause = min(max_sleep, max(min_sleep, wanted), left)
        sleep(pause)
        waited += pause

    def wait_timeout(d: BeginResult) -> Exception:
        owner = d.lease_owner
        if owner is None and d.decision is Decision.IN_PROGRESS:
            owner = ledger.lease_owner(d.operation_id)
        return WaitTimeout(d, waited, max_wait=max_wait, lease_owner=owner)

    while True:
        d = ledger.begin(op)
        if on_decision:
            on_decision(d)
        # The step is the extension's (next_action), the same every opledger client takes.
        action = d.next_action
        if action is NextAction.RETURN_RESULT:
            return d.result
        if action is NextAction.RAISE_ERROR:
            raise OperationFailed(d)
        if action is NextAction.GET_APPROVAL:
            raise NeedsApproval(d)
        if action is NextAction.WAIT:
            until = (d.retry_after - datetime.now(timezone.utc)).total_seconds() if d.retry_after else min_sleep
            pause_for(until, d, lambda: wait_timeout(d))
            continue
        if action is NextAction.RECONCILE:
            if reconcile is None:
                raise ReconciliationRequired(d)
            found = reconcile(op, d)
            if found is None:
                undecided += 1
                pause_for(min_sleep * 2 ** undecided, d,
                          lambda: ReconciliationRequired(d, f"the reconcile hook could not tell within "
                                                            f"max_wait={max_wait:g} s"))
                continue
            try:
                resolved = _resolve(resolver_ledger, op.operation_id, found, op.worker)
            except InvalidTransition:
                continue  # someone else resolved it first; the next op_begin says how
            except PermissionDenied as err:
                raise ReconciliationRequired(
                    d, "this connection's role may not call op_resolve: pass reconciler= (a connection "
                       "as a role in opledger_reconciler)") from err
            # The row op_resolve returned answers the call: asking op_begin again would
            # count this call's own second look as a duplicate the ledger prevented.
            # Only NotApplied (retryable: the tool may run again after its backoff) asks again.
            if resolved.status is OpStatus.SUCCEEDED:
                return resolved.result
            if resolved.status is OpStatus.FAILED:
                raise OperationFailed(_failed_from(resolved))
            continue
        if action is not NextAction.CALL_TOOL:
            raise ValueError(f"unhandled next_action {action.value}")
        if timeout is not None and d.lease_expires_at is not None:
            # The lease must outlast the tool call: else it ends while the tool may
            # still run, and another worker takes the operation over. Nothing ran yet.
            lease_left = (d.lease_expires_at - datetime.now(timezone.utc)).total_seconds()
            if lease_left < timeout + LEASE_MARGIN:
                refusal = LeaseTooShort(op.operation_id, timeout, lease_left, LEASE_MARGIN)
                ledger.fail(op.operation_id, _error_json(refusal), True, attempt=d.attempt)
                raise refusal
        # From here on the provider may act, so no outcome may be lost.
        try:
            result = _call_with_timeout(call_tool, op, d.attempt, timeout)
        except Exception as err:
            timed_out = isinstance(err, ToolTimeout)
            try:
                cls = ErrorClass.UNKNOWN if timed_out else ErrorClass(classify_error(err))
            except Exception:  # noqa: BLE001 - a broken classifier must not lose the outcome
                cls = ErrorClass.UNKNOWN
            if cls is ErrorClass.UNKNOWN:
                stage = "timeout" if timed_out else "tool"
                recorded = _report_unknown(ledger, op, d.attempt, err, stage)
                if reconcile is not None and recorded:
                    continue
                raise OutcomeUnknown(op.operation_id, d.attempt, stage=stage, recorded=recorded,
                                     lease_expires_at=d.lease_expires_at) from err
            ledger.fail(op.operation_id, _error_json(err), cls is ErrorClass.RETRYABLE, attempt=d.attempt)
            continue  # retryable: op_begin answers retry_later / execute; failed: failed
        except BaseException as err:  # KeyboardInterrupt, SystemExit, cancellation
            _report_unknown(ledger, op, d.attempt, err, "tool")
            raise
        stage = "result"
        try:
            ref = provider_ref_of(result)
            dumps(result, "the result")
            stage = "report"
            ledger.succeed(op.operation_id, result, attempt=d.attempt, provider_ref=ref)
        except Exception as err:
            recorded = _report_unknown(ledger, op, d.attempt, err, stage)
            raise OutcomeUnknown(op.operation_id, d.attempt, stage=stage, recorded=recorded,
                                 lease_expires_at=d.lease_expires_at) from err
        return result


def reconcile_batch(db: Any, worker: str, hook: ReconcileHook, *,
                    max_rows: int = 10, lease: str = "1 minute") -> list[Reconciled]:
    """One pass of a reconciler worker: claims up to ``max_rows`` unknown operations
    (op_claim_reconciliation) and resolves those the hook can decide.

    ``db`` is the reconciler's own connection (or pool, or Ledger), as a role in
    opledger_reconciler: not the agent's. Returns one ``Reconciled(operation,
    outcome)`` per resolved operation; those the hook returned None for stay
    unknown and are offered again when the claim expires. An operation that
    changed meanwhile (a late op_succeed) is skipped."""
    ledger = _ledger(db)
    done = []
    for row in ledger.claim_reconciliation(worker, max_rows, lease):
        op = Operation(row.operation_id, row.tool, row.args, conversation_id=row.conversation_id, worker=worker)
        begin = BeginResult(Decision.RECONCILE, row.operation_id, row.status, row.attempt,
                            error=row.error, provider_ref=row.provider_ref, next_action=NextAction.RECONCILE)
        found = hook(op, begin)
        if found is None:
            continue
        try:
            done.append(Reconciled(_resolve(ledger, row.operation_id, found, worker), _outcome_name(found)))
        except InvalidTransition:
            continue
    return done


def idempotent_tool(db: Any, tool: str, *,
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
    keyword-only parameters that are JSON values work best. Other keyword
    arguments (``reconcile=``, ``reconciler=``, ``max_wait=``, ...) go to
    execute_once. The wrapper's signature leaves ``operation_id`` out, so a
    LangChain-style ``@tool`` put on top builds its schema from the real arguments only.
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

"""Running one step of one workflow: the ``workflow.advance`` task and its body.

Claim the lease (compare-and-swap on ``dispatch`` and the lease), run the current stage (HTTP
to MAAS, no transaction, no row lock), record its result (one short transaction that re-checks
the lease) and hand off the next step after commit. docs/architecture.md ("How a request
becomes MAAS calls") walks through it.
"""

from __future__ import annotations

import enum
import functools
import logging
import random
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from celery import shared_task
from django.conf import settings
from django.db import router, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from maas_client.errors import MaasError, MaasTransient
from maas_domain import compiled, context, events
from maas_domain.observability import metrics
from maas_domain.secrets import SecretsError
from maas_domain.secrets.sites import CredentialNotConfirmed
from maas_domain.work import WorkflowState
from workflows import family, rowsql
from workflows.dispatch import ADVANCE, admit_after_commit, enqueue
from workflows.kinds import KINDS, M, Stage, StageContext, WorkflowKind, lease_seconds
from workflows.models import RUNNABLE_STATES, Workflow
from workflows.results import (
    Done,
    Fail,
    Hold,
    LeaseLost,
    LookedThroughHint,
    Result,
    Retry,
    RowChanged,
    StageFailed,
    Wait,
)

log = logging.getLogger("workflow")
W = WorkflowState


@shared_task(name=ADVANCE)
def advance(kind: str, workflow_id: int, dispatch: int, hint: dict[str, Any] | None = None) -> str:
    return run(kind, workflow_id, dispatch, hint)


def run(kind_name: str, pk: int, dispatch: int, hint: dict[str, Any] | None = None) -> str:
    """Body of ``workflow.advance``: claim the workflow, then run its stages one after another
    while each finishes at once (``Done``), recording each in its own short transaction, until
    one waits, retries, fails or the execution's time budget is spent. Returns what the last
    stage did ("done", "wait", ...), or "skipped" / "lease-lost". ``hint``: the machine as
    the site poll that woke the workflow saw it (workflows/hints.py); the woken stage's first
    machine read may take it instead of reading MAAS."""
    kind = KINDS[kind_name]
    claimed = claim(kind, pk, dispatch)
    if claimed is None:
        return "skipped"
    wf, owner = claimed
    ctx = StageContext(kind, wf, owner, hint)
    budget = time.monotonic() + settings.WORKFLOW_CHAIN_SECONDS
    reruns = 0
    try:
        with context.bound(wf.correlation_id, **kind.log_fields(wf)):
            while True:
                result = execute(ctx)
                outcome = (
                    Recorded.RERUN
                    if result is RERUN
                    else Recorded.LOST
                    if result is None
                    else record(ctx, result, chain=time.monotonic() < budget)
                )
                if outcome is Recorded.LOST:
                    return "lease-lost"
                if outcome is Recorded.DONE:
                    return type(result).__name__.lower()
                if outcome is Recorded.RERUN:
                    reruns += 1
                    if reruns > MAX_RERUNS:
                        return _hand_off(ctx)
                # NEXT: the next stage, or RERUN: the row's stage once more
                ctx.next_stage(rerun=outcome is Recorded.RERUN)
    finally:
        ctx.close()


def claim(kind: WorkflowKind[M], pk: int, dispatch: int) -> tuple[M, str] | None:
    """Take the lease of a runnable workflow for this dispatch, or None (stale or held).

    A free lease is taken in one statement. A lease still held when it expired means the
    execution holding it died (or stalled past it): the takeover counts it in ``lost_leases``
    and says so on the timeline, naming the stage and the MAAS calls sent so far
    (``stage.lost``), so an operator reading it knows what MAAS may have done unanswered."""
    owner = uuid.uuid4().hex
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds())
    alias = router.db_for_write(kind.model)
    with transaction.atomic(using=alias):
        lost = False
        # a free lease (no owner, no lease time or an expired one) taken and the row loaded
        # in one hand-written statement; the ORM takes an expired lease still held (rare:
        # its execution died), and the row is loaded after it
        wf = _take_free(kind, pk, dispatch, owner, now, expires, alias)
        if wf is None:
            runnable = kind.model._default_manager.filter(
                pk=pk, dispatch=dispatch, state__in=RUNNABLE_STATES
            )
            taking = {
                "updated_at": now,
                "lease_owner": owner,
                "lease_expires_at": expires,
                "stage_started_at": Coalesce(F("stage_started_at"), Value(now)),
            }
            lost = bool(
                runnable.exclude(lease_owner="")
                .filter(lease_expires_at__lte=now)
                .update(**taking, lost_leases=F("lost_leases") + 1)
            )
            if not lost:
                return None
            wf = kind.load(pk)
        if lost:
            kind.add_event(wf, "stage.lost", lost_message(wf), stage=wf.stage, sent=sent_calls(wf))
        if wf.stage_started_at == now:  # this claim started the stage
            kind.add_event(wf, "stage.started", f"{wf.stage} started", stage=wf.stage)
    return wf, owner


def _take_free(
    kind: WorkflowKind[M], pk: int, dispatch: int, owner: str, now: Any, expires: Any, alias: str
) -> M | None:
    """The row, if this claim took its free lease (one statement where it can be)."""
    sql, params = rowsql.take_free_lease_sql(
        kind.model,
        pk,
        dispatch=dispatch,
        states=RUNNABLE_STATES,
        owner=owner,
        now=now,
        expires=expires,
        alias=alias,
    )
    try:
        return compiled.get_changed(kind.model, pk, kind.select_related, sql, params)
    except compiled.Uncompiled:
        return kind.load(pk) if rowsql.execute(sql, params, alias) == 1 else None


def sent_calls(wf: Workflow) -> dict[str, int]:
    """The MAAS mutations this stage's executions announced before sending (the intent log
    ``StageContext.heartbeat`` keeps): sent, maybe applied, maybe never answered."""
    return dict((wf.stage_data or {}).get("sent", {}))


def lost_message(wf: Workflow) -> str:
    sent = sent_calls(wf)
    calls = ", ".join(
        f"{op} {'once' if n == 1 else f'{n} times'}" for op, n in sorted(sent.items())
    )
    return (
        f"an execution of {wf.stage} ended without recording its result (its worker died or "
        f"stalled past its lease); MAAS calls sent in this stage: {calls or 'none'}; the stage "
        f"runs again and reads MAAS before sending any of them again"
    )


RERUN: Any = object()  # ``execute``'s answer when the row changed under the stage
MAX_RERUNS = 5


def _hand_off(ctx: StageContext[Any]) -> str:
    """The row keeps changing under this execution: give the step back to Celery."""
    kind, wf = ctx.kind, ctx.wf
    with transaction.atomic():
        if kind.model._default_manager.filter(pk=wf.pk, lease_owner=ctx.owner).update(
            lease_owner="", lease_expires_at=None, dispatch=F("dispatch") + 1
        ):
            enqueue(kind.name, wf.pk, ctx.dispatch + 1, region=wf.site.region)
    return "handed-off"


def execute(ctx: StageContext[M]) -> Result | None:
    """Run the stage the workflow is at (or its kind's cancel stage); None: the lease was lost
    and another execution continues; ``RERUN``: the row changed under the stage."""
    kind, wf = ctx.kind, ctx.wf
    if wf.lost_leases > settings.WORKFLOW_MAX_LOST_LEASES:
        return Fail(
            "worker_lost",
            f"worker_lost: {wf.lost_leases} executions of stage {wf.stage} died without finishing",
        )
    timeout = kind.timeout(wf.stage, ctx.policy)
    if (
        timeout
        and wf.stage_started_at
        and timezone.now() - wf.stage_started_at > timedelta(seconds=timeout)
    ):
        return Fail("timeout", f"stage {wf.stage} exceeded its timeout of {timeout}s")
    if wf.state == W.CANCELLING:
        if kind.cancel is None:
            return Done("cancelled")
        stage = kind.cancel
    else:
        stage = kind.stage(wf.stage)
    try:
        return stage.run(ctx)
    except StageFailed as exc:
        return exc.result
    except LeaseLost:
        log.warning("lease lost during %s; another execution continues", wf.stage)
        return None
    except LookedThroughHint as exc:
        # the run sent nothing (its first mutation stopped it): none of its timeline entries
        # describe what happened, and the rerun that reads MAAS writes its own
        ctx.events.clear()
        log.info("%s: running it again", exc)
        return cast(Result, RERUN)
    except RowChanged:
        log.info("%s %s changed while %s ran: running it again", kind.name, wf.pk, wf.stage)
        return cast(Result, RERUN)
    except MaasTransient as exc:
        return Retry("maas_transient", exc.message, after=_backoff(stage, wf, exc.retry_after))
    except MaasError as exc:
        return Fail(f"maas_{exc.kind}", f"MAAS refused {exc.operation}: {exc.message}")
    except CredentialNotConfirmed as exc:
        # not an outage: only an operator confirming the new MAAS URL clears it
        # (docs/security.md, T2), so waiting out the retries would only delay the failure
        return Fail("credentials_unconfirmed", str(exc))
    except SecretsError as exc:
        return Retry("secrets_unavailable", str(exc), after=_backoff(stage, wf, None))


def _backoff(stage: Stage[Any], wf: Workflow, retry_after: float | None) -> float:
    """The wait before the stage runs again: MAAS's Retry-After, else a jittered doubling
    capped by the stage's retry policy (``RetryPolicy``)."""
    if retry_after is not None:
        return min(retry_after, float(settings.MAX_TASK_COUNTDOWN))
    most = stage.retry.max_backoff if stage.retry else 60.0
    ceiling = min(most, 2.0 * (2**wf.stage_tries))
    return random.uniform(ceiling / 2, ceiling)  # noqa: S311 (jitter)


def max_retries(kind: WorkflowKind[Any], stage_name: str) -> int:
    """How many retries of a stage are allowed before it fails (its retry policy, else the
    deployment's ``MAASCP_WORKFLOW_MAX_STAGE_TRIES``)."""
    found = kind.find(stage_name)
    policy = found.retry if found is not None else None
    if policy is not None and policy.max_retries is not None:
        return policy.max_retries
    return int(settings.WORKFLOW_MAX_STAGE_TRIES)


# -- recording a result ----------------------------------------------------------------------------


class Recorded(enum.Enum):
    """What ``record`` did: stored the result and the execution stops (DONE), stored a ``Done``
    and the next stage runs in this execution with the lease kept (NEXT), stored nothing
    because the row changed under the stage (RERUN: run the stage again on the fresh row), or
    stored nothing because another execution or an operator owns the workflow now (LOST)."""

    DONE = "done"
    NEXT = "next"
    RERUN = "rerun"
    LOST = "lost"


# Workflow fields the engine writes when it records a result (plus a result's ``updates``).
ENGINE_FIELDS = (
    "state",
    "stage",
    "checkpoint",
    "reason",
    "failure_class",
    "dispatch",
    "lease_owner",
    "lease_expires_at",
    "stage_started_at",
    "stage_tries",
    "stage_data",
    "wait_system_id",
    "wait_status",
    "next_check_at",
    "finished_at",
    "updated_at",
)


def record(ctx: StageContext[M], result: Result, *, chain: bool = False) -> Recorded:
    """Store a stage result in one short transaction (``ctx.write``: compare-and-swap on the
    lease, the state and ``updated_at``; nothing written meanwhile by someone else is
    overwritten), with its timeline entries, the outbox event and the kind's hook. With
    ``chain``, a ``Done`` keeps the lease and the next stage runs in this execution."""
    wf = ctx.wf
    now = timezone.now()
    try:
        with transaction.atomic():
            timeline, hook, fields = _apply(ctx, result, now, chain=chain)
            ctx.write(fields, timeline, savepoint=False)
            if hook is not None:
                # the workflow ended (or a stage froze it): its kind's hook, in this
                # transaction, then a slot on its site is free for the next one
                hook(wf)
                family.wake_parent(wf)
                admit_after_commit(wf.site_id)
    except RowChanged:
        return Recorded.RERUN
    except LeaseLost:
        log.warning("lease lost (or an operator acted) before recording %s", wf.stage)
        return Recorded.LOST
    if isinstance(result, Done) and wf.state == W.RUNNING and wf.lease_owner == ctx.owner:
        return Recorded.NEXT
    return Recorded.DONE


def _apply(
    ctx: StageContext[M], result: Result, now: datetime, *, chain: bool
) -> tuple[list[Any], Callable[[M], None] | None, set[str]]:
    """Apply a result to the in-memory row: the timeline entries to write, the kind's hook to
    run, and the fields to store."""
    kind, wf = ctx.kind, ctx.wf
    stage = wf.stage
    timeline = [kind.event(wf, k, text, stage=stage, **data) for k, text, data in ctx.events]
    fields = set(ENGINE_FIELDS) | set(getattr(result, "updates", {}))
    wf.lease_owner, wf.lease_expires_at, wf.updated_at = "", None, now
    if isinstance(result, Retry) and wf.stage_tries + 1 > max_retries(kind, stage):
        result = Fail(
            result.classification, f"gave up after {wf.stage_tries + 1} tries: {result.message}"
        )
    # counted once the result is stored: a compare-and-swap that loses (a rerun, a lost lease)
    # must not count the stage twice
    transaction.on_commit(
        functools.partial(
            metrics.stage_recorded,
            kind.name,
            wf.stage,
            wf.stage_started_at,
            result,
            now,
            list(ctx.events),
            cancelling=wf.state == W.CANCELLING,
        ),
        robust=True,
    )
    hook: Callable[[M], None] | None = None
    if wf.state == W.CANCELLING:
        timeline += _cancel_finished(kind, wf, result, now)
        hook = kind.on_cancelled if wf.state == W.CANCELLED else None
    elif isinstance(result, Done):
        timeline += _done(ctx, result, now, chain=chain)
        hook = kind.on_success if wf.state == W.SUCCEEDED else None
    elif isinstance(result, Wait):
        timeline += _wait(ctx, wf, result, now)
    elif isinstance(result, Hold):
        timeline += _hold(kind, wf, result)
        hook = kind.on_hold
    elif isinstance(result, Retry):
        timeline += _retry(kind, wf, ctx, result)
    else:
        timeline += finish_failed(kind, wf, result, now)
        hook = kind.on_failure
    return timeline, hook, fields


def _clear_wait(wf: Workflow) -> None:
    wf.wait_system_id, wf.wait_status, wf.next_check_at = "", None, None


def _done(ctx: StageContext[M], result: Done, now: datetime, *, chain: bool) -> list[Any]:
    kind, wf = ctx.kind, ctx.wf
    for key, value in result.updates.items():
        setattr(wf, key, value)
    timeline = [kind.event(wf, "stage.completed", result.message or f"{wf.stage} done")]
    wf.checkpoint = wf.stage
    nxt = kind.next_stage(wf.stage, wf)
    wf.stage_started_at, wf.stage_tries, wf.stage_data = None, 0, {}
    _clear_wait(wf)
    if nxt is None:
        wf.succeed()
        wf.finished_at = now
        events.emit(kind.name, "completed", wf)
        return [*timeline, kind.event(wf, "workflow.succeeded", "all stages completed")]
    wf.stage = nxt
    if chain:  # the next stage starts now, in this execution, under the same lease
        wf.lease_owner = ctx.owner
        wf.lease_expires_at = now + timedelta(seconds=lease_seconds())
        wf.stage_started_at = now
        return [*timeline, kind.event(wf, "stage.started", f"{nxt} started", stage=nxt)]
    wf.dispatch += 1
    enqueue(kind.name, wf.pk, wf.dispatch, region=wf.site.region)
    return timeline


def _retry(kind: WorkflowKind[M], wf: M, ctx: StageContext[M], result: Retry) -> list[Any]:
    wf.stage_tries += 1
    wf.stage_data = ctx.data
    wf.dispatch += 1
    enqueue(kind.name, wf.pk, wf.dispatch, region=wf.site.region, countdown=result.after)
    return [
        kind.event(
            wf,
            "retry.decision",
            result.message,
            classification=result.classification,
            after_seconds=round(result.after, 1),
            try_number=wf.stage_tries,
        )
    ]


def _cancel_finished(kind: WorkflowKind[M], wf: M, result: Result, now: datetime) -> list[Any]:
    """The cancel stage ran: cancelled when it compensated, manual intervention otherwise."""
    if isinstance(result, Done):
        wf.end_cancelled()
        wf.finished_at = now
        return [kind.event(wf, "workflow.cancelled", result.message or "cancelled")]
    if isinstance(result, Retry | Wait):
        wf.dispatch += 1
        enqueue(
            kind.name,
            wf.pk,
            wf.dispatch,
            region=wf.site.region,
            countdown=getattr(result, "after", 5.0),
        )
        return []
    return freeze(kind, wf, f"cancel could not compensate: {result.message}")


def freeze(kind: WorkflowKind[M], wf: M, reason: str) -> list[Any]:
    """Manual intervention: nothing automatic touches the workflow until an operator acts.
    Returns the timeline rows to write; the outbox event is written here."""
    wf.freeze()
    wf.reason = reason[:500]
    _clear_wait(wf)
    events.emit(kind.name, "manual_intervention_required", wf, reason=wf.reason)
    return [kind.event(wf, "workflow.manual_intervention", wf.reason)]


def _hold(kind: WorkflowKind[M], wf: M, result: Hold) -> list[Any]:
    for key, value in result.updates.items():
        setattr(wf, key, value)
    wf.failure_class = result.failure_class
    wf.stage_data = {}
    return freeze(kind, wf, result.message)


def _wait(ctx: StageContext[M], wf: M, result: Wait, now: datetime) -> list[Any]:
    kind = ctx.kind
    for key, value in result.updates.items():
        setattr(wf, key, value)
    timeline = []
    if ctx.data.get("_waiting") != result.message:
        ctx.data["_waiting"] = result.message
        timeline.append(
            kind.event(
                wf,
                "stage.waiting",
                result.message,
                system_id=result.system_id,
                maas_status=result.status,
            )
        )
    wf.stage_data = ctx.data
    wf.wait()
    wf.wait_system_id = result.system_id
    wf.wait_status = result.status
    check = now + timedelta(seconds=result.check_in)
    timeout = kind.timeout(wf.stage, ctx.policy)
    if timeout and wf.stage_started_at:
        check = min(check, wf.stage_started_at + timedelta(seconds=timeout + 1))
    wf.next_check_at = check
    return timeline


def finish_failed(kind: WorkflowKind[M], wf: M, result: Fail, now: datetime) -> list[Any]:
    for key, value in result.updates.items():
        setattr(wf, key, value)
    wf.fail()
    wf.failure_class = result.failure_class
    wf.reason = result.message[:500]
    wf.finished_at = now
    wf.next_check_at = None
    events.emit(kind.name, "failed", wf, failure_class=wf.failure_class, reason=wf.reason)
    return [
        kind.event(
            wf,
            "stage.failed",
            result.message,
            failure_class=result.failure_class,
            **result.data,
        )
    ]

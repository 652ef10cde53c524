"""The workflow engine shared by onboarding and decommission.

One Celery task, ``workflow.advance(kind, id, dispatch)``, runs the current stage of one
workflow: claim the lease (compare-and-swap), run the stage (HTTP to MAAS, no transaction, no
row lock), record its result (one short transaction that re-checks the lease), hand off the next
step after commit. Waiting never blocks a worker: a waiting workflow is woken by the site poller
(one MAAS listing per site for all its waiting machines) when its machine's status changes, by
an external signal (enrollment), or by the sweep when its check-in time comes. The sweep also
re-dispatches running workflows whose lease expired (dead worker) or whose message was lost, and
fails a workflow whose executions keep dying (``worker_lost``) instead of looping forever.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, PositiveSmallIntegerField, Q, Value, When
from django.utils import timezone

from maas_domain import context, events
from maas_domain.locks import try_lock
from maas_domain.maas.client import MaasClient
from maas_domain.maas.errors import MaasError, MaasTransient
from maas_domain.observability import metrics
from maas_domain.policy import Policy
from maas_domain.secrets import SecretsError
from maas_domain.workflow.models import WorkflowState
from maas_domain.workflow.results import (
    Done,
    Fail,
    Hold,
    LeaseLost,
    Result,
    Retry,
    StageFailed,
    Wait,
)

log = logging.getLogger("workflow")
W = WorkflowState
ACTIVE = (W.RUNNING, W.WAITING, W.CANCELLING)
RUNNABLE = (W.RUNNING, W.CANCELLING)  # states an execution may claim


@dataclass
class Stage:
    name: str
    run: Callable[[StageContext], Result]
    maas_calls: list[str] = field(default_factory=list)  # for dry-run plans and docs
    # Whether this stage is part of a given workflow (e.g. a decommission mode); default: always.
    applies: Callable[[Any], bool] | None = None

    def applies_to(self, wf: Any) -> bool:
        return self.applies is None or self.applies(wf)


@dataclass
class WorkflowKind:
    """How one kind of workflow plugs into the engine."""

    name: str
    model: Any  # a concrete Workflow subclass
    stages: list[Stage]
    add_event: Callable[..., Any]
    policy: Callable[[Any], Policy]
    on_success: Callable[[Any], None] = lambda wf: None
    on_failure: Callable[[Any], None] = lambda wf: None
    # Run by restart-clean before the first stage, and by cancel instead of the current stage.
    reset: Stage | None = None
    cancel: Stage | None = None
    on_cancelled: Callable[[Any], None] = lambda wf: None
    # Run when a stage ends the workflow in manual_intervention (``Hold``), same transaction.
    on_hold: Callable[[Any], None] = lambda wf: None
    # Workflows that belong to this one (parent, children): not a conflict on the same node.
    family: Callable[[Any], set[tuple[str, int]]] = lambda wf: set()
    select_related: tuple[str, ...] = ()
    stage_index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.stage_index = {s.name: i for i, s in enumerate(self.stages)}

    def log_fields(self, wf: Any) -> dict[str, Any]:
        """What every log line of this workflow's steps carries (docs: logging)."""
        return {
            "site_id": wf.site_id,
            f"{self.name}_id": wf.pk,
            "node_id": getattr(wf, "node_id", None),
            "maas_system_id": getattr(wf, "maas_system_id", "") or None,
            "hostname": wf.hostname,
        }

    def load(self, pk: int) -> Any:
        return self.model.objects.select_related(*self.select_related).get(pk=pk)

    def stage(self, name: str) -> Stage:
        if self.reset is not None and name == self.reset.name:
            return self.reset
        return self.stages[self.stage_index[name]]

    def stages_for(self, wf: Any) -> list[Stage]:
        """The stages this workflow runs, in order (a stage may not apply to it)."""
        return [s for s in self.stages if s.applies_to(wf)]

    def next_stage(self, name: str, wf: Any) -> str | None:
        if self.reset is not None and name == self.reset.name:
            return self.stages_for(wf)[0].name
        for stage in self.stages[self.stage_index[name] + 1 :]:
            if stage.applies_to(wf):
                return stage.name
        return None


KINDS: dict[str, WorkflowKind] = {}


def event_writer(event_model: Any, parent_field: str) -> Callable[..., None]:
    """The ``add_event`` of a kind: one timeline row on ``event_model`` (attempt and stage from
    the workflow unless given)."""

    def add_event(
        wf: Any, kind: str, message: str, *, stage: str = "", actor: str = "", **data: Any
    ) -> None:
        event_model.objects.create(
            **{parent_field: wf},
            kind=kind,
            stage=stage or wf.stage,
            attempt=wf.attempt,
            message=message[:1000],
            data=data,
            actor_name=actor,
        )

    return add_event


def register(kind: WorkflowKind) -> None:
    KINDS[kind.name] = kind


# -- hand-offs -------------------------------------------------------------------------------------


def enqueue(kind: str, pk: int, dispatch: int, countdown: float = 0) -> None:
    """Send ``advance`` after the surrounding transaction commits. If the broker is down the
    error is logged and the sweep re-dispatches later: nothing is lost."""
    from maas_domain.workflow.tasks import advance

    def send() -> None:
        advance.apply_async((kind, pk, dispatch), countdown=max(countdown, 0))

    transaction.on_commit(send, robust=True)


def lease_seconds() -> float:
    return float(settings.WORKFLOW_LEASE_SECONDS)


# -- the stage context -----------------------------------------------------------------------------


class StageContext:
    """What a stage gets: the workflow row, its policy, a lease-guarded MAAS client, a way to
    add timeline events and a scratch dict persisted with the lease (``intent``)."""

    def __init__(self, kind: WorkflowKind, wf: Any, owner: str) -> None:
        self.kind = kind
        self.wf = wf
        self.owner = owner
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.data: dict[str, Any] = dict(wf.stage_data or {})

    @cached_property
    def policy(self) -> Policy:
        return self.kind.policy(self.wf)

    @cached_property
    def maas(self) -> MaasClient:
        from maas_domain.maas.factory import client_for_site

        return client_for_site(self.wf.site, before_mutation=self.heartbeat)

    def event(self, kind: str, message: str, **data: Any) -> None:
        self.events.append((kind, message, data))

    def observe(self, machine: Any) -> None:
        """A ``maas.observed`` timeline entry each time the stage sees a new MAAS status."""
        if self.data.get("_seen") != machine.status_name:
            self.data["_seen"] = machine.status_name
            self.event(
                "maas.observed",
                f"MAAS: {machine.status_name}"
                + (f" ({machine.status_message})" if machine.status_message else ""),
                system_id=machine.system_id,
                status=int(machine.status),
                status_message=machine.status_message,
            )

    def heartbeat(self, operation: str = "") -> None:
        """Renew the lease (and persist the scratch dict) before a MAAS mutation; if another
        execution took the workflow over, stop before touching MAAS."""
        if operation:
            sent = self.data.setdefault("sent", {})
            sent[operation] = sent.get(operation, 0) + 1
        updated = self.kind.model.objects.filter(
            pk=self.wf.pk, lease_owner=self.owner, state=self.wf.state
        ).update(
            lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()),
            stage_data=self.data,
        )
        if updated != 1:
            raise LeaseLost(f"{self.kind.name} {self.wf.pk} lease lost")

    def save_now(self, **fields: Any) -> None:
        """Store workflow fields at once (not with the stage result), if we still own it."""
        updated = self.kind.model.objects.filter(
            pk=self.wf.pk, lease_owner=self.owner, state=self.wf.state
        ).update(**fields)
        if updated != 1:
            raise LeaseLost(f"{self.kind.name} {self.wf.pk} lease lost")
        for key, value in fields.items():
            setattr(self.wf, key, value)

    @contextmanager
    def locked(self) -> Iterator[Any]:
        """A transaction holding this workflow's row, if we still own the lease: for a stage
        that must change our own rows (a node's state, a child workflow) exactly once."""
        with transaction.atomic():
            row = (
                self.kind.model.objects.select_for_update()
                .filter(pk=self.wf.pk, lease_owner=self.owner, state=self.wf.state)
                .first()
            )
            if row is None:
                raise LeaseLost(f"{self.kind.name} {self.wf.pk} lease lost")
            yield row

    def sent(self, operation: str) -> bool:
        """Did an execution of this stage already send ``operation`` (maybe applied)?"""
        return bool(self.data.get("sent", {}).get(operation))

    def close(self) -> None:
        if "maas" in self.__dict__:
            self.maas.close()


# -- running one step ------------------------------------------------------------------------------


def claim(kind: WorkflowKind, pk: int, dispatch: int) -> tuple[Any, str] | None:
    """Take the lease of a running workflow for this dispatch, or None (stale or held)."""
    owner = uuid.uuid4().hex
    now = timezone.now()
    with transaction.atomic():
        won = (
            kind.model.objects.filter(pk=pk, dispatch=dispatch, state__in=RUNNABLE)
            .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
            .update(
                updated_at=now,
                lease_owner=owner,
                lease_expires_at=now + timedelta(seconds=lease_seconds()),
                # a lease still held when it expired means the execution died with it
                lost_leases=Case(
                    When(~Q(lease_owner=""), then=F("lost_leases") + 1),
                    default=F("lost_leases"),
                    output_field=PositiveSmallIntegerField(),
                ),
            )
        )
        if not won:
            return None
        wf = kind.load(pk)
        if wf.stage_started_at is None:
            wf.stage_started_at = now
            kind.model.objects.filter(pk=pk).update(stage_started_at=now)
            kind.add_event(wf, "stage.started", f"{wf.stage} started", stage=wf.stage)
    return wf, owner


def run(kind_name: str, pk: int, dispatch: int) -> str:
    """Body of the ``workflow.advance`` task."""
    kind = KINDS[kind_name]
    claimed = claim(kind, pk, dispatch)
    if claimed is None:
        return "skipped"
    wf, owner = claimed
    ctx = StageContext(kind, wf, owner)
    with context.bound(wf.correlation_id, **kind.log_fields(wf)):
        result = _execute(kind, ctx)
        if result is None:
            return "lease-lost"
        record(kind, ctx, result)
        return type(result).__name__.lower()


def _execute(kind: WorkflowKind, ctx: StageContext) -> Result | None:
    wf = ctx.wf
    if wf.lost_leases > settings.WORKFLOW_MAX_LOST_LEASES:
        return Fail(
            "worker_lost",
            f"worker_lost: {wf.lost_leases} executions of stage {wf.stage} died without finishing",
        )
    timeout = ctx.policy.stage_timeouts.get(wf.stage)
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
    except MaasTransient as exc:
        return Retry("maas_transient", exc.message, after=_backoff(wf.stage_tries, exc.retry_after))
    except MaasError as exc:
        return Fail(f"maas_{exc.kind}", f"MAAS refused {exc.operation}: {exc.message}")
    except SecretsError as exc:
        return Retry("secrets_unavailable", str(exc), after=_backoff(wf.stage_tries, None))
    finally:
        ctx.close()


def _backoff(tries: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, float(settings.MAX_TASK_COUNTDOWN))
    ceiling = min(60.0, 2.0 * (2**tries))
    return random.uniform(ceiling / 2, ceiling)  # noqa: S311 (jitter)


def record(kind: WorkflowKind, ctx: StageContext, result: Result) -> None:
    """Store a stage result, if we still own the lease. One short transaction."""
    now = timezone.now()
    with transaction.atomic():
        wf = kind.model.objects.select_for_update().get(pk=ctx.wf.pk)
        if wf.lease_owner != ctx.owner or wf.state != ctx.wf.state:
            log.warning("lease lost (or an operator acted) before recording %s", wf.stage)
            return
        stage = wf.stage
        for event_kind, message, data in ctx.events:
            kind.add_event(wf, event_kind, message, stage=stage, **data)
        wf.lease_owner, wf.lease_expires_at = "", None
        if isinstance(result, Retry) and wf.stage_tries + 1 > settings.WORKFLOW_MAX_STAGE_TRIES:
            result = Fail(
                result.classification,
                f"gave up after {wf.stage_tries + 1} tries: {result.message}",
            )
        metrics.stage_recorded(kind.name, wf, result, now, ctx.events)
        if wf.state == W.CANCELLING:
            _cancel_finished(kind, wf, result, now)
        elif isinstance(result, Done):
            _done(kind, wf, result, now)
        elif isinstance(result, Wait):
            _wait(kind, wf, ctx, result, now)
        elif isinstance(result, Hold):
            _hold(kind, wf, result, now)
        elif isinstance(result, Retry):
            wf.stage_tries += 1
            wf.stage_data = ctx.data
            wf.dispatch += 1
            kind.add_event(
                wf,
                "retry.decision",
                result.message,
                stage=stage,
                classification=result.classification,
                after_seconds=round(result.after, 1),
                try_number=wf.stage_tries,
            )
            enqueue(kind.name, wf.pk, wf.dispatch, countdown=result.after)
        else:
            finish_failed(kind, wf, result, now)
        wf.save()


def _done(kind: WorkflowKind, wf: Any, result: Done, now: Any) -> None:
    for key, value in result.updates.items():
        setattr(wf, key, value)
    kind.add_event(wf, "stage.completed", result.message or f"{wf.stage} done", stage=wf.stage)
    wf.checkpoint = wf.stage
    nxt = kind.next_stage(wf.stage, wf)
    wf.stage_started_at, wf.stage_tries, wf.stage_data = None, 0, {}
    wf.wait_system_id, wf.wait_status, wf.next_check_at = "", None, None
    if nxt is None:
        wf.succeed()
        wf.finished_at = now
        kind.on_success(wf)
        events.emit(kind.name, "completed", wf)
        kind.add_event(wf, "workflow.succeeded", "all stages completed", stage=wf.stage)
        admit_after_commit(wf.site_id)
        return
    wf.stage = nxt
    wf.dispatch += 1
    enqueue(kind.name, wf.pk, wf.dispatch)


def _cancel_finished(kind: WorkflowKind, wf: Any, result: Result, now: Any) -> None:
    """The cancel stage ran: cancelled when it compensated, manual intervention otherwise."""
    if isinstance(result, Done):
        wf.state = W.CANCELLED
        wf.finished_at = now
        kind.on_cancelled(wf)
        kind.add_event(wf, "workflow.cancelled", result.message or "cancelled", stage=wf.stage)
        admit_after_commit(wf.site_id)
    elif isinstance(result, Retry | Wait):
        wf.dispatch += 1
        enqueue(kind.name, wf.pk, wf.dispatch, countdown=getattr(result, "after", 5.0))
    else:
        to_manual_intervention(kind, wf, f"cancel could not compensate: {result.message}")


def to_manual_intervention(kind: WorkflowKind, wf: Any, reason: str) -> None:
    """Freeze the workflow: nothing automatic touches it until an operator acts."""
    wf.state = W.MANUAL_INTERVENTION
    wf.reason = reason[:500]
    wf.next_check_at = None
    wf.wait_system_id, wf.wait_status = "", None
    kind.add_event(wf, "workflow.manual_intervention", wf.reason, stage=wf.stage)
    events.emit(kind.name, "manual_intervention_required", wf, reason=wf.reason)


def _hold(kind: WorkflowKind, wf: Any, result: Hold, now: Any) -> None:
    for key, value in result.updates.items():
        setattr(wf, key, value)
    wf.failure_class = result.failure_class
    wf.stage_data = {}
    to_manual_intervention(kind, wf, result.message)
    kind.on_hold(wf)
    admit_after_commit(wf.site_id)


def _wait(kind: WorkflowKind, wf: Any, ctx: StageContext, result: Wait, now: Any) -> None:
    for key, value in result.updates.items():
        setattr(wf, key, value)
    if ctx.data.get("_waiting") != result.message:
        ctx.data["_waiting"] = result.message
        kind.add_event(
            wf,
            "stage.waiting",
            result.message,
            stage=wf.stage,
            system_id=result.system_id,
            maas_status=result.status,
        )
    wf.stage_data = ctx.data
    wf.wait()
    wf.wait_system_id = result.system_id
    wf.wait_status = result.status
    check = now + timedelta(seconds=result.check_in)
    timeout = ctx.policy.stage_timeouts.get(wf.stage)
    if timeout and wf.stage_started_at:
        check = min(check, wf.stage_started_at + timedelta(seconds=timeout + 1))
    wf.next_check_at = check


def finish_failed(kind: WorkflowKind, wf: Any, result: Fail, now: Any) -> None:
    wf.fail()
    wf.failure_class = result.failure_class
    wf.reason = result.message[:500]
    wf.finished_at = now
    wf.next_check_at = None
    kind.add_event(
        wf,
        "stage.failed",
        result.message,
        stage=wf.stage,
        failure_class=result.failure_class,
        **result.data,
    )
    kind.on_failure(wf)
    events.emit(kind.name, "failed", wf, failure_class=wf.failure_class, reason=wf.reason)
    admit_after_commit(wf.site_id)


# -- waking, admission, sweep, site poller ---------------------------------------------------


def wake(kind: WorkflowKind, pk: int, why: str) -> bool:
    """Move a waiting workflow back to running and dispatch it (compare-and-swap)."""
    with transaction.atomic():
        woken = kind.model.objects.filter(pk=pk, state=W.WAITING).update(
            updated_at=timezone.now(),
            state=W.RUNNING,
            dispatch=F("dispatch") + 1,
            wait_system_id="",
            wait_status=None,
            next_check_at=None,
        )
        if not woken:
            return False
        wf = kind.model.objects.only("dispatch").get(pk=pk)
        enqueue(kind.name, pk, wf.dispatch)
    log.debug("woke %s %s: %s", kind.name, pk, why)
    return True


def admit_after_commit(site_id: int) -> None:
    from maas_domain.workflow.tasks import admit

    transaction.on_commit(lambda: admit.delay(site_id), robust=True)


def admit(site_id: int) -> int:
    """Start pending workflows of a site while it has free slots (max_concurrent_workflows)."""
    from maas_domain.models import MaasSite

    started = 0
    with transaction.atomic():
        site = MaasSite.objects.select_for_update().filter(pk=site_id).first()
        if site is None:
            return 0
        limit = site.effective_policy().max_concurrent_workflows
        active = sum(
            k.model.objects.filter(site_id=site_id, state__in=ACTIVE).count()
            for k in KINDS.values()
        )
        free = limit - active
        # one queue across kinds, oldest first (by when each became pending)
        queue = sorted(
            (
                (queued_at, pk, kind)
                for kind in KINDS.values()
                for pk, queued_at in kind.model.objects.filter(site_id=site_id, state=W.PENDING)
                .order_by("updated_at", "id")
                .values_list("id", "updated_at")[: max(free, 0)]
            ),
            key=lambda item: (item[0], item[1]),
        )
        now = timezone.now()
        for _, pk, kind in queue[: max(free, 0)]:
            moved = kind.model.objects.filter(pk=pk, state=W.PENDING).update(
                updated_at=now,
                state=W.RUNNING,
                dispatch=F("dispatch") + 1,
                started_at=now,
                stage=Case(When(stage="", then=Value(kind.stages[0].name)), default=F("stage")),
            )
            if moved:
                wf = kind.model.objects.only("dispatch").get(pk=pk)
                enqueue(kind.name, pk, wf.dispatch)
                started += 1
    return started


def sweep() -> dict[str, int]:
    """Periodic recovery; a database lock makes concurrent sweeps (two beats) do nothing twice."""
    counts = {"redispatched": 0, "woken": 0, "sites_polled": 0, "admitted": 0}
    with try_lock("workflow-sweep") as got:
        if not got:
            return counts
        now = timezone.now()
        grace = now - timedelta(seconds=settings.WORKFLOW_DISPATCH_GRACE_SECONDS)
        sites: set[int] = set()
        for kind in KINDS.values():
            stuck = kind.model.objects.filter(state__in=RUNNABLE).filter(
                Q(lease_expires_at__lte=now)
                | Q(lease_expires_at__isnull=True, updated_at__lte=grace)
            )
            for pk, dispatch in stuck.values_list("id", "dispatch")[:500]:
                if kind.model.objects.filter(pk=pk, dispatch=dispatch, state__in=RUNNABLE).update(
                    dispatch=F("dispatch") + 1, updated_at=now
                ):
                    enqueue(kind.name, pk, dispatch + 1)
                    counts["redispatched"] += 1
            due = kind.model.objects.filter(state=W.WAITING, next_check_at__lte=now)
            for pk in due.values_list("id", flat=True)[:500]:
                counts["woken"] += wake(kind, pk, "check-in time")
            sites.update(
                kind.model.objects.filter(state=W.WAITING)
                .exclude(wait_system_id="")
                .values_list("site_id", flat=True)
                .distinct()
            )
            sites.update(
                kind.model.objects.filter(state=W.PENDING)
                .values_list("site_id", flat=True)
                .distinct()
            )
    from maas_domain.workflow.tasks import poll_site

    for site_id in sites:
        counts["admitted"] += admit(site_id)
        poll_site.delay(site_id)
        counts["sites_polled"] += 1
    return counts


def poll_site(site_id: int) -> int:
    """One MAAS listing for every waiting workflow of a site; wake those whose machine moved."""
    from maas_domain.maas.factory import client_for_site
    from maas_domain.models import MaasSite

    waiting: list[tuple[WorkflowKind, int, str, int | None]] = []
    with try_lock(f"poll-site-{site_id}") as got:
        if not got:
            return 0
        for kind in KINDS.values():
            rows = (
                kind.model.objects.filter(site_id=site_id, state=W.WAITING)
                .exclude(wait_system_id="")
                .values_list("id", "wait_system_id", "wait_status")
            )
            waiting.extend((kind, pk, sid, status) for pk, sid, status in rows)
    if not waiting:
        return 0
    site = MaasSite.objects.get(pk=site_id)
    woken = 0
    try:
        client = client_for_site(site)
        seen: dict[str, int] = {}
        ids = sorted({sid for _, _, sid, _ in waiting})
        for i in range(0, len(ids), 100):
            for m in client.list_machines(system_ids=ids[i : i + 100]):
                seen[m.system_id] = int(m.status)
        client.close()
    except (MaasError, SecretsError) as exc:
        log.warning("site poll of %s failed: %s", site.name, exc)
        return 0
    for kind, pk, sid, status in waiting:
        if seen.get(sid, -1) != status:
            woken += wake(kind, pk, f"MAAS status of {sid} changed")
    return woken

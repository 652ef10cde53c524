"""When steps run: opening a workflow, admission, waking, the sweep and the site poller, with
their Celery tasks beside them.

Waiting never blocks a worker: a waiting workflow is woken by the site poller (one MAAS listing
per site for all its waiting machines) when its machine's status changes, by an external signal
(enrollment, a child workflow ending), or by the sweep when its check-in time comes. The sweep
also re-dispatches running workflows whose lease expired (dead worker) or whose message was
lost. docs/architecture.md ("Waiting without blocking", "Durability: the sweep").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import models, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from maas_client.errors import MaasError
from maas_client.types import Machine
from maas_domain import audit, context, dryrun, events, regions
from maas_domain.fsm import sources, target
from maas_domain.locks import try_lock
from maas_domain.models import MaasSite
from maas_domain.secrets import SecretsError
from maas_domain.site_client import client_for_site
from maas_domain.work import ACTIVE_STATES, WorkflowState
from workflows import hints
from workflows.dispatch import ADMIT, admit_after_commit, enqueue
from workflows.kinds import KINDS, M, WorkflowKind
from workflows.models import RUNNABLE_STATES, Workflow

log = logging.getLogger("workflow")
W = WorkflowState


# -- starting -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Who starts workflows and what the record says.

    ``message``: the first timeline entry of each. ``audit_action``: one audit row per workflow
    (its snapshot), or one row on ``batch`` naming them all. ``event_data``: extra fields of
    the ``node.<kind>.started`` event. ``run_now``: skip admission because the caller already
    holds a slot on the site (a reimage's redeploy child runs inside its parent's slot).
    """

    actor: audit.Actor
    message: str
    audit_action: str
    reason: str = ""
    batch: models.Model | None = None
    event_data: dict[str, Any] = field(default_factory=dict)
    run_now: bool = False


def start_workflows(kind: WorkflowKind[M], rows: list[M], how: Start) -> list[M]:
    """The one way a workflow comes to exist: insert the rows, write each one's first timeline
    entry, the audit record and its ``started`` event, then ask for admission (or dispatch at
    once), all in the caller's transaction. A unique-constraint violation (the host already has
    an open workflow) raises IntegrityError with nothing written; the caller turns it into 409.
    """
    now = timezone.now()
    correlation_id = context.current_correlation_id()
    for wf in rows:
        wf.stage = wf.stage or kind.first_stage(wf)
        wf.correlation_id = wf.correlation_id or correlation_id
        if how.run_now:
            wf.admit()
            wf.dispatch, wf.started_at = 1, now
    with transaction.atomic():
        created = kind.model._default_manager.bulk_create(rows, batch_size=1000)
    name = audit.actor_name(how.actor)
    kind.add_events(
        kind.event(wf, "workflow.created", how.message, actor=name if how.actor else "")
        for wf in created
    )
    if how.batch is not None:
        audit.record(
            actor=how.actor,
            action=how.audit_action,
            target=how.batch,
            after={
                "size": len(created),
                "hostnames": [wf.hostname for wf in created],
                f"{kind.name}_ids": [wf.pk for wf in created],
            },
            reason=how.reason,
        )
    else:
        for wf in created:
            audit.record(
                actor=how.actor,
                action=how.audit_action,
                target=wf,
                after=audit.snapshot(wf),
                reason=how.reason,
            )
    events.emit_many(kind.name, "started", created, **how.event_data)
    if (rehearsal := dryrun.current()) is not None:
        rehearsal.workflows.extend(
            {"kind": kind.name, "hostname": wf.hostname, "stages": kind.plan(wf)} for wf in created
        )
    if how.run_now:
        for wf in created:
            enqueue(kind.name, wf.pk, wf.dispatch, region=wf.site.region)
    else:
        for site_id in sorted({wf.site_id for wf in created}):
            admit_after_commit(site_id)
    return created


def start_workflow(kind: WorkflowKind[M], row: M, how: Start) -> M:
    return start_workflows(kind, [row], how)[0]


# -- admission -------------------------------------------------------------------------------------


@shared_task(name=ADMIT)
def admit(site_id: int) -> int:
    """Start pending workflows of a site while it has free slots (max_concurrent_workflows,
    shared by every kind): one queue across kinds, oldest first by when each became pending.
    Under the site's row lock, whatever the number admitted: one count, one locking read and
    one update per kind."""
    with transaction.atomic():
        site = MaasSite.objects.select_for_update().filter(pk=site_id).first()
        if site is None:
            return 0
        limit = site.effective_policy().max_concurrent_workflows
        active = sum(
            k.model._default_manager.filter(site_id=site_id, state__in=ACTIVE_STATES).count()
            for k in KINDS.values()
        )
        free = max(limit - active, 0)
        if not free:
            return 0
        queue = sorted(
            (
                (queued_at, pk, dispatch, kind)
                for kind in KINDS.values()
                for pk, queued_at, dispatch in _admissible(kind)
                .select_for_update(skip_locked=True, of=("self",))
                .filter(site_id=site_id)
                .order_by("updated_at", "id")
                .values_list("id", "updated_at", "dispatch")[:free]
            ),
            key=lambda item: (item[0], item[1]),
        )[:free]
        now = timezone.now()
        for name in sorted({item[3].name for item in queue}):
            kind = KINDS[name]
            chosen = [(pk, dispatch) for _, pk, dispatch, k in queue if k.name == name]
            kind.model._default_manager.filter(pk__in=[pk for pk, _ in chosen]).update(
                updated_at=now,
                state=target(Workflow.admit),
                dispatch=F("dispatch") + 1,
                started_at=now,
                stage=Case(When(stage="", then=Value(kind.stages[0].name)), default=F("stage")),
            )
            for pk, dispatch in chosen:
                enqueue(kind.name, pk, dispatch + 1, region=site.region)
    return len(queue)


def _admissible(kind: WorkflowKind[Any]) -> models.QuerySet[Any]:
    """Pending rows of a kind that may start now (the kind's ``admission_filter`` holds some
    back)."""
    rows: models.QuerySet[Any] = kind.model._default_manager.filter(
        state__in=sources(Workflow.admit)
    )
    if kind.admission_filter is not None:
        rows = rows.exclude(kind.admission_filter())
    return rows


# -- waking ----------------------------------------------------------------------------------------


def wake(kind: WorkflowKind[Any], pk: int, why: str) -> bool:
    """Move a waiting workflow back to running and dispatch it (compare-and-swap)."""
    return wake_many(kind, [pk], why) == 1


def wake_many(
    kind: WorkflowKind[Any],
    pks: list[int],
    why: str,
    seen: Mapping[str, tuple[Machine, float]] | None = None,
) -> int:
    """Move waiting workflows back to running and dispatch each: one locking read and one
    update, whatever the count (rows another transaction holds are skipped; it is moving
    them). ``seen``: the site poll's machines by system id, with when each was listed; a
    workflow waiting on one of them gets it as its step's hint (workflows/hints.py)."""
    with transaction.atomic():
        manager = kind.model._default_manager
        rows = list(
            manager.select_for_update(skip_locked=True, of=("self",))
            .filter(pk__in=pks, state__in=sources(Workflow.wake))
            .values_list("id", "dispatch", "site__region", "stage", "wait_system_id")
        )
        if not rows:
            return 0
        manager.filter(pk__in=[row[0] for row in rows]).update(
            updated_at=timezone.now(),
            state=target(Workflow.wake),
            dispatch=F("dispatch") + 1,
            wait_system_id="",
            wait_status=None,
            next_check_at=None,
        )
        for pk, dispatch, region, stage, sid in rows:
            listed = (seen or {}).get(sid) if sid else None
            hint = (
                hints.build(listed[0], dispatch=dispatch + 1, stage=stage, observed_at=listed[1])
                if listed is not None
                else None
            )
            enqueue(kind.name, pk, dispatch + 1, region=region, hint=hint)
    log.debug("woke %d %s workflow(s): %s", len(rows), kind.name, why)
    return len(rows)


# -- the sweep (run by beat) -----------------------------------------------------------------------


class _Unserved:
    """The sweep's view of which regions no live worker serves, read once per sweep and only
    when needed. A region queue without a consumer gets no re-sends and no polls: its first
    message still waits there, and a backlog of re-sends and polls would only hit its MAAS as
    a burst when its workers come back. The central queue is always sent to (nothing runs
    without it); heartbeats that cannot be read count as served."""

    def __init__(self) -> None:
        self.live: dict[str, int] | None = None
        self.read = False

    def __call__(self, region: str) -> bool:
        if regions.queue_for(region) == regions.central_queue():
            return False
        if not self.read:
            self.live, self.read = regions.live_queues(), True
        return regions.hold_back(region, self.live)


@shared_task(name="workflow.sweep")
def sweep() -> dict[str, int]:
    """Periodic recovery; a database lock makes concurrent sweeps (two beats) do nothing twice."""
    counts = {"redispatched": 0, "woken": 0, "sites_polled": 0, "admitted": 0, "unserved": 0}
    unserved = _Unserved()
    with try_lock("workflow-sweep") as got:
        if not got:
            return counts
        now = timezone.now()
        grace = now - timedelta(seconds=settings.WORKFLOW_DISPATCH_GRACE_SECONDS)
        sites: set[tuple[int, str]] = set()
        for kind in KINDS.values():
            manager = kind.model._default_manager
            stuck = manager.filter(state__in=RUNNABLE_STATES).filter(
                Q(lease_expires_at__lte=now)
                | Q(lease_expires_at__isnull=True, updated_at__lte=grace)
            )
            for pk, dispatch, region in stuck.values_list("id", "dispatch", "site__region")[:500]:
                if unserved(region):
                    counts["unserved"] += 1
                    continue
                if manager.filter(pk=pk, dispatch=dispatch, state__in=RUNNABLE_STATES).update(
                    dispatch=F("dispatch") + 1, updated_at=now
                ):
                    enqueue(kind.name, pk, dispatch + 1, region=region)
                    counts["redispatched"] += 1
            due = manager.filter(state=W.WAITING, next_check_at__lte=now)
            counts["woken"] += wake_many(
                kind, list(due.values_list("id", flat=True)[:500]), "check-in time"
            )
            # each site with its region (a join, not a query more per sweep)
            sites.update(
                manager.filter(state=W.WAITING)
                .exclude(wait_system_id="")
                .values_list("site_id", "site__region")
                .distinct()
            )
            sites.update(
                manager.filter(state=W.PENDING).values_list("site_id", "site__region").distinct()
            )
    for site_id, region in sorted(sites):
        counts["admitted"] += admit(site_id)
        if unserved(region):
            continue
        regions.send(POLL_SITE, (site_id,), region=region)
        counts["sites_polled"] += 1
    return counts


# -- the site poller -------------------------------------------------------------------------------


POLL_SITE = "workflow.poll_site"


@shared_task(name=POLL_SITE)
def poll_site(site_id: int) -> int:
    """One MAAS listing for every waiting workflow of a site; wake those whose machine moved,
    each with the machine as the listing returned it (workflows/hints.py: the woken stage's
    first read takes it instead of reading MAAS again)."""
    waiting: list[tuple[WorkflowKind[Any], int, str, int | None]] = []
    with try_lock(f"poll-site-{site_id}") as got:
        if not got:
            return 0
        for kind in KINDS.values():
            rows = (
                kind.model._default_manager.filter(site_id=site_id, state=W.WAITING)
                .exclude(wait_system_id="")
                .values_list("id", "wait_system_id", "wait_status")
            )
            waiting.extend((kind, pk, sid, status) for pk, sid, status in rows)
    if not waiting:
        return 0
    site = MaasSite.objects.get(pk=site_id)
    seen: dict[str, tuple[Machine, float]] = {}
    ids = sorted({sid for _, _, sid, _ in waiting})
    try:
        client = client_for_site(site)
        try:
            for i in range(0, len(ids), 100):
                observed_at = time.time()  # before the request: MAAS answers after it
                for m in client.list_machines(system_ids=ids[i : i + 100]):
                    seen[m.system_id] = (m, observed_at)
        finally:
            client.close()
    except (MaasError, SecretsError) as exc:
        log.warning("site poll of %s failed: %s", site.name, exc)
        return 0
    moved: dict[str, list[int]] = {}
    for kind, pk, sid, status in waiting:
        listed = seen.get(sid)
        if listed is None or int(listed[0].status) != status:
            moved.setdefault(kind.name, []).append(pk)
    return sum(
        wake_many(KINDS[name], pks, "MAAS status changed", seen) for name, pks in moved.items()
    )

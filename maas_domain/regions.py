"""Regions: which Celery queue runs a site's MAAS work, which tasks are regional, and which
regions have work waiting that no live worker serves.

A site belongs to a region (``MaasSite.region``, a slug; ``default`` unless set). Every task
that talks to a site's MAAS or reads its secrets (``REGIONAL_TASKS``) is sent to its region's
queue, so the workers started beside that MAAS (``celery -A config worker -Q region-east``) run
it; everything else (``CENTRAL_TASKS``: admission, the sweep, the outbox, retention, the
reconciliation dispatch) stays on the central queue. The default region *is* the central queue
(Celery's default, ``celery``): a deployment whose sites are all in the default region and whose
workers are started without ``-Q`` runs exactly as before. Other regions' queues are
``region-<name>``, which no region name can turn into the central queue.

The embedded default (the filesystem broker) is a folder on one machine with one worker: every
region's work runs on the central queue there (``routed()`` is false), and a region is only a
label. docs/architecture.md ("Regions") and docs/operations.md ("Regions") say why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.conf import settings
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from maas_domain import heartbeat
from maas_domain.models import MaasSite
from maas_domain.observability.metrics import REGION_WORK_WAITING, REGION_WORKERS
from maas_domain.work import ACTIVE_STATES, KINDS, WorkflowState

log = logging.getLogger("maas_domain.regions")
DEFAULT_REGION = "default"
QUEUE_PREFIX = "region-"
# Tasks that talk to a site's MAAS or read its secrets: sent to the site's region's queue.
REGIONAL_TASKS = frozenset(
    {"workflow.advance", "workflow.poll_site", "reconciliation.reconcile_site", "sites.probe"}
)
# Tasks that need only the database, the broker and the event sink: the central queue
# (``maas_domain.ping`` too, unless ``manage.py ping_worker --region`` names another queue).
CENTRAL_TASKS = frozenset(
    {
        "workflow.admit",
        "workflow.sweep",
        "events.publish",
        "retention.prune",
        "reconciliation.dispatch",
        "maas_domain.ping",
    }
)
# Workflows in these states need a worker of their site's region (to start, run, be polled or
# compensate); ``manual_intervention`` waits for an operator, not for a worker.
WAITING_STATES = (WorkflowState.PENDING, *ACTIVE_STATES)


# -- secrets: each region's own paths (docs/security.md, "What each role holds") ------------------


def secrets_prefix(region: str) -> str:
    """Where the secrets of ``region``'s sites live (under the deployment's mount and prefix):
    their credentials (``sites/<id>/...``) and their onboardings' node tokens
    (``onboardings/<id>/attempt-<n>``). A region's workers log in with an identity whose policy
    reads only this prefix (``manage.py secrets_policy --region``)."""
    return f"regions/{region}"


# Called when a site moves to another region, after its row has the new one and before the
# change commits: each moves what its app keeps under the old region's prefix (the site's
# credentials: maas_domain.services.credentials; its node tokens: onboarding).
SITE_MOVED: list[Callable[[MaasSite, str], None]] = []


def central_queue() -> str:
    return str(current_app.conf.task_default_queue)


def routed() -> bool:
    """Regions have queues of their own: every broker but the embedded filesystem one."""
    return not str(settings.CELERY_BROKER_URL or "").startswith("filesystem")


def queue_for(region: str) -> str:
    if region == DEFAULT_REGION or not routed():
        return central_queue()
    return QUEUE_PREFIX + region


def send(task: str, args: tuple[Any, ...], *, region: str, countdown: float = 0) -> None:
    """Send a regional task to ``region``'s queue (call after commit)."""
    current_app.send_task(task, args, countdown=max(countdown, 0), queue=queue_for(region))


class RegionalTaskWithoutQueue(RuntimeError):
    """A regional task was sent without naming its region's queue (a programming error)."""


def route(name: str, args: Any, kwargs: Any, options: Mapping[str, Any], **_: Any) -> Any:
    """Celery's router (``CELERY_TASK_ROUTES``): central tasks go to the central queue; a
    regional task must come through ``send`` (or name its queue), never fall to the default
    queue by accident, where a central worker would call a MAAS it may not reach."""
    if name in REGIONAL_TASKS and not options.get("queue"):
        raise RegionalTaskWithoutQueue(f"{name} must be sent to its site's region queue")
    if name in CENTRAL_TASKS:
        return {"queue": central_queue()}
    return None


# -- who serves what -------------------------------------------------------------------------------


def live_queues() -> dict[str, int] | None:
    """Live workers per queue, or None when the heartbeats cannot be read."""
    try:
        return heartbeat.live_queues()
    except Exception as exc:
        log.warning("worker heartbeats unreadable: %s", exc)
        return None


def served(region: str, live: Mapping[str, int] | None) -> bool:
    """False only when the heartbeats were read and no live worker consumes the region's
    queue."""
    return live is None or live.get(queue_for(region), 0) > 0


def hold_back(region: str, live: Mapping[str, int] | None) -> bool:
    """Whether periodic re-sends to ``region`` (the sweep's, the reconciliation dispatch's)
    should wait: only for a region queue known to have no live consumer. The central queue is
    always sent to: nothing runs without it, and what is sent there is also what a worker
    started without ``-Q`` serves."""
    return queue_for(region) != central_queue() and not served(region, live)


# -- what waits in each region ---------------------------------------------------------------------


@dataclass(frozen=True)
class WorkSource:
    """Regional work an app other than the engine owns (reconciliation's runs): how much waits
    per region, and what is in flight on one site (a message in its region's queue, or an
    execution in its worker), as small dicts naming it."""

    name: str
    waiting_by_region: Callable[[], Mapping[str, int]]
    in_flight_on_site: Callable[[int], list[dict[str, Any]]]


SOURCES: list[WorkSource] = []


def register_source(source: WorkSource) -> None:
    if all(s.name != source.name for s in SOURCES):
        SOURCES.append(source)


def waiting_by_region() -> dict[str, int]:
    """Work that needs a worker of its region, per region: workflows of every kind that are
    pending, running, waiting or cancelling, and the registered sources' (one GROUP BY each)."""
    counts: dict[str, int] = {}
    for kind in KINDS.values():
        rows = (
            kind.model.objects.filter(state__in=WAITING_STATES)
            .order_by()
            .values_list("site__region")
            .annotate(n=Count("id"))
        )
        for region, n in rows:
            counts[region] = counts.get(region, 0) + n
    for source in SOURCES:
        for region, n in source.waiting_by_region().items():
            counts[region] = counts.get(region, 0) + n
    return counts


def in_flight_on_site(site_id: int) -> list[dict[str, Any]]:
    """Work of a site that may have a message in its region's queue or an execution in its
    worker: workflows holding an admission slot (running, waiting, cancelling) and the sources'
    (a queued or running reconcile run). At most 50 per kind, enough to name them."""
    found: list[dict[str, Any]] = []
    for kind in KINDS.values():
        rows = kind.model.objects.filter(site_id=site_id, state__in=ACTIVE_STATES).values(
            "id", "hostname", "state"
        )[:50]
        found.extend({"kind": kind.name, **row} for row in rows)
    for source in SOURCES:
        found.extend(source.in_flight_on_site(site_id))
    return found


@dataclass(frozen=True)
class RegionState:
    region: str
    queue: str
    sites: int
    waiting: int
    workers: int | None  # None: heartbeats unreadable

    @property
    def unserved(self) -> bool:
        """Work waits and no live worker consumes the queue."""
        return self.waiting > 0 and self.workers == 0


def overview() -> list[RegionState]:
    """Every region that has a site or waiting work: its queue, sites, waiting work and live
    workers (a constant number of queries and one heartbeat read)."""
    sites = dict(
        MaasSite.objects.order_by()
        .values_list("region")
        .annotate(n=Count("id"))
        .values_list("region", "n")
    )
    waiting = waiting_by_region()
    live = live_queues()
    return [
        RegionState(
            region=region,
            queue=queue_for(region),
            sites=sites.get(region, 0),
            waiting=waiting.get(region, 0),
            workers=None if live is None else live.get(queue_for(region), 0),
        )
        for region in sorted({DEFAULT_REGION, *sites, *waiting})
    ]


def region_state(region: str) -> RegionState:
    return next(r for r in overview() if r.region == region)


def regions_gauge() -> Iterable[GaugeMetricFamily]:
    """For the metrics endpoint: work waiting and live workers per region (no workers series
    when the heartbeats cannot be read, so an alert on zero workers does not fire on a
    reading failure)."""
    states = overview()
    waiting = GaugeMetricFamily(
        REGION_WORK_WAITING,
        "Work that needs a worker of the region (workflows pending, running, waiting or "
        "cancelling; reconcile runs queued or running)",
        labels=["region"],
    )
    workers = GaugeMetricFamily(
        REGION_WORKERS, "Live workers consuming the region's queue", labels=["region"]
    )
    for state in states:
        waiting.add_metric([state.region], state.waiting)
        if state.workers is not None:
            workers.add_metric([state.region], state.workers)
    return [waiting, workers]

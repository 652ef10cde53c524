"""Reads of reconciliation state: the per-site status summary, drift counts, the schedule.

Each function runs a constant number of SQL queries whatever the number of sites, runs or
drift records. ``open_drift_counts`` and ``last_run_durations`` are the hooks for metrics.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max
from django.utils import timezone

from maas_domain.models import MaasSite
from maas_domain.models.sites import SiteStatus
from reconciliation.models import (
    ACTIVE_DRIFT,
    ACTIVE_RUN,
    DriftRecord,
    DriftState,
    NodeMaasState,
    ReconcileRun,
)

SCHEDULE_NAME = "reconciliation-dispatch"


def run_summary(run: ReconcileRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "id": run.pk,
        "site_id": run.site_id,
        "state": run.state,
        "trigger": run.trigger,
        "requested_by": run.requested_by,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_ms": run.duration_ms,
        "machines_seen": run.machines_seen,
        "nodes_checked": run.nodes_checked,
        "drift_opened": run.drift_opened,
        "drift_cleared": run.drift_cleared,
        "drift_open": run.drift_open,
        "leaks_swept": run.leaks_swept,
        "maas_requests": run.maas_requests,
        "maas_errors": run.maas_errors,
        "reason": run.reason,
    }


def open_drift_counts() -> dict[tuple[int, str, str, str], int]:
    """(site_id, kind, severity, state) → number of active drift records. One query."""
    rows = (
        DriftRecord.objects.filter(state__in=ACTIVE_DRIFT)
        .values_list("site_id", "kind", "severity", "state")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(site, kind, sev, state): n for site, kind, sev, state, n in rows}


def open_drift_by_severity() -> dict[tuple[int, str], int]:
    """(site_id, severity) -> drift records still open (nobody acknowledged or resolved them).
    One query."""
    rows = (
        DriftRecord.objects.filter(state=DriftState.OPEN)
        .values_list("site_id", "severity")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(site, sev): n for site, sev, n in rows}


def last_run_durations() -> dict[int, tuple[str, float | None]]:
    """site_id → (outcome, seconds) of its latest finished run. Two queries."""
    return {
        r.site_id: (r.state, r.duration_ms / 1000 if r.duration_ms is not None else None)
        for r in _latest_finished_runs()
    }


def _latest_finished_runs() -> list[ReconcileRun]:
    ids = (
        ReconcileRun.objects.exclude(state__in=ACTIVE_RUN)
        .values("site_id")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
        .order_by()
    )
    return list(ReconcileRun.objects.filter(pk__in=list(ids)))


def schedule() -> dict[str, Any]:
    """The beat schedule row and when it will next fire (None when disabled or absent)."""
    from django_celery_beat.models import PeriodicTask

    task = (
        PeriodicTask.objects.select_related("interval", "crontab")
        .filter(name=SCHEDULE_NAME)
        .first()
    )
    if task is None:
        return {"name": SCHEDULE_NAME, "enabled": False, "next_run_at": None}
    now = timezone.now()
    next_run: datetime | None = None
    description = ""
    try:
        if task.interval is not None:
            every = timedelta(**{task.interval.period: task.interval.every})
            description = f"every {int(every.total_seconds())}s"
            next_run = max((task.last_run_at or now) + every, now)
        elif task.crontab is not None:
            description = f"crontab {task.crontab}"
            remaining = task.crontab.schedule.remaining_estimate(task.last_run_at or now)
            next_run = now + max(remaining, timedelta(0))
        else:
            description = task.scheduler.__class__.__name__ if task.scheduler else "other"
    except Exception:  # an odd schedule must not break the status page
        next_run = None
    return {
        "name": SCHEDULE_NAME,
        "enabled": task.enabled,
        "schedule": description,
        "last_run_at": task.last_run_at,
        "next_run_at": next_run if task.enabled else None,
    }


def reconciliation_status() -> dict[str, Any]:
    """Per site: last finished run, the run in progress, open drift counts, the next run."""
    sites = list(MaasSite.objects.order_by("name").only("id", "name", "status"))
    last = {r.site_id: r for r in _latest_finished_runs()}
    active = {r.site_id: r for r in ReconcileRun.objects.filter(state__in=ACTIVE_RUN)}
    counts: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"total": 0, "by_kind": {}, "by_severity": {}, "by_state": {}}
    )
    for (site_id, kind, severity, state), n in open_drift_counts().items():
        c = counts[site_id]
        c["total"] += n
        for key, value in (("by_kind", kind), ("by_severity", severity), ("by_state", state)):
            c[key][value] = c[key].get(value, 0) + n
    sched = schedule()
    return {
        "schedule": sched,
        "sites": [
            {
                "site_id": site.pk,
                "site_name": site.name,
                "site_status": site.status,
                "last_run": run_summary(last.get(site.pk)),
                "in_progress": run_summary(active.get(site.pk)),
                "open_drift": counts[site.pk],
                "next_run_at": sched["next_run_at"] if site.status == SiteStatus.ACTIVE else None,
            }
            for site in sites
        ],
    }


def node_observation(node: Any) -> dict[str, Any] | None:
    """What the last reconcile run saw of ``node`` in MAAS (maas_domain.selectors asks for it)."""
    state = NodeMaasState.objects.filter(node_id=node.pk).first()
    if state is None:
        return None
    return {
        "system_id": state.system_id,
        "hostname": state.hostname,
        "status": state.status_name,
        "power_state": state.power_state,
        "owner": state.owner,
        "last_seen_at": state.last_seen_at,
        "missing_since": state.missing_since,
        "observed_at": state.updated_at,
    }


def runs_waiting_by_region() -> dict[str, int]:
    """Queued or running reconcile runs per region of their site (one GROUP BY): work that needs
    a worker of that region (maas_domain/regions.py)."""
    rows = (
        ReconcileRun.objects.filter(state__in=ACTIVE_RUN)
        .order_by()
        .values_list("site__region")
        .annotate(n=Count("id"))
    )
    return {region: n for region, n in rows}


def runs_in_flight_on_site(site_id: int) -> list[dict[str, Any]]:
    """The site's queued or running reconcile run (at most one), named as a region change's
    refusal names open work."""
    return [
        {"kind": "reconcile_run", "id": pk, "state": state}
        for pk, state in ReconcileRun.objects.filter(
            site_id=site_id, state__in=ACTIVE_RUN
        ).values_list("id", "state")
    ]

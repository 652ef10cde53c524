"""Retention of reconcile runs (registered with ``maas_domain.retention`` from ``ready()``).

A finished run older than ``RETENTION_RECONCILE_RUN_DAYS`` goes, except the latest finished run
of each site (its last result stays visible however long ago it ran). Queued and running runs
are never pruned; the drift ledger, which runs only update, is never pruned.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max

from maas_domain.retention import delete_in_batches
from reconciliation.models import ReconcileRun, RunState

FINISHED = (RunState.SUCCEEDED, RunState.FAILED)


def prune_runs(cutoff: datetime) -> int:
    latest = (
        ReconcileRun.objects.filter(state__in=FINISHED)
        .values("site")
        .annotate(last=Max("id"))
        .values("last")
    )
    return delete_in_batches(
        ReconcileRun.objects.filter(state__in=FINISHED, finished_at__lt=cutoff).exclude(
            pk__in=latest
        )
    )

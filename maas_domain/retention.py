"""Retention: bookkeeping rows that only matter for a while are pruned by a beat task
(``retention.prune``, hourly) after ages set in the settings (docs/settings.md); an age of 0
keeps that kind forever. Workflow timelines, audit rows and the drift ledger are history and are
never pruned here (timelines can be exported per workflow: ``manage.py export_timelines``).

This module prunes what ``maas_domain`` owns (expired ``Idempotency-Key`` answers, published
outbox events); other apps register their own pruner from ``ready()`` (reconciliation: old
finished runs), so this module never imports them. Deletes go in batches of ``BATCH`` rows, each
its own short statement, so pruning a large backlog never holds long locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

log = logging.getLogger("maas_domain.retention")
BATCH = 5000

# name -> (setting holding the age, its unit in seconds, pruner(cutoff) -> rows deleted)
Pruner = Callable[[datetime], int]
PRUNERS: dict[str, tuple[str, int, Pruner]] = {}


def register(name: str, setting: str, unit_seconds: int, pruner: Pruner) -> None:
    PRUNERS[name] = (setting, unit_seconds, pruner)


def delete_in_batches(queryset: QuerySet[Any]) -> int:
    """Delete the rows of ``queryset`` in batches of primary keys; return how many went."""
    deleted = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return deleted
        queryset.model.objects.filter(pk__in=ids).delete()
        deleted += len(ids)


def _idempotency(cutoff: datetime) -> int:
    from maas_domain.models import IdempotencyRecord

    # a replay after this age runs the request again: clients retry within minutes, not days
    return delete_in_batches(IdempotencyRecord.objects.filter(created_at__lt=cutoff))


def _outbox(cutoff: datetime) -> int:
    from maas_domain.models import OutboxEvent

    # only published events: an unpublished one is still owed to consumers, whatever its age
    return delete_in_batches(
        OutboxEvent.objects.filter(published_at__isnull=False, published_at__lt=cutoff)
    )


register("idempotency_records", "RETENTION_IDEMPOTENCY_HOURS", 3600, _idempotency)
register("outbox_published", "RETENTION_OUTBOX_DAYS", 86400, _outbox)


def prune(now: datetime | None = None) -> dict[str, int]:
    """Run every registered pruner whose age setting is not 0; return rows deleted per name."""
    now = now or timezone.now()
    deleted = {}
    for name, (setting, unit, pruner) in PRUNERS.items():
        age = int(getattr(settings, setting))
        if age <= 0:
            continue  # kept forever
        deleted[name] = pruner(now - timedelta(seconds=age * unit))
    if any(deleted.values()):
        log.info("retention pruned old rows", extra={"pruned": deleted})
    return deleted


@shared_task(name="retention.prune")
def prune_task() -> dict[str, int]:
    return prune()

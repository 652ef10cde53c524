"""Retention: rows that only matter for a while are pruned by a beat task (``retention.prune``,
hourly) after ages set in the settings (docs/settings.md); an age of 0 keeps that kind forever.
Bookkeeping (``Idempotency-Key`` answers, published outbox events, old reconcile runs) is
deleted; history is archived first and then deleted: audit rows older than
``MAASCP_RETENTION_AUDIT_DAYS`` and the timelines of workflows closed longer than
``MAASCP_RETENTION_TIMELINE_DAYS`` go to JSON lines files under ``MAASCP_ARCHIVE_DIR``
(maas_domain/archive.py; docs/operations.md, "Retention and archives"). A file that cannot be
written stops that pruner before it deletes anything it did not archive. The drift ledger is
never pruned.

This module prunes what ``maas_domain`` owns; other apps register their own pruner from
``ready()`` (reconciliation: old finished runs; the workflow engine: timelines), so this module
never imports them. Deletes go in batches of ``BATCH`` rows, each its own short statement, so
pruning a large backlog never holds long locks.
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


def _audit(cutoff: datetime) -> int:
    """Audit rows older than ``cutoff``: each batch written to
    ``audit/<day of its first row>/audit-<first id>-<last id>.jsonl``, then deleted."""
    from maas_domain.archive import archive_dir, audit_record, dumps, write_jsonl
    from maas_domain.models import AuditLog

    deleted = 0
    while True:
        rows = list(AuditLog.objects.filter(created_at__lt=cutoff).order_by("id")[:BATCH])
        if not rows:
            return deleted
        first, last = rows[0], rows[-1]
        out = archive_dir("audit", f"{first.created_at:%Y-%m-%d}")
        write_jsonl(
            out / f"audit-{first.pk}-{last.pk}.jsonl", (dumps(audit_record(r)) for r in rows)
        )
        AuditLog.objects.filter(pk__in=[r.pk for r in rows]).delete()
        deleted += len(rows)


register("idempotency_records", "RETENTION_IDEMPOTENCY_HOURS", 3600, _idempotency)
register("outbox_published", "RETENTION_OUTBOX_DAYS", 86400, _outbox)
register("audit_log", "RETENTION_AUDIT_DAYS", 86400, _audit)


def prune(now: datetime | None = None) -> dict[str, int]:
    """Run every registered pruner whose age setting is not 0; return rows deleted per name."""
    now = now or timezone.now()
    deleted = {}
    for name, (setting, unit, pruner) in PRUNERS.items():
        age = int(getattr(settings, setting))
        if age <= 0:
            continue  # kept forever
        try:
            deleted[name] = pruner(now - timedelta(seconds=age * unit))
        except OSError as exc:  # an archive could not be written: nothing more of it deleted
            log.error(
                "retention could not archive; that kind was not pruned further",
                extra={"pruner": name, "error": f"{type(exc).__name__}: {exc.strerror}"},
            )
            deleted[name] = 0
    if any(deleted.values()):
        log.info("retention pruned old rows", extra={"pruned": deleted})
    return deleted


@shared_task(name="retention.prune")
def prune_task() -> dict[str, int]:
    return prune()

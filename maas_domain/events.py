"""Domain events (docs/architecture.md, "Domain events"): written to the outbox in the state
change's transaction and published at least once by ``publish`` to the configured sink.

Sinks (``MAASCP_EVENT_SINK``): ``redis`` (an XADD to a stream; default when the broker is Redis),
``webhook`` (POST JSON, retried on the next run when it fails), ``log`` (a JSON log line; the
embedded default). Each event carries a unique id, its type, time, and the ids of site,
workflow, node, MAAS system and correlation; ``asyncapi.draft.yaml`` describes them.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis
import requests
from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from maas_domain.coalesce import Coalescer
from maas_domain.models import OutboxEvent
from maas_domain.observability.metrics import OUTBOX_OLDEST_AGE, OUTBOX_UNPUBLISHED

if TYPE_CHECKING:
    from maas_domain.work import WorkflowRow

log = logging.getLogger("maas_domain.events")
# What happens to a workflow: ``node.<kind>.<outcome>`` for every registered workflow kind.
OUTCOMES = ("started", "completed", "failed", "manual_intervention_required")
_KINDS: set[str] = set()


_OTHER_TYPES: set[str] = set()


def register_kind(kind: str) -> None:
    """Called by the registry of workflow kinds (``workflows.kinds.register``)."""
    _KINDS.add(kind)


def register_type(event_type: str) -> None:
    """An event that is not a workflow's outcome (``node.onboarding.batch_paused``), added to
    the catalogue deliberately by the app that emits it (with its channel in
    asyncapi.draft.yaml)."""
    _OTHER_TYPES.add(event_type)


def types() -> set[str]:
    """The event type catalogue: every outcome of every registered workflow kind, and the
    other events apps registered."""
    return {f"node.{kind}.{what}" for kind in _KINDS for what in OUTCOMES} | _OTHER_TYPES


def _check(event_type: str) -> None:
    if event_type not in types():
        raise ValueError(f"unknown event type {event_type}")
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("events.emit must run inside the state change's transaction")


def emit_other(event_type: str, payload: dict[str, Any]) -> OutboxEvent:
    """One registered event that is not a workflow's outcome, with its own payload, in the
    caller's transaction."""
    return emit_others(event_type, [payload])[0]


def emit_others(event_type: str, payloads: Sequence[dict[str, Any]]) -> list[OutboxEvent]:
    """Events of one registered type in one statement, in the caller's transaction."""
    _check(event_type)
    rows = OutboxEvent.objects.bulk_create(
        [OutboxEvent(type=event_type, payload=p) for p in payloads]
    )
    transaction.on_commit(_nudge, robust=True)
    return rows


def emit(kind: str, what: str, wf: WorkflowRow, **extra: Any) -> OutboxEvent:
    """Write one event for workflow ``wf`` in the caller's transaction."""
    return emit_many(kind, what, [wf], **extra)[0]


def emit_many(
    kind: str, what: str, workflows: Sequence[WorkflowRow], **extra: Any
) -> list[OutboxEvent]:
    """One event per workflow (a batch), written in one statement in the caller's transaction,
    with a single publisher nudge after commit."""
    event_type = f"node.{kind}.{what}"
    _check(event_type)
    rows = OutboxEvent.objects.bulk_create(
        [OutboxEvent(type=event_type, payload=_payload(kind, wf, extra)) for wf in workflows],
        batch_size=1000,
    )
    transaction.on_commit(_nudge, robust=True)
    return rows


def _payload(kind: str, wf: WorkflowRow, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "site_id": wf.site_id,
        "workflow_kind": kind,
        "workflow_id": wf.pk,
        "node_id": getattr(wf, "node_id", None),
        "maas_system_id": getattr(wf, "maas_system_id", "") or None,
        "hostname": wf.hostname,
        "correlation_id": wf.correlation_id,
        "state": wf.state,
        "stage": wf.stage,
        "attempt": wf.attempt,
        **extra,
    }


_nudges = Coalescer(0.5)


def _nudge() -> None:
    """Ask a worker to publish after commit; a burst of commits asks once or twice."""
    countdown = _nudges.countdown("publish")
    if countdown is not None:
        publish_events.apply_async(countdown=countdown)


def envelope(event: OutboxEvent) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "type": event.type,
        "time": event.occurred_at.isoformat(),
        **event.payload,
    }


@functools.cache
def _redis(url: str) -> redis.Redis:
    """One client (and connection pool) per process and URL."""
    return redis.Redis.from_url(url)


def _send(event: OutboxEvent) -> None:
    sink = settings.EVENT_SINK
    body = envelope(event)
    if sink == "redis":
        _redis(str(settings.EVENT_REDIS_URL)).xadd(
            settings.EVENT_STREAM,
            {"id": body["id"], "type": body["type"], "event": json.dumps(body)},
        )
    elif sink == "webhook":
        response = requests.post(str(settings.EVENT_WEBHOOK_URL), json=body, timeout=(3, 10))
        response.raise_for_status()
    else:
        log.info("event %s", body["type"], extra={"event": body})


def publish(limit: int = 500, batch: int = 100) -> int:
    """Publish unpublished events oldest first, ``batch`` at a time: each batch is taken under
    a row lock (concurrent publishers skip rows another one holds), sent in order, and the sent
    ones are marked in one statement. A send that fails stops the run: what was sent before it
    is marked, the failure is recorded on the event, and the next run starts there. A process
    that dies mid-batch republishes at most that batch; consumers de-duplicate by ``id``."""
    sent = 0
    while sent < limit:
        with transaction.atomic():
            rows = list(
                OutboxEvent.objects.select_for_update(skip_locked=True)
                .filter(published_at__isnull=True)
                .order_by("occurred_at")[: min(batch, limit - sent)]
            )
            done: list[Any] = []
            failed = False
            for event in rows:
                try:
                    _send(event)
                except Exception as exc:
                    OutboxEvent.objects.filter(pk=event.pk).update(
                        attempts=event.attempts + 1,
                        last_error=f"{type(exc).__name__}: {exc}"[:500],
                    )
                    log.warning("publishing %s failed: %s", event.id, type(exc).__name__)
                    failed = True
                    break
                done.append(event.pk)
            OutboxEvent.objects.filter(pk__in=done).update(
                published_at=timezone.now(), attempts=F("attempts") + 1, last_error=""
            )
        sent += len(done)
        if failed or len(rows) < batch:
            break
    return sent


@shared_task(name="events.publish")
def publish_events() -> int:
    """Beat runs this every few seconds; a commit that wrote events nudges it at once."""
    return publish()


def outbox_gauge() -> list[GaugeMetricFamily]:
    """Outbox lag for the metrics endpoint: how many events wait to be published and how old
    the oldest is (one query)."""
    agg = OutboxEvent.objects.filter(published_at__isnull=True).aggregate(
        n=Count("id"), oldest=Min("occurred_at")
    )
    oldest = agg["oldest"]
    age = max((timezone.now() - oldest).total_seconds(), 0.0) if oldest else 0.0
    return [
        GaugeMetricFamily(OUTBOX_UNPUBLISHED, "Domain events not yet published", value=agg["n"]),
        GaugeMetricFamily(
            OUTBOX_OLDEST_AGE, "Age of the oldest unpublished domain event (0: none)", value=age
        ),
    ]

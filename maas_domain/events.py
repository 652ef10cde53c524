"""Domain events (seed 000 §8): written to the outbox in the state change's transaction and
published at least once by ``events.publish`` to the configured sink.

Sinks (``MAASCP_EVENT_SINK``): ``redis`` (an XADD to a stream; default when the broker is Redis),
``webhook`` (POST JSON, retried on the next run when it fails), ``log`` (a JSON log line; the
embedded default). Each event carries a unique id, its type, time, and the ids of site,
workflow, node, MAAS system and correlation; ``asyncapi.draft.yaml`` describes them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import requests
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from maas_domain.models import OutboxEvent

log = logging.getLogger("maas_domain.events")
TYPES = {
    f"node.{kind}.{what}"
    for kind in ("onboarding", "decommission")
    for what in ("started", "completed", "failed", "manual_intervention_required")
}


def emit(kind: str, what: str, wf: Any, **extra: Any) -> OutboxEvent:
    """Write one event for workflow ``wf`` in the caller's transaction."""
    return emit_many(kind, what, [wf], **extra)[0]


def emit_many(kind: str, what: str, workflows: list[Any], **extra: Any) -> list[OutboxEvent]:
    """One event per workflow (a batch), written in one statement in the caller's transaction,
    with a single publisher nudge after commit."""
    event_type = f"node.{kind}.{what}"
    if event_type not in TYPES:
        raise ValueError(f"unknown event type {event_type}")
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("events.emit must run inside the state change's transaction")
    rows = OutboxEvent.objects.bulk_create(
        [OutboxEvent(type=event_type, payload=_payload(kind, wf, extra)) for wf in workflows],
        batch_size=1000,
    )
    transaction.on_commit(_nudge, robust=True)
    return rows


def _payload(kind: str, wf: Any, extra: dict[str, Any]) -> dict[str, Any]:
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


def _nudge() -> None:
    from maas_domain.tasks import publish_events

    publish_events.delay()


def envelope(event: OutboxEvent) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "type": event.type,
        "time": event.occurred_at.isoformat(),
        **event.payload,
    }


def _send(event: OutboxEvent) -> None:
    sink = settings.EVENT_SINK
    body = envelope(event)
    if sink == "redis":
        import redis

        client = redis.Redis.from_url(str(settings.EVENT_REDIS_URL))
        client.xadd(
            settings.EVENT_STREAM,
            {"id": body["id"], "type": body["type"], "event": json.dumps(body)},
        )
    elif sink == "webhook":
        response = requests.post(str(settings.EVENT_WEBHOOK_URL), json=body, timeout=(3, 10))
        response.raise_for_status()
    else:
        log.info("event %s", body["type"], extra={"event": body})


def publish(limit: int = 500) -> int:
    """Publish unpublished events oldest first; each is marked in its own transaction, so a
    crash mid-batch republishes at most the event in flight. Concurrent publishers skip rows
    another one holds."""
    sent = 0
    for _ in range(limit):
        with transaction.atomic():
            event = (
                OutboxEvent.objects.select_for_update(skip_locked=True)
                .filter(published_at__isnull=True)
                .order_by("occurred_at")
                .first()
            )
            if event is None:
                break
            try:
                _send(event)
            except Exception as exc:
                OutboxEvent.objects.filter(pk=event.pk).update(
                    attempts=event.attempts + 1, last_error=f"{type(exc).__name__}: {exc}"[:500]
                )
                log.warning("publishing %s failed: %s", event.id, type(exc).__name__)
                break
            OutboxEvent.objects.filter(pk=event.pk).update(
                published_at=timezone.now(), attempts=event.attempts + 1, last_error=""
            )
            sent += 1
    return sent

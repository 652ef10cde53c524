"""Domain events: written with the state change, published at least once, shaped as
asyncapi.draft.yaml says, each exactly once in the stream even when a publisher crashes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import transaction

from maas_domain import events
from maas_domain.models import OutboxEvent
from maas_simulator.node import NodeSide
from onboarding.models import Onboarding
from onboarding.services import onboarding_start
from tests.factories import make_onboarding, make_site
from tests.support.asyncapi import DOC, validate
from tests.support.flows import Flow, wait_until


def stream() -> list[dict[str, Any]]:
    client = redis.Redis.from_url(str(settings.EVENT_REDIS_URL))
    return [json.loads(fields[b"event"]) for _, fields in client.xrange(settings.EVENT_STREAM)]


def test_every_event_type_has_a_channel() -> None:
    assert set(DOC["channels"]) == events.types()


@pytest.mark.django_db(transaction=True)
def test_emit_refuses_to_run_outside_a_transaction() -> None:
    wf = make_onboarding(make_site())
    with pytest.raises(RuntimeError, match="transaction"):
        events.emit("onboarding", "started", wf)
    with transaction.atomic(), pytest.raises(ValueError, match="unknown event type"):
        events.emit("onboarding", "exploded", wf)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_onboarding_events_exactly_once_each_even_when_the_publisher_crashes(
    flow: Flow, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow.sim.model.node_side = NodeSide()
    real_send = events._send
    calls = {"n": 0}

    def crashing(event: OutboxEvent) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the publisher dies in the middle of its batch
            raise ConnectionError("publisher crashed")
        real_send(event)

    monkeypatch.setattr(events, "_send", crashing)
    flow.sim.add(hostname="e01", status="ready", power_address="10.14.0.1")
    flow.sim.add(
        hostname="e02",
        status="ready",
        power_address="10.14.0.2",
        faults={"deploy_curtin_failure": [1]},
    )
    ok = onboarding_start(
        actor=flow.admin,
        site_id=flow.site.pk,
        profile_id=flow.profile.pk,
        sku_id=flow.sku.pk,
        hostname="e01",
        ipmi_ip="10.14.0.1",
    )
    bad = onboarding_start(
        actor=flow.admin,
        site_id=flow.site.pk,
        profile_id=flow.profile.pk,
        sku_id=flow.sku.pk,
        hostname="e02",
        ipmi_ip="10.14.0.2",
    )
    for pk in (ok.pk, bad.pk):
        wait_until(
            lambda pk=pk: Onboarding.objects.get(pk=pk).state in ("succeeded", "failed"),
            timeout=60,
            what="onboardings to finish",
        )
    assert calls["n"] >= 2
    monkeypatch.setattr(events, "_send", real_send)
    # the next publisher runs (scheduled, or nudged after commit) drain what the crash left
    wait_until(
        lambda: (
            events.publish() >= 0
            and not OutboxEvent.objects.filter(published_at__isnull=True).exists()
        ),
        what="the outbox to drain",
    )
    published = stream()
    ids = [e["id"] for e in published]
    assert len(ids) == len(set(ids)), "an event reached the stream twice"
    by_workflow: dict[int, list[str]] = {}
    for event in published:
        validate(event)
        by_workflow.setdefault(event["workflow_id"], []).append(event["type"])
    assert by_workflow[ok.pk] == ["node.onboarding.started", "node.onboarding.completed"]
    assert by_workflow[bad.pk] == ["node.onboarding.started", "node.onboarding.failed"]
    failed = next(e for e in published if e["type"] == "node.onboarding.failed")
    assert failed["failure_class"] == "curtin"
    assert failed["correlation_id"] == Onboarding.objects.get(pk=bad.pk).correlation_id
    assert OutboxEvent.objects.filter(last_error__contains="publisher crashed").count() == 0

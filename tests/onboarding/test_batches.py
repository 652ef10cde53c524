"""Batch canary and failure budget (docs/onboarding.md, "Batches: canary and failure budget"):
admission holds back what must wait, the hooks where a workflow ends pause the batch, and
operators resume or cancel a whole batch through the API. The engine is driven directly here;
test_batch_flows.py runs whole batches."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from config import celery_app
from maas_domain.models import AuditLog, OutboxEvent
from onboarding import budget
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding, OnboardingBatch
from tests.factories import make_profile, make_site, make_sku
from tests.support.asyncapi import validate
from workflows.scheduling import admit

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/onboardings/batches"


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(celery_app, "send_task", lambda *a, **kw: None)


def batch_of(n: int, admin_user: Any, **policy: Any) -> OnboardingBatch:
    site = make_site(
        health="healthy",
        last_probe_at=timezone.now(),
        policy={"max_concurrent_workflows": 50, **policy},
    )
    return onboarding_start_batch(
        actor=admin_user,
        site_id=site.pk,
        profile_id=make_profile(site).pk,
        sku_id=make_sku().pk,
        rows=[{"hostname": f"b{i:02d}", "ipmi_ip": f"10.70.0.{i + 1}"} for i in range(n)],
    )


def states(batch: OnboardingBatch) -> dict[str, str]:
    return dict(Onboarding.objects.filter(batch=batch).values_list("hostname", "state"))


def end(wf: Onboarding, state: str, **fields: Any) -> None:
    """Record an outcome the way the engine does: the row, then the kind's hook, one
    transaction."""
    with transaction.atomic():
        Onboarding.objects.filter(pk=wf.pk).update(state=state, **fields)
        wf.refresh_from_db()
        (budget.after_success if state == "succeeded" else budget.after_failure)(wf)


def test_a_batch_takes_its_canary_and_budget_from_policy(admin_user: Any) -> None:
    batch = batch_of(
        5,
        admin_user,
        batch_canary_size=2,
        batch_pause_after_failures=3,
        batch_pause_failure_percent=40,
    )
    assert (batch.canary_size, batch.pause_after_failures, batch.pause_failure_percent) == (
        2,
        3,
        40,
    )
    canaries = Onboarding.objects.filter(batch=batch, batch_canary=True)
    assert sorted(canaries.values_list("hostname", flat=True)) == ["b00", "b01"]


def test_only_the_canary_starts_until_all_of_it_succeeded(
    admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    batch = batch_of(4, admin_user, batch_canary_size=2)
    lone = Onboarding.objects.exclude(batch=batch)
    assert not lone.exists()
    assert admit(batch.site_id) == 2
    assert states(batch) == {"b00": "running", "b01": "running", "b02": "pending", "b03": "pending"}
    end(Onboarding.objects.get(hostname="b00"), "succeeded")
    batch.refresh_from_db()
    assert batch.canary_passed_at is None  # one canary is still running
    assert admit(batch.site_id) == 0
    end(Onboarding.objects.get(hostname="b01"), "succeeded")
    batch.refresh_from_db()
    assert batch.canary_passed_at is not None
    assert admit(batch.site_id) == 2
    assert set(states(batch).values()) == {"succeeded", "running"}


def test_a_failed_canary_pauses_the_batch_with_its_reason_and_an_event(admin_user: Any) -> None:
    batch = batch_of(3, admin_user, batch_canary_size=1)
    admit(batch.site_id)
    canary = Onboarding.objects.get(hostname="b00")
    end(canary, "failed", failure_class="curtin", reason="deploy failed (curtin): sgdisk")
    batch.refresh_from_db()
    assert batch.state == "paused"
    assert "canary b00" in batch.paused_reason and "curtin" in batch.paused_reason
    event = OutboxEvent.objects.get(type="node.onboarding.batch_paused")
    envelope = {"id": str(event.id), "type": event.type, "time": event.occurred_at.isoformat()}
    validate({**envelope, **event.payload})
    assert (event.payload["batch_id"], event.payload["failed"]) == (batch.pk, 1)
    assert AuditLog.objects.filter(action="onboarding.batch_paused", actor_name="system").exists()
    assert admit(batch.site_id) == 0
    assert states(batch) == {"b00": "failed", "b01": "pending", "b02": "pending"}


@pytest.mark.parametrize(
    ("policy", "pause_at"),
    [
        ({"batch_pause_after_failures": 2}, 2),
        ({"batch_pause_failure_percent": 50}, 3),  # 3 of 6
        ({"batch_pause_after_failures": 0, "batch_pause_failure_percent": 0}, None),
    ],
)
def test_the_failure_budget_pauses_admission_by_count_or_share(
    admin_user: Any, policy: dict[str, int], pause_at: int | None
) -> None:
    batch = batch_of(6, admin_user, max_concurrent_workflows=5, **policy)
    admit(batch.site_id)
    for i in range(1, 6):
        end(Onboarding.objects.get(hostname=f"b{i - 1:02d}"), "failed", failure_class="curtin")
        batch.refresh_from_db()
        paused = batch.state == "paused"
        assert paused == (pause_at is not None and i >= pause_at), i
        if paused:
            assert "failure budget spent" in batch.paused_reason
            assert OutboxEvent.objects.filter(type="node.onboarding.batch_paused").count() == 1
    assert (admit(batch.site_id) == 0) == (pause_at is not None)


def test_a_workflow_frozen_for_an_operator_counts_against_the_budget(admin_user: Any) -> None:
    batch = batch_of(4, admin_user, batch_pause_after_failures=1)
    admit(batch.site_id)
    end(Onboarding.objects.get(hostname="b00"), "manual_intervention", reason="erase stuck")
    batch.refresh_from_db()
    assert batch.state == "paused"


# -- operators: resume, cancel ---------------------------------------------------------------------


def test_resume_lifts_the_pause_and_counts_the_budget_from_there(
    admin_user: Any, api: APIClient
) -> None:
    batch = batch_of(4, admin_user, batch_canary_size=1, batch_pause_after_failures=1)
    admit(batch.site_id)
    end(Onboarding.objects.get(hostname="b00"), "failed", failure_class="curtin")
    refused = api.post(f"{URL}/{batch.pk}/resume", {"force": True}, format="json")
    assert refused.status_code == 400 and "force" in refused.json()["fields"]
    answer = api.post(f"{URL}/{batch.pk}/resume", {"reason": "bad disk on b00"}, format="json")
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["state"], body["failure_budget"]["failures_since_resume"]) == ("running", 0)
    assert body["canary"]["passed_at"] is not None  # the operator vouched for the batch
    row = AuditLog.objects.get(action="onboarding.batch_resume")
    assert (row.reason, row.before["state"], row.after["state"]) == (
        "bad disk on b00",
        "paused",
        "running",
    )
    assert admit(batch.site_id) == 3
    again = api.post(f"{URL}/{batch.pk}/resume", {}, format="json")
    assert again.status_code == 409
    assert api.post(f"{URL}/999999/resume", {}, format="json").status_code == 404


def test_cancel_stops_a_whole_batch_and_leaves_frozen_ones_to_their_operator(
    admin_user: Any, api: APIClient
) -> None:
    batch = batch_of(4, admin_user, max_concurrent_workflows=2)
    admit(batch.site_id)
    Onboarding.objects.filter(hostname="b01").update(state="manual_intervention")
    answer = api.post(f"{URL}/{batch.pk}/cancel", {"reason": "wrong rack"}, format="json")
    assert answer.status_code == 202, answer.json()
    body = answer.json()
    assert body["state"] == "cancelled"
    frozen = Onboarding.objects.get(hostname="b01")
    assert body["left_for_operator"] == [frozen.pk]
    assert states(batch) == {
        "b00": "cancelling",  # live: its cancel stage compensates in MAAS
        "b01": "manual_intervention",
        "b02": "cancelled",
        "b03": "cancelled",
    }
    assert AuditLog.objects.filter(action="onboarding.cancel").count() == 3
    assert AuditLog.objects.get(action="onboarding.batch_cancel").reason == "wrong rack"
    assert api.post(f"{URL}/{batch.pk}/cancel", {}, format="json").status_code == 409
    assert api.get(f"{URL}/{batch.pk}").json()["state"] == "cancelled"


def test_onboardings_outside_batches_are_never_held_back(admin_user: Any) -> None:
    from tests.factories import make_onboarding

    batch = batch_of(2, admin_user, batch_canary_size=1)
    single = make_onboarding(batch.site, hostname="single01")
    assert admit(batch.site_id) == 2
    single.refresh_from_db()
    assert single.state == "running"

"""Whole decommission workflows: real Celery worker on Redis, PostgreSQL, the MAAS simulator
(its node side enrolls a redeployed machine) and the live server. MAAS calls are asserted
through the simulator's counters, never through a stubbed client."""

from __future__ import annotations

from typing import Any

import pytest

from decommission.models import Decommission
from maas_domain import events
from maas_domain.models import Allocation, AuditLog, Node, OutboxEvent
from maas_simulator.node import NodeSide
from onboarding.models import Onboarding
from tests.support.asyncapi import validate
from tests.support.flows import Flow, active_node, decommission, settle_decommission

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def kinds(wf: Decommission) -> list[str]:
    return list(wf.events.order_by("at", "id").values_list("kind", flat=True))


def completed(wf: Decommission) -> list[str]:
    return list(
        wf.events.filter(kind="stage.completed")
        .order_by("at", "id")
        .values_list("stage", flat=True)
    )


def outbox(wf: Any) -> list[str]:
    """The decommission's events, each checked against asyncapi.draft.yaml."""
    rows = OutboxEvent.objects.filter(
        payload__workflow_kind="decommission", payload__workflow_id=wf.pk
    )
    for row in rows:
        validate(events.envelope(row))
    return sorted(row.type for row in rows)


def policy(flow: Flow, **values: Any) -> None:
    flow.site.policy = {**flow.site.policy, **values}
    flow.site.save(update_fields=["policy"])


def test_reimage_redeploys_through_the_onboarding_stages(flow: Flow, node_side: NodeSide) -> None:
    node = active_node(flow, "r01", "10.40.0.1")
    sid = node.maas_system_id
    wf = settle_decommission(decommission(flow, node, "reimage").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason, kinds(wf))
    assert completed(wf) == ["preflight", "drain", "release", "redeploy", "complete"]
    assert (wf.erase_mode, wf.erased, wf.fallback_used) == ("quick", True, False)
    # release with the policy's erase, then the onboarding's own deploy: once each
    assert flow.sim.mutations(sid) == ["machine.release", "machine.deploy"]
    release = next(e for e in wf.events.filter(kind="maas.action") if "release" in e.message)
    assert release.data["erase_mode"] == "quick"
    child = Onboarding.objects.get(parent_kind="decommission", parent_id=wf.pk)
    assert (child.state, child.parent_kind, child.parent_id) == ("succeeded", "decommission", wf.pk)
    assert child.enrolled_attempt == child.token_attempt == 1
    assert list(child.events.filter(kind="stage.completed").values_list("stage", flat=True)) == [
        "conformance",  # judged again before it is handed back (docs/hardware.md)
        "payload",
        "deploy",
        "hardware_sync",
        "enrollment",
        "complete",
    ]
    assert [c["status"] for c in node_side.calls] == [200]  # the redeployed node enrolled
    node.refresh_from_db()
    assert node.state == "active"
    assert flow.sim.model.machines[sid].status.label == "Deployed"
    assert outbox(wf) == ["node.decommission.completed", "node.decommission.started"]
    assert AuditLog.objects.filter(
        action="decommission.start.reimage", target_id=str(wf.pk)
    ).exists()


def test_the_reimage_child_starts_like_any_onboarding(flow: Flow, node_side: NodeSide) -> None:
    """The redeploy onboarding is started the one way every workflow is: its first timeline
    entry, an audit row, and a ``node.onboarding.started`` event before its ``completed``."""
    node = active_node(flow, "r02", "10.40.0.2")
    wf = settle_decommission(decommission(flow, node, "reimage").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason, kinds(wf))
    child = Onboarding.objects.get(parent_kind="decommission", parent_id=wf.pk)
    rows = list(
        OutboxEvent.objects.filter(
            payload__workflow_kind="onboarding", payload__workflow_id=child.pk
        ).order_by("occurred_at")
    )
    for row in rows:
        validate(events.envelope(row))
    assert [r.type for r in rows] == ["node.onboarding.started", "node.onboarding.completed"]
    started = rows[0].payload
    assert (started["parent_kind"], started["parent_id"], started["stage"]) == (
        "decommission",
        wf.pk,
        "conformance",
    )
    first = child.events.order_by("at", "id").first()
    assert first is not None and first.kind == "workflow.created"
    audit = AuditLog.objects.get(action="onboarding.start", target_id=str(child.pk))
    assert audit.reason == f"reimage of decommission {wf.pk}"


def test_full_decommission_deletes_the_machine_and_retires_the_node(flow: Flow) -> None:
    node = active_node(flow, "f01", "10.40.0.2")
    sid = node.maas_system_id
    wf = settle_decommission(decommission(flow, node, "full", reason="end of life").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason, kinds(wf))
    assert completed(wf) == ["preflight", "drain", "release", "retire", "complete"]
    assert flow.sim.mutations(sid) == ["machine.release", "machine.delete"]
    assert sid not in flow.sim.model.machines
    node.refresh_from_db()
    assert node.state == "retired"
    assert Node.objects.filter(pk=node.pk).exists()  # history kept
    assert wf.machine_deleted and wf.erased is True


def test_full_decommission_keeps_the_machine_ready_when_policy_says_so(flow: Flow) -> None:
    policy(flow, delete_machine_on_full_decommission=False, erase_mode="secure")
    node = active_node(flow, "f02", "10.40.0.3")
    wf = settle_decommission(decommission(flow, node, "full").pk)
    assert wf.state == "succeeded", wf.reason
    assert flow.sim.mutations(node.maas_system_id) == ["machine.release"]
    assert flow.sim.model.machines[node.maas_system_id].status.label == "Ready"
    assert wf.events.filter(message__contains="secure erase").exists()


def test_storage_cleanup_erases_and_returns_the_node_to_its_pool(flow: Flow) -> None:
    node = active_node(flow, "s01", "10.40.0.4")
    wf = settle_decommission(decommission(flow, node, "storage_cleanup").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason, kinds(wf))
    assert completed(wf) == ["preflight", "drain", "release", "complete"]
    assert wf.erased is True
    node.refresh_from_db()
    assert node.state == "active"
    assert flow.sim.model.machines[node.maas_system_id].status.label == "Ready"


def test_a_ready_machine_is_allocated_so_that_maas_can_erase_it(flow: Flow) -> None:
    node = active_node(flow, "s02", "10.40.0.5", status="ready")
    wf = settle_decommission(decommission(flow, node, "storage_cleanup").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason, kinds(wf))
    assert flow.sim.mutations() == ["machines.allocate", "machine.release"]
    assert wf.erased is True


def test_erase_failure_with_fallback_leaves_the_machine_broken_never_ready(flow: Flow) -> None:
    """The fallback (allowed explicitly) stops the failed erase and marks the machine Broken:
    it is out of MAAS's Ready pool, so nothing that allocates from MAAS can hand its unerased
    disks to the next tenant (docs/decommission.md)."""
    policy(flow, release_fallback_allowed=True)
    node = active_node(flow, "e01", "10.40.0.6", faults={"erase_failure": [1]})
    sid = node.maas_system_id
    wf = settle_decommission(decommission(flow, node, "reimage").pk)
    assert (wf.state, wf.stage, wf.failure_class) == (
        "manual_intervention",
        "release",
        "erase_failed",
    )
    assert "disks NOT erased" in wf.reason and "Broken" in wf.reason
    assert (wf.erased, wf.fallback_used) == (False, True)
    assert flow.sim.mutations(sid) == ["machine.release", "machine.mark_broken"]
    assert flow.sim.model.machines[sid].status.label == "Broken"
    steps = [e.message for e in wf.events.filter(kind="fallback.step").order_by("at", "id")]
    assert steps[0].startswith("abort: nothing in flight")
    assert steps[1].startswith("mark-broken") and "MAAS answered Broken" in steps[1]
    assert len(steps) == 2  # no mark-fixed, no release without erase
    node.refresh_from_db()
    assert node.state == "quarantined"  # never returned to a pool
    assert not Onboarding.objects.filter(parent_id=wf.pk).exists()  # and never redeployed
    assert "node.decommission.manual_intervention_required" in outbox(wf)


def test_erase_failure_fails_closed_by_default(flow: Flow) -> None:
    """The fallback is off unless a site or profile allows it."""
    assert "release_fallback_allowed" not in flow.site.policy
    node = active_node(flow, "e02", "10.40.0.7", faults={"erase_failure": [1]})
    wf = settle_decommission(decommission(flow, node, "storage_cleanup").pk)
    assert (wf.state, wf.failure_class) == ("manual_intervention", "erase_failed")
    assert "forbids the no-erase fallback" in wf.reason
    assert flow.sim.mutations(node.maas_system_id) == ["machine.release"]  # nothing else tried
    # our erase runs as a release script: its failure is MAAS's "Releasing failed"
    assert flow.sim.model.machines[node.maas_system_id].status.label == "Releasing failed"
    node.refresh_from_db()
    assert node.state == "quarantined"
    assert wf.erased is False


def test_a_failed_erase_ends_in_the_fallback(flow: Flow) -> None:
    """(A stuck one too, on the policy's own clock: tests/decommission/test_stages.py.)"""
    policy(flow, release_fallback_allowed=True)
    node = active_node(flow, "e03", "10.40.0.8", faults={"erase_failure": [1]})
    wf = settle_decommission(decommission(flow, node, "full").pk)
    assert (wf.state, wf.failure_class) == ("manual_intervention", "erase_failed")
    assert wf.fallback_used
    node.refresh_from_db()
    assert node.state == "quarantined"
    assert node.maas_system_id in flow.sim.model.machines  # not deleted: a human decides
    assert flow.sim.model.machines[node.maas_system_id].status.label == "Broken"


def test_a_stuck_release_fails_with_maas_reason(flow: Flow) -> None:
    policy(flow, erase_mode="none")
    node = active_node(flow, "t01", "10.40.0.9", faults={"release_stuck": True})
    wf = settle_decommission(decommission(flow, node, "full").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "release", "release_failed")
    assert "Releasing failed" in wf.reason or "release" in wf.reason
    assert "node.decommission.failed" in outbox(wf)
    node.refresh_from_db()
    assert node.state == "draining"  # out of the pool until an operator acts


def test_allocations_refuse_or_are_force_released(flow: Flow, api: Any) -> None:
    node = active_node(flow, "a01", "10.40.0.10")
    held = Allocation.objects.create(node=node, holder="tenant-42")
    url = f"/api/v1/admin/nodes/{node.pk}/storage-cleanup"
    refused = api.post(url, {}, format="json")
    assert refused.status_code == 409
    assert refused.json()["allocations"][0]["holder"] == "tenant-42"
    assert not Decommission.objects.exists()
    assert flow.sim.mutations() == []
    forced = api.post(url, {"force_release": True, "reason": "tenant gone"}, format="json")
    assert forced.status_code == 202, forced.content
    held.refresh_from_db()
    assert (held.state, held.release_reason) == ("force_released", "tenant gone")
    audit = AuditLog.objects.get(action="allocation.force_release")
    assert audit.target_id == str(held.pk) and audit.reason == "tenant gone"
    wf = settle_decommission(forced.json()["id"])
    assert wf.state == "succeeded", wf.reason
    assert wf.events.filter(kind="allocation.force_released").count() == 1

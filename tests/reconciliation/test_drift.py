"""Every drift kind, made real in the MAAS simulator: reported by a reconcile run, then resolved
by an operator through the API (audited) or cleared when the condition goes away."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from maas_client.client import MaasClient
from maas_domain.models import AuditLog, MaasSite, Node
from reconciliation.models import DriftRecord, NodeMaasState, ReconcileRun
from tests.factories import make_node, make_onboarding
from tests.reconciliation.conftest import reconcile
from tests.support.maas import Sim

pytestmark = pytest.mark.django_db
DRIFT = "/api/v1/admin/reconciliation/drift"


def records(site: MaasSite, kind: str, **filters: Any) -> list[DriftRecord]:
    return list(DriftRecord.objects.filter(site=site, kind=kind, **filters).order_by("id"))


def one(site: MaasSite, kind: str) -> DriftRecord:
    found = records(site, kind)
    assert len(found) == 1, [(r.kind, r.subject, r.state) for r in found]
    return found[0]


def resolve(api: APIClient, node_id: int, **body: Any) -> Any:
    return api.post(f"{DRIFT}/{node_id}/resolve", body, format="json")


def audits(action: str, rec: DriftRecord) -> list[AuditLog]:
    return list(AuditLog.objects.filter(action=action, target_id=str(rec.pk)))


@pytest.fixture
def deployed(sim: Sim, site: MaasSite) -> tuple[Node, str]:
    """An active node whose machine MAAS shows Deployed (powered on) to our user."""
    sid = sim.add(hostname="gpu-a", status="deployed", power_address="10.10.0.5")
    node = make_node(
        site, hostname="gpu-a", ipmi_ip="10.10.0.5", maas_system_id=sid, state="active"
    )
    return node, sid


def test_a_site_that_matches_maas_has_no_drift(site: MaasSite, deployed: Any) -> None:
    node, sid = deployed
    run = reconcile(site)
    assert (run.state, run.machines_seen, run.nodes_checked, run.drift_opened) == (
        "succeeded",
        1,
        1,
        0,
    )
    state = NodeMaasState.objects.get(node=node)
    assert (state.system_id, state.status_name, state.power_state) == (sid, "Deployed", "on")
    assert state.power_address == "10.10.0.5" and state.last_seen_at is not None


def test_missing_machine_is_reported_acknowledged_with_expiry_and_clears(
    site: MaasSite, deployed: Any, sim: Sim, maas: MaasClient, api: APIClient
) -> None:
    node, sid = deployed
    maas.delete_machine(sid)
    run = reconcile(site)
    rec = one(site, "missing_in_maas")
    assert (rec.state, rec.severity, rec.node_id, rec.system_id) == (
        "open",
        "critical",
        node.pk,
        sid,
    )
    assert run.drift_opened == 1
    assert NodeMaasState.objects.get(node=node).missing_since is not None

    reconcile(site)  # still missing: the same record, seen twice
    rec.refresh_from_db()
    assert (rec.occurrences, rec.state) == (2, "open")

    response = resolve(api, node.pk, action="acknowledge", reason="RMA ticket 12", expires_in=3600)
    assert response.status_code == 200, response.content
    [body] = response.json()["resolved"]
    assert body["state"] == "acknowledged" and body["acknowledged_until"]
    [row] = audits("drift.acknowledge", rec)
    assert row.reason == "RMA ticket 12" and row.actor_name == "ops-admin"
    assert row.before["state"] == "open" and row.after["state"] == "acknowledged"

    # The acknowledgement expires while the machine is still missing: the record reopens.
    DriftRecord.objects.filter(pk=rec.pk).update(acknowledged_until=timezone.now())
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "open"

    sim.add(hostname="gpu-a", system_id=sid, status="deployed", power_address="10.10.0.5")
    run = reconcile(site)
    rec.refresh_from_db()
    assert (rec.state, run.drift_cleared) == ("cleared", 1)
    assert rec.cleared_at is not None and DriftRecord.objects.filter(pk=rec.pk).exists()
    assert NodeMaasState.objects.get(node=node).missing_since is None


def test_status_mismatch_is_adopted_into_our_record(
    site: MaasSite, deployed: Any, sim: Sim, api: APIClient
) -> None:
    node, sid = deployed
    sim.post(f"machines/{sid}/status", {"status": "broken", "power_state": "on"})
    reconcile(site)
    rec = one(site, "status_mismatch")
    assert rec.state == "open" and rec.severity == "critical"
    assert rec.detail["observed"] == "Broken" and rec.detail["expected"] == ["Deployed"]

    response = resolve(api, node.pk, action="adopt", kind="status_mismatch", reason="known bad")
    assert response.status_code == 200, response.content
    rec.refresh_from_db()
    assert (rec.state, rec.resolution) == ("resolved", "adopt")
    [row] = audits("drift.adopt", rec)
    assert row.after["adopted"] == {
        "field": "node_maas_state.accepted_status",
        "from": None,
        "to": 8,
    }
    assert NodeMaasState.objects.get(node=node).accepted_status == 8

    run = reconcile(site)  # MAAS still shows the adopted value: no new drift
    assert run.drift_opened == 0 and len(records(site, "status_mismatch")) == 1
    sim.post(f"machines/{sid}/status", {"status": "ready"})
    reconcile(site)  # a different status is drift again
    assert len(records(site, "status_mismatch", state="open")) == 1


def test_status_mismatch_against_the_open_workflow_stage(sim: Sim, site: MaasSite) -> None:
    sid = sim.add(hostname="gpu-w", status="broken")
    node = make_node(site, hostname="gpu-w", ipmi_ip="10.10.0.7", state="provisioning")
    make_onboarding(
        site,
        node=node,
        hostname="gpu-w",
        state="waiting",
        stage="deploy",
        maas_system_id=sid,
        stage_started_at=timezone.now(),
    )
    reconcile(site)
    rec = one(site, "status_mismatch")
    assert rec.severity == "warning" and "onboarding" in rec.detail["because"]
    sim.post(f"machines/{sid}/status", {"status": "deploying"})
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"


def test_unexpected_power_state_is_marked_for_manual_intervention_then_clears(
    site: MaasSite, deployed: Any, sim: Sim, api: APIClient
) -> None:
    node, sid = deployed
    sim.post(f"machines/{sid}/status", {"status": "deployed", "power_state": "off"})
    reconcile(site)
    rec = one(site, "power_state_unexpected")
    assert rec.detail["observed"] == "off"

    response = resolve(api, node.pk, action="mark-manual-intervention", reason="DC hands")
    assert response.status_code == 200, response.content
    rec.refresh_from_db()
    assert rec.state == "manual_intervention"
    assert len(audits("drift.mark_manual_intervention", rec)) == 1

    reconcile(site)  # still off: the same record stays in manual intervention
    rec.refresh_from_db()
    assert (rec.state, rec.occurrences) == ("manual_intervention", 2)
    sim.post(f"machines/{sid}/status", {"status": "deployed", "power_state": "on"})
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"


def test_hostname_mismatch_adopts_maas_hostname(sim: Sim, site: MaasSite, api: APIClient) -> None:
    sid = sim.add(hostname="gpu-b-renamed", status="deployed", power_address="10.10.0.6")
    node = make_node(
        site, hostname="gpu-b", ipmi_ip="10.10.0.6", maas_system_id=sid, state="active"
    )
    reconcile(site)
    rec = one(site, "hostname_mismatch")
    assert (rec.detail["expected"], rec.detail["observed"]) == ("gpu-b", "gpu-b-renamed")

    response = resolve(api, node.pk, action="adopt")
    assert response.status_code == 200, response.content
    node.refresh_from_db()
    assert node.hostname == "gpu-b-renamed"
    [row] = audits("drift.adopt", rec)
    assert row.after["adopted"] == {
        "field": "node.hostname",
        "from": "gpu-b",
        "to": "gpu-b-renamed",
    }
    run = reconcile(site)
    assert run.drift_opened == 0
    assert not records(site, "hostname_mismatch", state="open")


def test_power_address_mismatch_adopts_maas_address(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    sid = sim.add(hostname="gpu-c", status="deployed", power_address="10.10.0.99")
    node = make_node(
        site, hostname="gpu-c", ipmi_ip="10.10.0.8", maas_system_id=sid, state="active"
    )
    reconcile(site)
    rec = one(site, "power_address_mismatch")
    assert rec.detail == {"expected": "10.10.0.8", "observed": "10.10.0.99"}
    response = resolve(api, node.pk, action="adopt", kind="power_address_mismatch")
    assert response.status_code == 200, response.content
    node.refresh_from_db()
    assert node.ipmi_ip == "10.10.0.99"
    assert len(audits("drift.adopt", rec)) == 1
    reconcile(site)
    assert not records(site, "power_address_mismatch", state="open")


def test_unknown_machine_is_reported_never_adopted_and_clears_when_onboarded(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    sid = sim.add(hostname="stray", status="ready")
    reconcile(site)
    rec = one(site, "unknown_machine")
    assert (rec.severity, rec.node_id, rec.subject) == ("info", None, f"machine:{sid}")
    assert not Node.objects.filter(hostname="stray").exists()  # reported, not adopted

    path = f"{DRIFT}/machines/{sid}/resolve"
    refused = api.post(path, {"action": "adopt"}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "conflict"
    rec.refresh_from_db()
    assert rec.state == "open" and not AuditLog.objects.filter(action__startswith="drift.").exists()

    response = api.post(path, {"action": "acknowledge", "reason": "lab box"}, format="json")
    assert response.status_code == 200, response.content
    assert len(audits("drift.acknowledge", rec)) == 1

    make_node(site, hostname="stray", ipmi_ip="10.10.0.9", maas_system_id=sid, state="registered")
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"


def test_workflow_stuck_past_its_stage_timeout(sim: Sim, site: MaasSite, api: APIClient) -> None:
    sid = sim.add(hostname="gpu-s", status="new", power_address="10.10.0.11")
    sim.post(f"machines/{sid}/status", {"status": "commissioning"})  # and it stays there
    node = make_node(site, hostname="gpu-s", ipmi_ip="10.10.0.11", state="provisioning")
    wf = make_onboarding(
        site,
        node=node,
        hostname="gpu-s",
        ipmi_ip="10.10.0.11",
        state="waiting",
        stage="commission",
        maas_system_id=sid,
        wait_system_id=sid,
        stage_started_at=timezone.now() - timedelta(hours=2),  # timeout 3600 s
    )
    reconcile(site)
    rec = one(site, "workflow_stuck")
    assert (rec.node_id, rec.severity) == (node.pk, "critical")
    assert rec.detail["workflow_kind"] == "onboarding" and rec.detail["workflow_id"] == wf.pk
    assert rec.detail["stage"] == "commission" and rec.detail["stage_timeout"] == 3600
    assert not records(site, "status_mismatch")  # Commissioning is what the stage expects

    response = resolve(api, node.pk, action="acknowledge", kind="workflow_stuck")
    assert response.status_code == 200, response.content
    assert len(audits("drift.acknowledge", rec)) == 1

    type(wf).objects.filter(pk=wf.pk).update(state="failed")  # the workflow ended
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"


def test_leak_allocated_to_our_user_with_no_node_or_workflow(
    sim: Sim, site: MaasSite, maas: MaasClient, api: APIClient
) -> None:
    sid = sim.add(hostname="orphan", status="deployed")
    reconcile(site)
    rec = one(site, "leak")
    assert rec.severity == "critical" and rec.detail["observed"]["owner"] == "admin"
    assert not records(site, "unknown_machine")  # the leak is the more specific report
    response = api.post(f"{DRIFT}/machines/{sid}/resolve", {"action": "acknowledge"}, format="json")
    assert response.status_code == 200
    assert len(audits("drift.acknowledge", rec)) == 1
    assert sim.mutations(sid) == []  # reconciliation never touches MAAS

    maas.release(sid)  # the operator releases it in MAAS
    sim.advance(60)
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"
    assert one(site, "unknown_machine").state == "open"  # a Ready machine we do not know


def test_leak_of_a_node_whose_onboarding_failed(sim: Sim, site: MaasSite) -> None:
    sid = sim.add(hostname="gpu-f", status="allocated")
    node = make_node(site, hostname="gpu-f", ipmi_ip="10.10.0.12", state="provisioning")
    make_onboarding(site, node=node, hostname="gpu-f", state="failed", maas_system_id=sid)
    reconcile(site)
    rec = one(site, "leak")
    assert (rec.node_id, rec.subject) == (node.pk, f"node:{node.pk}")


def test_a_maas_outage_fails_the_run_and_changes_no_drift(
    sim: Sim, site: MaasSite, deployed: Any, maas: MaasClient
) -> None:
    _node, sid = deployed
    maas.delete_machine(sid)
    reconcile(site)
    rec = one(site, "missing_in_maas")
    sim.add(hostname="gpu-a", system_id=sid, status="deployed", power_address="10.10.0.5")
    sim.add(hostname="stray", status="ready")
    sim.faults({"kind": "502", "count": 20, "method": "GET"})
    run = reconcile(site)
    assert run.state == "failed" and run.reason.startswith("MAAS unavailable")
    assert run.maas_errors and run.maas_errors[0]["kind"] == "transient"
    assert (run.drift_opened, run.drift_cleared) == (0, 0)
    rec.refresh_from_db()
    assert rec.state == "open" and rec.occurrences == 1  # not cleared, not counted
    assert not records(site, "unknown_machine")
    assert ReconcileRun.objects.filter(site=site, state="failed").count() == 1


def test_bad_resolution_input_is_400_and_changes_nothing(
    site: MaasSite, deployed: Any, sim: Sim, maas: MaasClient, api: APIClient
) -> None:
    node, sid = deployed
    maas.delete_machine(sid)
    reconcile(site)
    rec = one(site, "missing_in_maas")
    bad: list[dict[str, Any]] = [
        {"action": "forget"},
        {"action": "acknowledge", "expires_in": 0},
        {"action": "acknowledge", "expires_at": "2001-01-01T00:00:00Z"},
        {"action": "adopt", "expires_in": 60},
        {"action": "acknowledge", "expires_in": 60, "expires_at": "2999-01-01T00:00:00Z"},
        {"action": "acknowledge", "kind": "nonsense"},
        {"action": "acknowledge", "colour": "red"},
        {},
    ]
    for body in bad:
        response = resolve(api, node.pk, **body)
        assert response.status_code == 400, (body, response.content)
        assert response.json()["error"] == "validation_error" and response.json()["fields"]
    assert resolve(api, 999999, action="acknowledge").status_code == 404
    nothing = resolve(api, node.pk, action="acknowledge", kind="leak")
    assert nothing.status_code == 409
    assert nothing.json()["active_drift"] == [{"id": rec.pk, "kind": "missing_in_maas"}]
    refused = resolve(api, node.pk, action="adopt")  # missing_in_maas is not adoptable
    assert refused.status_code == 409 and "adoptable_kinds" in refused.json()
    rec.refresh_from_db()
    assert rec.state == "open"
    assert not AuditLog.objects.filter(action__startswith="drift.").exists()


def test_decommission_workflows_are_judged_through_the_engine_registry(
    sim: Sim, site: MaasSite, maas: MaasClient, api: APIClient
) -> None:
    """Reconciliation knows workflow kinds only through the registry (kinds.KINDS): a
    decommission stuck in its release stage is reported, its erase is what the stage expects,
    and a machine its retire stage deleted is not missing."""
    from workflows.kinds import KINDS

    model = KINDS["decommission"].model
    erasing = sim.add(hostname="gpu-d", status="disk_erasing", power_address="10.10.0.21")
    node = make_node(
        site, hostname="gpu-d", ipmi_ip="10.10.0.21", maas_system_id=erasing, state="draining"
    )
    wf = model.objects.create(
        site=site,
        node=node,
        mode="full",
        hostname="gpu-d",
        maas_system_id=erasing,
        correlation_id="t",
        state="waiting",
        stage="release",
        stage_started_at=timezone.now() - timedelta(hours=3),  # release timeout 3600 s
    )
    gone = sim.add(hostname="gpu-e", status="ready", power_address="10.10.0.22")
    other = make_node(
        site, hostname="gpu-e", ipmi_ip="10.10.0.22", maas_system_id=gone, state="draining"
    )
    model.objects.create(
        site=site,
        node=other,
        mode="full",
        hostname="gpu-e",
        maas_system_id=gone,
        correlation_id="t",
        state="running",
        stage="retire",
        stage_started_at=timezone.now(),
    )
    maas.delete_machine(gone)
    reconcile(site)
    rec = one(site, "workflow_stuck")
    assert (rec.node_id, rec.detail["workflow_kind"], rec.detail["stage"]) == (
        node.pk,
        "decommission",
        "release",
    )
    assert not records(site, "status_mismatch") and not records(site, "missing_in_maas")
    response = resolve(api, node.pk, action="mark-manual-intervention", reason="erase hangs")
    assert response.status_code == 200, response.content
    assert len(audits("drift.mark_manual_intervention", rec)) == 1
    model.objects.filter(pk=wf.pk).update(state="failed")
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"

"""Whole onboarding workflows: real Celery worker on Redis, PostgreSQL, the MAAS simulator
(with its node side calling our enrollment endpoint) and the live server."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, Node
from maas_simulator.node import NodeSide
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding
from tests.support.flows import Flow, settle, start, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
STATE_CHANGES = (
    "machine.create",
    "machine.commission",
    "machine.deploy",
    "machine.release",
    "machine.abort",
    "machine.mark_broken",
    "machine.mark_fixed",
    "machines.create",
)


def kinds(wf: Onboarding) -> list[str]:
    return list(wf.events.order_by("at", "id").values_list("kind", flat=True))


def stages_completed(wf: Onboarding) -> list[str]:
    return list(
        wf.events.filter(kind="stage.completed")
        .order_by("at", "id")
        .values_list("stage", flat=True)
    )


def test_single_node_happy_path_discovered_by_ipmi(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    sid = flow.sim.add(hostname="unnamed-node", status="new", power_address="10.10.7.31")
    wf = start(flow, "c07u31", "10.10.7.31")
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason, kinds(wf))
    assert wf.maas_system_id == sid and not wf.created_machine
    assert stages_completed(wf) == [
        "preflight",
        "discover",
        "commission",
        "conformance",
        "storage_pxe",
        "payload",
        "deploy",
        "hardware_sync",
        "enrollment",
        "complete",
    ]
    assert wf.completed_at and wf.enrolled_attempt == wf.attempt == wf.token_attempt == 1
    node = Node.objects.get(onboardings=wf)
    assert (node.state, node.maas_system_id) == ("active", sid)
    assert flow.sim.mutations(sid) == [
        "machine.commission",
        "machine.set_storage_layout",
        "machine.deploy",
    ]
    matched = wf.events.get(kind="discover.matched")
    assert matched.data["matched_by"] == "matched by IPMI address"
    rendered = wf.events.get(kind="payload.rendered")
    assert rendered.data["agent_bootstrap_version"] == wf.agent_bootstrap_version
    assert [c["status"] for c in node_side.calls] == [200]
    assert AuditLog.objects.filter(action="onboarding.start", target_id=str(wf.pk)).count() == 1
    detail = api.get(f"/api/v1/admin/onboardings/{wf.pk}", {"diagnostics": "refresh"}).json()
    assert detail["diagnostics"]["status"] == "Deployed"
    assert any(e["type"] == "Deployed" for e in detail["diagnostics"]["events"])
    assert "Installation finished" in detail["diagnostics"]["installation_output"]


def test_unknown_host_is_created_with_ipmi_credentials(flow: Flow, node_side: NodeSide) -> None:
    wf = settle(start(flow, "c07u50", "10.10.7.50").pk)
    assert wf.state == "succeeded", wf.reason
    assert wf.created_machine
    machine = flow.sim.model.machines[wf.maas_system_id]
    assert machine.hostname == "c07u50"
    assert machine.power_parameters["power_address"] == "10.10.7.50"
    assert machine.power_parameters["power_pass"] == "ipmi-pass"
    assert flow.sim.mutations()[0] == "machines.create"


def test_hostname_match_wins_and_ready_machine_is_not_recommissioned(
    flow: Flow, node_side: NodeSide
) -> None:
    sid = flow.sim.add(hostname="c07u32", status="ready", power_address="10.10.7.99")
    wf = settle(start(flow, "c07u32", "10.10.7.32").pk)
    assert wf.state == "succeeded", wf.reason
    assert wf.maas_system_id == sid
    assert "machine.commission" not in flow.sim.mutations(sid)
    assert wf.events.get(kind="discover.matched").data["matched_by"] == "matched by hostname"


@pytest.mark.parametrize("how", ["hostname", "ipmi"])
def test_ambiguity_fails_closed_with_candidates(flow: Flow, node_side: NodeSide, how: str) -> None:
    flow.sim.model.allow_duplicate_hostnames = True
    if how == "hostname":
        a = flow.sim.add(hostname="c07u33", status="ready", power_address="10.10.8.1")
        b = flow.sim.add(hostname="c07u33", status="new", power_address="10.10.8.2")
    else:
        a = flow.sim.add(hostname="x1", status="ready", power_address="10.10.7.33")
        b = flow.sim.add(hostname="x2", status="new", power_address="10.10.7.33")
    wf = settle(start(flow, "c07u33", "10.10.7.33").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "discover", "ambiguous")
    assert a in wf.reason and b in wf.reason
    assert sorted(wf.events.get(kind="stage.failed").data["candidates"]) == sorted([a, b])
    assert flow.sim.mutations() == []


def test_commissioning_failure_fails_the_stage_with_maas_reason(
    flow: Flow, node_side: NodeSide
) -> None:
    flow.sim.add(
        hostname="c07u34",
        status="new",
        power_address="10.10.7.34",
        faults={"commission_failure": [1]},
    )
    wf = settle(start(flow, "c07u34", "10.10.7.34").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "commission", "commissioning")
    assert "Commissioning failed" in wf.reason
    assert "50-maas-01-commissioning" in wf.reason


def test_pxe_interface_unlinked_is_relinked_to_auto(flow: Flow, node_side: NodeSide) -> None:
    sid = flow.sim.add(
        hostname="c07u35", status="new", power_address="10.10.7.35", faults={"pxe_unlinked": True}
    )
    wf = settle(start(flow, "c07u35", "10.10.7.35").pk)
    assert wf.state == "succeeded", wf.reason
    assert "machine.link_subnet" in [
        m.replace("interface.", "machine.") for m in flow.sim.mutations(sid)
    ] or any(m == "interface.link_subnet" for m in flow.sim.mutations())
    assert wf.events.filter(kind="maas.action", message__contains="relinked PXE interface").exists()


def test_pxe_subnet_missing_fails_early(flow: Flow, node_side: NodeSide) -> None:
    flow.profile.pxe_subnet = "10.99.0.0/24"
    flow.profile.save()
    flow.sim.add(hostname="c07u36", status="ready", power_address="10.10.7.36")
    wf = settle(start(flow, "c07u36", "10.10.7.36").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "storage_pxe", "pxe")
    assert "10.99.0.0/24 does not exist" in wf.reason
    assert "machine.deploy" not in flow.sim.mutations()


def test_preflight_failures_are_named(flow: Flow, node_side: NodeSide) -> None:
    flow.site.ca_bundle_pem = (
        "-----BEGIN CERTIFICATE-----\n{{ ca_placeholder }}\n-----END CERTIFICATE-----\n"
    )
    flow.site.policy = {**flow.site.policy, "roce_phase2_enabled": True}
    flow.site.save()
    wf = settle(start(flow, "c07u37", "10.10.7.37").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "preflight", "preflight")
    assert "ca_bundle_pem: A CERTIFICATE block does not parse" in wf.reason
    assert "no RoCE assignment" in wf.reason
    assert flow.sim.mutations() == []


def test_datasource_failure_once_recovers_with_one_redeploy(
    flow: Flow, node_side: NodeSide
) -> None:
    sid = flow.sim.add(
        hostname="c07u38",
        status="ready",
        power_address="10.10.7.38",
        faults={"deploy_datasource_failure": [1]},
    )
    wf = settle(start(flow, "c07u38", "10.10.7.38").pk)
    assert wf.state == "succeeded", wf.reason
    assert flow.sim.mutations(sid) == [
        "machine.set_storage_layout",
        "machine.deploy",
        "machine.release",
        "machine.deploy",
    ]
    decision = wf.events.get(kind="retry.decision", stage="deploy")
    assert decision.data["classification"] == "datasource" and decision.data["retry"] is True


def test_datasource_failure_twice_fails_with_its_class(flow: Flow, node_side: NodeSide) -> None:
    flow.sim.add(
        hostname="c07u39",
        status="ready",
        power_address="10.10.7.39",
        faults={"deploy_datasource_failure": [1, 2]},
    )
    wf = settle(start(flow, "c07u39", "10.10.7.39").pk)
    assert (wf.state, wf.failure_class) == ("failed", "datasource")
    decisions = list(wf.events.filter(kind="retry.decision").values_list("data", flat=True))
    assert [d["retry"] for d in decisions] == [True, False]


def test_curtin_failure_is_not_retried(flow: Flow, node_side: NodeSide) -> None:
    sid = flow.sim.add(
        hostname="c07u40",
        status="ready",
        power_address="10.10.7.40",
        faults={"deploy_curtin_failure": [1]},
    )
    wf = settle(start(flow, "c07u40", "10.10.7.40").pk)
    assert (wf.state, wf.failure_class) == ("failed", "curtin")
    assert flow.sim.mutations(sid).count("machine.deploy") == 1


def test_stale_enrollment_token_is_refused(flow: Flow, node_side: NodeSide) -> None:
    node_side.set("c07u41", mode="bad_token")
    flow.site.policy = {**flow.site.policy, "stage_timeouts": {"enrollment": 10}}
    flow.site.save()
    flow.sim.add(hostname="c07u41", status="ready", power_address="10.10.7.41")
    wf = settle(start(flow, "c07u41", "10.10.7.41").pk)
    assert [c["status"] for c in node_side.calls] == [403]
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "enrollment", "timeout")
    assert wf.events.filter(kind="enrollment.refused").count() == 1
    assert Node.objects.get(onboardings=wf).state == "provisioning"


def test_token_is_accepted_once(flow: Flow, node_side: NodeSide) -> None:
    node_side.set("c07u42", repeat=2)
    flow.sim.add(hostname="c07u42", status="ready", power_address="10.10.7.42")
    wf = settle(start(flow, "c07u42", "10.10.7.42").pk)
    assert wf.state == "succeeded"
    wait_until(lambda: len(node_side.calls) == 2, what="the replayed enrollment")
    assert [c["status"] for c in node_side.calls] == [200, 403]


def test_batch_of_50_with_concurrency_limit(flow: Flow, node_side: NodeSide) -> None:
    flow.site.policy = {**flow.site.policy, "max_concurrent_workflows": 5}
    flow.site.save()
    rows = []
    for i in range(50):
        flow.sim.add(hostname=f"gpu{i:03d}", status="new", power_address=f"10.60.0.{i + 1}")
        rows.append({"hostname": f"gpu{i:03d}", "ipmi_ip": f"10.60.0.{i + 1}"})
    batch = onboarding_start_batch(
        actor=flow.admin,
        site_id=flow.site.pk,
        profile_id=flow.profile.pk,
        sku_id=flow.sku.pk,
        rows=rows,
    )
    peak = 0

    def done() -> bool:
        nonlocal peak
        active = Onboarding.objects.filter(batch=batch, state__in=("running", "waiting")).count()
        peak = max(peak, active)
        return not Onboarding.objects.filter(
            batch=batch, state__in=("pending", "running", "waiting")
        ).exists()

    wait_until(done, timeout=120, what="batch of 50")
    states = list(Onboarding.objects.filter(batch=batch).values_list("state", flat=True))
    assert states.count("succeeded") == 50
    assert 1 <= peak <= 5
    assert Node.objects.filter(state="active").count() == 50


def test_hardware_sync_required_deploys_with_sync_and_waits_for_the_seed(
    flow: Flow, node_side: NodeSide
) -> None:
    flow.site.policy = {**flow.site.policy, "hardware_sync_required": True}
    flow.site.save()
    sid = flow.sim.add(hostname="c07u43", status="ready", power_address="10.10.7.43")
    wf = settle(start(flow, "c07u43", "10.10.7.43").pk)
    assert wf.state == "succeeded", wf.reason
    assert flow.sim.model.machines[sid].enable_hw_sync is True
    completed = wf.events.get(kind="stage.completed", stage="hardware_sync")
    assert "hardware sync seeded" in completed.message


def test_node_side_told_through_the_control_endpoint_to_stay_silent(
    flow: Flow, node_side: NodeSide
) -> None:
    import requests

    answer = requests.post(
        flow.sim.control + "node-side", json={"hostname": "c07u44", "mode": "silent"}, timeout=5
    )
    assert answer.status_code == 200
    flow.site.policy = {**flow.site.policy, "stage_timeouts": {"enrollment": 5}}
    flow.site.save()
    flow.sim.add(hostname="c07u44", status="ready", power_address="10.10.7.44")
    wf = settle(start(flow, "c07u44", "10.10.7.44").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "enrollment", "timeout")
    assert node_side.calls == []


def test_auto_claim_of_the_sole_new_machine_only_when_policy_allows(
    flow: Flow, node_side: NodeSide
) -> None:
    flow.site.policy = {**flow.site.policy, "auto_claim_new": True}
    flow.site.save()
    sid = flow.sim.add(hostname="enlisted-abc", status="new", power_type="manual")
    wf = settle(start(flow, "c07u45", "10.10.7.45").pk)
    assert wf.state == "succeeded", wf.reason
    assert wf.maas_system_id == sid and not wf.created_machine
    machine = flow.sim.model.machines[sid]
    assert machine.hostname == "c07u45"
    assert machine.power_parameters["power_address"] == "10.10.7.45"
    assert (
        wf.events.get(kind="discover.matched").data["matched_by"]
        == "auto-claimed the only New machine"
    )
    # two unclaimed New machines: fail closed
    flow.sim.add(hostname="enlisted-x", status="new", power_type="manual")
    flow.sim.add(hostname="enlisted-y", status="new", power_type="manual")
    other = settle(start(flow, "c07u46", "10.10.7.46").pk)
    assert (other.state, other.failure_class) == ("failed", "ambiguous")

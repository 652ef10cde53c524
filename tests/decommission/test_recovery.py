"""Recovery verbs on decommissions: the shared verb layer, through the decommission API, against
the simulator and a real worker (and a kill -9 of a worker process during the erase wait)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from decommission.models import Decommission
from maas_domain.models import AuditLog
from tests.support.flows import (
    Flow,
    active_node,
    decommission,
    settle_decommission,
    start,
    wait_until,
)
from tests.support.workers import Workers

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
URL = "/api/v1/admin/decommissions"


def failed_at_release(flow: Flow, host: str, ip: str) -> Decommission:
    """A full decommission whose release never finishes (MAAS fails it: Releasing failed)."""
    flow.site.policy = {**flow.site.policy, "erase_mode": "none"}
    flow.site.save(update_fields=["policy"])
    node = active_node(flow, host, ip, faults={"release_stuck": True})
    wf = settle_decommission(decommission(flow, node, "full").pk)
    assert (wf.state, wf.stage) == ("failed", "release"), wf.reason
    return wf


def fix_machine(flow: Flow, system_id: str) -> None:
    flow.sim.post(f"machines/{system_id}/faults", {"release_stuck": False})


@pytest.mark.parametrize(
    ("verb", "body", "attempt"),
    [
        ("retry", {}, 2),
        ("resume", {}, 1),
        ("rerun", {}, 2),
        ("restart-clean", {"confirm": True}, 2),
        ("adopt", {}, 1),
    ],
)
def test_each_recovery_verb_finishes_a_failed_decommission(
    flow: Flow, api: Any, verb: str, body: dict[str, Any], attempt: int
) -> None:
    wf = failed_at_release(flow, "v01", "10.41.0.1")
    fix_machine(flow, wf.maas_system_id)
    response = api.post(f"{URL}/{wf.pk}/{verb}", {"reason": "BMC fixed", **body}, format="json")
    assert response.status_code == 202, response.content
    wf = settle_decommission(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert wf.attempt == attempt
    assert wf.node.state == "retired"
    assert wf.maas_system_id not in flow.sim.model.machines
    assert wf.events.filter(kind=f"operator.{verb}", actor_name="ops-admin").exists()
    row = AuditLog.objects.get(action=f"decommission.{verb}", target_id=str(wf.pk))
    assert row.before["state"] == "failed" and row.reason == "BMC fixed"
    started = list(wf.events.filter(kind="stage.started").values_list("stage", flat=True))
    expected_first = {"rerun": "preflight", "restart-clean": "reset"}.get(verb, "release")
    assert started[started.index("release") + 1] == expected_first  # where the verb picked up


@pytest.mark.parametrize("verb", ["cancel", "mark-manual-intervention"])
def test_verbs_not_allowed_on_a_failed_decommission_answer_409(
    flow: Flow, api: Any, verb: str
) -> None:
    wf = failed_at_release(flow, "v02", "10.41.0.2")
    response = api.post(f"{URL}/{wf.pk}/{verb}", {}, format="json")
    assert response.status_code == 409
    assert response.json()["current_state"] == "failed"
    assert "retry" in response.json()["allowed_verbs"]
    assert Decommission.objects.get(pk=wf.pk).state == "failed"


def test_dry_run_plans_without_changing_anything(flow: Flow, api: Any) -> None:
    wf = failed_at_release(flow, "v03", "10.41.0.3")
    plan = api.post(f"{URL}/{wf.pk}/retry?dry_run=true", {}, format="json").json()
    assert (plan["dry_run"], plan["from_stage"], plan["attempt"]) == (True, "release", 2)
    assert "release: release (with the policy's erase mode)" in plan["maas_calls"]
    assert any(call.startswith("retire:") for call in plan["maas_calls"])
    assert not any(call.startswith("redeploy:") for call in plan["maas_calls"])  # not this mode
    assert Decommission.objects.get(pk=wf.pk).state == "failed"


def slow_erases(flow: Flow) -> None:
    flow.sim.model.config["node_timeout"] = 600  # MAAS's monitor waits for whatever else runs


def test_cancel_during_the_erase_quarantines_the_node(flow: Flow, api: Any) -> None:
    slow_erases(flow)
    node = active_node(flow, "c01", "10.41.0.4", faults={"release_stuck": True})
    wf = decommission(flow, node, "storage_cleanup")
    wait_until(
        lambda: (
            Decommission.objects.get(pk=wf.pk).state == "waiting"
            and flow.sim.model.machines[node.maas_system_id].status.label == "Releasing"
        ),
        what="the erase wait",
    )
    response = api.post(f"{URL}/{wf.pk}/cancel", {"reason": "wrong node"}, format="json")
    assert response.status_code == 202, response.content
    wf = settle_decommission(wf.pk)
    assert wf.state == "cancelled", wf.reason
    # the erase runs in Releasing, which MAAS cannot abort: nothing more is sent
    assert flow.sim.mutations(node.maas_system_id) == ["machine.release"]
    node.refresh_from_db()
    assert node.state == "quarantined"  # a release was sent: its disks are in doubt


def test_frozen_then_resumed(flow: Flow, api: Any) -> None:
    slow_erases(flow)
    node = active_node(flow, "m01", "10.41.0.5", faults={"release_stuck": True})
    wf = decommission(flow, node, "full")
    wait_until(lambda: Decommission.objects.get(pk=wf.pk).state == "waiting", what="a wait")
    frozen = api.post(f"{URL}/{wf.pk}/mark-manual-intervention", {"reason": "look"}, format="json")
    assert frozen.status_code == 202
    assert frozen.json()["allowed_verbs"] == ["resume", "rerun", "restart-clean", "adopt"]
    fix_machine(flow, node.maas_system_id)
    flow.sim.post(f"machines/{node.maas_system_id}/status", {"status": "deployed"})
    assert api.post(f"{URL}/{wf.pk}/resume", {}, format="json").status_code == 202
    wf = settle_decommission(wf.pk)
    assert wf.state == "succeeded", wf.reason


def test_one_open_workflow_per_node_across_kinds(flow: Flow, api: Any) -> None:
    node = active_node(flow, "x01", "10.41.0.6", status="ready")
    type(node).objects.filter(pk=node.pk).update(state="registered")  # as a new host's row
    onboarding = start(flow, "x01", "10.41.0.6")
    refused = api.post(
        f"/api/v1/admin/nodes/{node.pk}/decommission",
        {"mode": "reimage", "profile_id": flow.profile.pk},
        format="json",
    )
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("node x01 is provisioning")
    assert not Decommission.objects.exists()
    # and the reverse: an open decommission refuses an onboarding of the same node
    other = active_node(flow, "x02", "10.41.0.7")
    slow_erases(flow)
    flow.sim.post(f"machines/{other.maas_system_id}/faults", {"release_stuck": True})
    wf = decommission(flow, other, "storage_cleanup")
    again = api.post(
        "/api/v1/admin/onboardings",
        {
            "site_id": flow.site.pk,
            "profile_id": flow.profile.pk,
            "sku_id": flow.sku.pk,
            "hostname": "x02",
            "ipmi_ip": "10.41.0.7",
        },
        format="json",
    )
    assert again.status_code == 409
    assert again.json()["open_workflows"][0] == {
        "kind": "decommission",
        "id": wf.pk,
        "hostname": "x02",
        "state": Decommission.objects.get(pk=wf.pk).state,
    }
    assert onboarding.pk  # the first onboarding was untouched


def test_kill_9_during_the_erase_wait(flow_site: Flow, workers: Workers) -> None:
    flow = flow_site
    flow.sim.model.config["node_timeout"] = 600
    node = active_node(flow, "k01", "10.41.0.8", faults={"release_stuck": True})
    first = workers.start()
    wf = decommission(flow, node, "storage_cleanup")
    wait_until(
        lambda: (
            Decommission.objects.get(pk=wf.pk).state == "waiting"
            and flow.sim.model.machines[node.maas_system_id].status.label == "Releasing"
        ),
        timeout=60,
        what="the erase wait",
    )
    workers.kill(first)
    # the erase finishes while no worker runs: the machine reports, the wipe's output has a
    # line for each disk (what the decommission proves the erase by), MAAS shows it Ready
    requests.post(
        f"{flow.sim.control}machines/{node.maas_system_id}/faults",
        json={"release_stuck": False},
        timeout=5,
    )
    flow.sim.advance(600)  # nobody asks MAAS anything meanwhile: its clock moves on
    assert flow.sim.model.machines[node.maas_system_id].status.label == "Ready"
    workers.start()
    wf = settle_decommission(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert flow.sim.count("machine.release", status=200) == 1  # not sent again
    node.refresh_from_db()
    assert node.state == "active"


def test_cancelling_a_reimage_cancels_its_redeploy_first(flow: Flow, api: Any) -> None:
    from onboarding.models import Onboarding

    node = active_node(flow, "r02", "10.41.0.9")  # no node side: the redeploy waits to enroll
    wf = decommission(flow, node, "reimage")
    child = wait_until(
        lambda: Onboarding.objects.filter(
            parent_id=wf.pk, state="waiting", stage="enrollment"
        ).first(),
        timeout=60,
        what="the redeploy waiting for enrollment",
    )
    response = api.post(f"{URL}/{wf.pk}/cancel", {"reason": "wrong image"}, format="json")
    assert response.status_code == 202, response.content
    wf = settle_decommission(wf.pk)
    assert wf.state == "cancelled", wf.reason
    child.refresh_from_db()
    assert child.state == "cancelled"  # ended before the decommission did
    assert child.finished_at <= wf.finished_at
    node.refresh_from_db()
    assert node.state == "quarantined"  # released and half-redeployed: not back in a pool

"""Whole onboardings for the behaviours the first live run needs (docs/onboarding.md): one run
per behaviour an operator sees, on a real worker, the simulator and its node side."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from maas_client.client import MaasClient
from maas_client.status import NodeStatus
from maas_domain.models import AuditLog, Node, OutboxEvent
from maas_simulator.node import NodeSide
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding, OnboardingBatch
from tests.support.flows import Flow, settle, settle_decommission, start, wait_until
from tests.support.maas import API_KEY, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def with_bundle(flow: Flow) -> None:
    """A site bundle the preflight can fetch (the node side does not download it), served on
    loopback over http: a lab site allows that (docs/security.md)."""
    flow.site.allow_http = True
    flow.site.policy = {
        **flow.site.policy,
        "bootstrap_bundle_ref": f"{settings.NODE_API_URL}/api/v1/node/health",
        "bootstrap_bundle_version": "2024.10",
        "bootstrap_bundle_digest": "sha256:" + "ab" * 32,
    }
    flow.site.save()


def timeline(wf: Onboarding) -> list[str]:
    return list(wf.events.order_by("at", "id").values_list("kind", flat=True))


def test_the_node_reports_its_bundle_and_agent_before_enrolling(
    flow: Flow, node_side: NodeSide
) -> None:
    with_bundle(flow)
    flow.sim.add(hostname="lv01", status="ready", power_address="10.40.0.1")
    wf = settle(start(flow, "lv01", "10.40.0.1").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert wf.site_bundle_done_at and wf.agent_started_at and wf.enrolled_at
    assert wf.site_bundle_done_at <= wf.agent_started_at <= wf.enrolled_at
    assert [(r["phase"], r["outcome"], r["status"]) for r in node_side.reports] == [
        ("site_bundle", "ok", 200),
        ("agent", "ok", 200),
    ]
    kinds = timeline(wf)
    assert kinds.index("node.site_bundle") < kinds.index("node.agent_started")
    assert kinds.index("node.agent_started") < kinds.index("node.enrolled")


@pytest.mark.parametrize(
    ("behaviour", "failure"),
    [({"bundle": "failed"}, "site_bundle"), ({"agent": "failed"}, "agent_start")],
)
def test_a_failed_bundle_or_agent_fails_the_workflow_with_its_own_class(
    flow: Flow, node_side: NodeSide, behaviour: dict[str, Any], failure: str
) -> None:
    with_bundle(flow)
    node_side.set("lv02", **behaviour)
    flow.sim.add(hostname="lv02", status="ready", power_address="10.40.0.2")
    wf = settle(start(flow, "lv02", "10.40.0.2").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "enrollment", failure)
    assert "simulated" in wf.reason  # the node's own detail reaches the operator
    assert wf.completed_at is None and wf.enrolled_at is None
    assert node_side.calls == []  # the node never got to enrollment
    assert Node.objects.get(onboardings=wf).state == "provisioning"
    assert f"node.{'site_bundle' if failure == 'site_bundle' else 'agent'}_failed" in timeline(wf)


# -- discovery ------------------------------------------------------------------------------------


def test_an_unknown_host_is_created_power_cycled_discovered_and_onboarded(
    flow: Flow, node_side: NodeSide
) -> None:
    wf = settle(start(flow, "lv05", "10.40.0.5").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    sid = wf.maas_system_id
    machine = flow.sim.model.machines[sid]
    assert wf.created_machine and wf.pxe_mac == machine.interfaces[0].mac_address
    # one commissioning: the power cycle that discovered it; the commission stage adopted it
    assert flow.sim.mutations() == [
        "machines.create",
        "machine.commission",
        "machine.set_storage_layout",
        "machine.deploy",
    ]
    kinds = timeline(wf)
    assert "discover.matched" in kinds
    completed = dict(wf.events.filter(kind="stage.completed").values_list("stage", "message"))
    assert completed["commission"] == "already Ready in MAAS; not recommissioned"


# -- rerun and adopt take MAAS's truth -------------------------------------------------------------

URL = "/api/v1/admin/onboardings"


def verb(api: APIClient, pk: int, name: str, **body: Any) -> Any:
    answer = api.post(f"{URL}/{pk}/{name}", body, format="json")
    assert answer.status_code == 202, answer.json()
    return answer.json()


def test_rerun_of_a_succeeded_onboarding_sends_maas_nothing_and_succeeds(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    node_side.set("lv10", checkin=0.2)  # a running agent checks in
    flow.sim.add(hostname="lv10", status="ready", power_address="10.40.0.10")
    first = settle(start(flow, "lv10", "10.40.0.10").pk)
    assert first.state == "succeeded", first.reason
    flow.sim.reset_counters()
    assert verb(api, first.pk, "rerun")["attempt"] == 2
    wf = settle(first.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert flow.sim.mutations() == []
    assert (wf.attempt, wf.token_attempt, wf.node_token_attempt, wf.enrolled_attempt) == (
        2,
        2,
        2,
        2,
    )
    assert first.completed_at and wf.completed_at and wf.completed_at > first.completed_at
    assert first.enrolled_at and wf.enrolled_at and wf.enrolled_at > first.enrolled_at
    rerun = wf.events.filter(attempt=2)
    assert rerun.filter(kind="node.tokens_rotated").count() == 1
    messages = dict(rerun.filter(kind="stage.completed").values_list("stage", "message"))
    assert "not recommissioned" in messages["commission"]
    assert "already Deployed in MAAS; adopted" in messages["deploy"]
    assert Node.objects.get(onboardings=wf).state == "active"
    assert [c["attempt"] for c in node_side.calls] == [1, 2]


def waiting_at_enrollment(pk: int) -> bool:
    return Onboarding.objects.filter(pk=pk, stage="enrollment", state="waiting").exists()


def succeeded_then_rerun(flow: Flow, api: APIClient, host: str, ip: str) -> Onboarding:
    """An onboarding of ``host`` that succeeded, rerun: attempt 2 redeploys nothing."""
    flow.sim.add(hostname=host, status="ready", power_address=ip)
    first = settle(start(flow, host, ip).pk)
    assert first.state == "succeeded", first.reason
    flow.sim.reset_counters()
    assert verb(api, first.pk, "rerun")["attempt"] == 2
    return first


def test_rerun_adopts_the_enrollment_of_an_agent_that_takes_the_tokens_but_does_not_reenroll(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    node_side.set("lv13", checkin=0.2, reenroll=False)  # it swaps its tokens, nothing more
    first = succeeded_then_rerun(flow, api, "lv13", "10.40.0.13")
    wf = settle(first.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert wf.enrollment_adopted_at is not None and wf.enrolled_attempt is None
    assert (wf.attempt, wf.token_attempt, wf.node_token_attempt, wf.agent_checkin_attempt) == (
        2, 2, 2, 2,
    )  # fmt: skip
    kinds = list(wf.events.filter(attempt=2).values_list("kind", flat=True))
    assert "node.tokens_rotated" in kinds and "node.checked_in" in kinds
    assert "node.enrolled" not in kinds
    adopted = wf.events.get(attempt=2, kind="stage.completed", stage="enrollment")
    assert "adopted the node's enrollment" in adopted.message
    assert flow.sim.mutations() == []
    assert Node.objects.get(onboardings=wf).state == "active"


def test_rerun_whose_agent_never_checks_in_ends_with_the_reason_and_leaves_the_node_active(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    first = succeeded_then_rerun(flow, api, "lv14", "10.40.0.14")  # its agent never checks in
    wait_until(
        lambda: Onboarding.objects.filter(
            pk=first.pk, stage="enrollment", state="waiting"
        ).exists(),
        what="the rerun waiting at enrollment",
    )
    # the window (600 s by default) passes: the check-in it asked for finds it over
    Onboarding.objects.filter(pk=first.pk).update(
        stage_started_at=timezone.now() - timedelta(seconds=601), next_check_at=timezone.now()
    )
    wf = settle(first.pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "enrollment", "agent_unconfirmed")
    assert "its agent has never checked in" in wf.reason
    assert Node.objects.get(onboardings=wf).state == "active"  # the node is as it was
    assert flow.sim.mutations() == []


def test_a_reimage_supersedes_a_rerun_waiting_for_the_nodes_agent(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    first = succeeded_then_rerun(flow, api, "lv15", "10.40.0.15")
    wait_until(
        lambda: Onboarding.objects.filter(
            pk=first.pk, stage="enrollment", state="waiting"
        ).exists(),
        what="the rerun waiting at enrollment",
    )
    node = Node.objects.get(onboardings=first)
    answer = api.post(
        f"/api/v1/admin/nodes/{node.pk}/decommission",
        {"mode": "reimage", "profile_id": flow.profile.pk, "reason": "fresh image"},
        format="json",
    )
    assert answer.status_code == 202, answer.json()
    rerun = Onboarding.objects.get(pk=first.pk)
    assert (rerun.state, rerun.failure_class) == ("failed", "superseded")
    assert f"reimage decommission {answer.json()['id']}" in rerun.reason
    assert rerun.events.filter(kind="workflow.superseded").exists()
    assert AuditLog.objects.filter(action="onboarding.superseded", target_id=str(rerun.pk)).exists()
    done = settle_decommission(answer.json()["id"])
    assert done.state == "succeeded", (done.failure_class, done.reason)
    assert Node.objects.get(pk=node.pk).state == "active"


def test_adopt_of_a_machine_recommissioned_by_hand_finishes_the_workflow(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    sid = flow.sim.add(
        hostname="lv11",
        status="new",
        power_address="10.40.0.11",
        faults={"commission_failure": [1]},
    )
    wf = settle(start(flow, "lv11", "10.40.0.11").pk)
    assert (wf.state, wf.stage) == ("failed", "commission")
    operator = MaasClient(flow.sim.url, API_KEY, site="by-hand")
    operator.commission(sid)  # the operator fixed the machine and commissioned it in MAAS
    wait_for(operator, sid, NodeStatus.READY)
    operator.close()
    flow.sim.reset_counters()
    # a Ready machine is judged against its SKU before anything is set on it
    assert verb(api, wf.pk, "adopt")["stage"] == "conformance"
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert flow.sim.mutations(sid) == ["machine.set_storage_layout", "machine.deploy"]
    assert wf.attempt == 1 and wf.enrolled_attempt == 1


def test_adopt_after_the_operator_restarted_the_agent_finishes_the_workflow(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    node_side.set("lv12", mode="silent")  # the agent never starts
    flow.site.policy = {**flow.site.policy, "stage_timeouts": {"enrollment": 5}}
    flow.site.save()
    sid = flow.sim.add(hostname="lv12", status="ready", power_address="10.40.0.12")
    wf = settle(start(flow, "lv12", "10.40.0.12").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "enrollment", "timeout")
    flow.sim.reset_counters()
    assert verb(api, wf.pk, "adopt")["stage"] == "enrollment"
    node_side.set("lv12")
    node_side.restart(flow.sim.model, sid)  # fixed on the host: the agent starts and enrolls
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert flow.sim.mutations() == []
    assert wf.agent_started_at and wf.enrolled_attempt == wf.attempt == 1


# -- predeploy: reachability from the node's own network ------------------------------------------


@pytest.mark.parametrize("unreachable", [False, True])
def test_the_node_network_is_checked_through_maas_before_deploy(
    flow: Flow, node_side: NodeSide, unreachable: bool
) -> None:
    flow.site.policy = {**flow.site.policy, "reachability_script": "internet-connectivity"}
    flow.site.save()
    sid = flow.sim.add(
        hostname="lv20",
        status="ready",
        power_address="10.40.0.20",
        faults={"node_network_unreachable": unreachable},
    )
    wf = settle(start(flow, "lv20", "10.40.0.20").pk)
    if not unreachable:
        assert wf.state == "succeeded", (wf.failure_class, wf.reason)
        assert flow.sim.mutations(sid) == [
            "machine.set_storage_layout",
            "machine.test",
            "machine.deploy",
        ]
        return
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "reachability", "reachability")
    assert "/api/v1/node/health: FAILED" in wf.reason
    assert "machine.deploy" not in flow.sim.mutations(sid)
    failed = wf.events.get(kind="reachability.failed")
    assert "connection timed out from the node's network" in failed.data["output"]


# -- batches: canary and failure budget ----------------------------------------------------------


def batch_rows(flow: Flow, n: int, prefix: str, faults: dict[int, dict[str, Any]]) -> list[Any]:
    rows = []
    for i in range(n):
        host, ip = f"{prefix}{i:02d}", f"10.41.{len(prefix)}.{i + 1}"
        flow.sim.add(hostname=host, status="ready", power_address=ip, faults=faults.get(i, {}))
        rows.append({"hostname": host, "ipmi_ip": ip})
    return rows


def run_batch(flow: Flow, rows: list[Any], **policy: Any) -> Any:
    flow.site.policy = {**flow.site.policy, **policy}
    flow.site.save()
    return onboarding_start_batch(
        actor=flow.admin,
        site_id=flow.site.pk,
        profile_id=flow.profile.pk,
        sku_id=flow.sku.pk,
        rows=rows,
    )


def idle(batch: Any) -> bool:
    return not Onboarding.objects.filter(batch=batch, state__in=("running", "waiting")).exists()


def test_a_batch_starts_the_rest_only_after_its_canary_succeeded(
    flow: Flow, node_side: NodeSide
) -> None:
    batch = run_batch(flow, batch_rows(flow, 4, "cy", {}), batch_canary_size=1)
    rows = Onboarding.objects.filter(batch=batch)
    wait_until(lambda: rows.filter(state="succeeded").count() == 4, timeout=120, what="batch")
    canary = rows.get(batch_canary=True)
    assert canary.hostname == "cy00" and canary.finished_at
    assert all(wf.started_at >= canary.finished_at for wf in rows.exclude(pk=canary.pk))


def test_a_failed_canary_pauses_the_batch_until_an_operator_resumes_it(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    rows = batch_rows(flow, 3, "cz", {0: {"deploy_curtin_failure": [1]}})
    batch = run_batch(flow, rows, batch_canary_size=1)
    canary = settle(Onboarding.objects.get(hostname="cz00").pk)
    assert canary.failure_class == "curtin"
    summary = wait_until(
        lambda: (s := api.get(f"{URL}/batches/{batch.pk}").json())["state"] == "paused" and s,
        what="the batch to pause",
    )
    assert "canary cz00" in summary["paused_reason"]
    time.sleep(1.5)  # several sweeps: nothing of the batch starts while it is paused
    assert set(Onboarding.objects.filter(batch=batch).values_list("state", flat=True)) == {
        "failed",
        "pending",
    }
    assert api.post(f"{URL}/batches/{batch.pk}/resume", {}, format="json").status_code == 200
    others = Onboarding.objects.filter(batch=batch, batch_canary=False)
    wait_until(lambda: others.filter(state="succeeded").count() == 2, timeout=90, what="the rest")


def test_a_spent_failure_budget_pauses_and_the_operator_cancels_the_batch(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    curtin = {"deploy_curtin_failure": [1]}
    rows = batch_rows(flow, 5, "cb", {0: curtin, 1: curtin})
    batch = run_batch(flow, rows, batch_pause_after_failures=2, max_concurrent_workflows=2)
    wait_until(
        lambda: OnboardingBatch.objects.get(pk=batch.pk).state == "paused" and idle(batch),
        timeout=90,
        what="the budget to pause the batch",
    )
    paused = OnboardingBatch.objects.get(pk=batch.pk)
    assert "failure budget spent: 2 failed" in paused.paused_reason
    ours = Onboarding.objects.filter(batch=batch)
    held = set(ours.filter(state="pending").values_list("id", flat=True))
    failed = set(ours.filter(state="failed").values_list("id", flat=True))
    assert held and len(failed) == 2  # the rest held back by the pause
    answer = api.post(f"{URL}/batches/{batch.pk}/cancel", {"reason": "bad lot"}, format="json")
    assert answer.status_code == 202
    cancelled = set(answer.json()["cancelled"])
    # every one the pause held back is cancelled, no failed one; an admission that read the
    # batch just before the pause committed may have started one more, which is cancelled live
    assert held <= cancelled and not cancelled & failed, (held, cancelled, failed)
    assert len(cancelled) <= len(held) + 1
    assert not ours.filter(state="pending").exists()
    published = OutboxEvent.objects.filter(type="node.onboarding.batch_paused")
    assert [e.payload["batch_id"] for e in published] == [batch.pk]

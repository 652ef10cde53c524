"""Recovery verbs on onboardings, end to end (real worker, simulator), plus their API rules."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from maas_domain.models import AuditLog
from maas_simulator.node import NodeSide
from onboarding.models import Onboarding
from tests.factories import make_onboarding, make_site
from tests.support.flows import Flow, settle, start, wait_until

URL = "/api/v1/admin/onboardings"


def verb(api: APIClient, pk: int, name: str, body: dict[str, Any] | None = None, **kw: Any) -> Any:
    return api.post(f"{URL}/{pk}/{name}", body or {}, format="json", **kw)


slow = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_retry_reruns_the_failed_stage_with_attempt_plus_one(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    sid = flow.sim.add(
        hostname="r01",
        status="ready",
        power_address="10.11.0.1",
        faults={"deploy_curtin_failure": [1]},
    )
    wf = settle(start(flow, "r01", "10.11.0.1").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "deploy", "curtin")
    answer = verb(api, wf.pk, "retry", {"reason": "curtin mirror fixed"})
    assert answer.status_code == 202, answer.json()
    assert (answer.json()["attempt"], answer.json()["stage"]) == (2, "deploy")
    wf = settle(wf.pk)
    assert wf.state == "succeeded", wf.reason
    assert (wf.attempt, wf.token_attempt, wf.enrolled_attempt) == (2, 2, 2)
    assert flow.sim.mutations(sid).count("machine.deploy") == 2
    assert "machine.release" in flow.sim.mutations(sid)
    assert "machine.commission" not in flow.sim.mutations(sid)
    event = wf.events.get(kind="operator.retry")
    assert event.actor_name == "ops-admin" and "curtin mirror fixed" in event.message
    row = AuditLog.objects.get(action="onboarding.retry")
    assert (row.before["attempt"], row.after["attempt"], row.reason) == (
        1,
        2,
        "curtin mirror fixed",
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_rerun_adopts_and_does_not_recommission_a_ready_machine(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    node_side.set("r02", checkin=0.2)  # its agent checks in once deployed
    sid = flow.sim.add(
        hostname="r02", status="new", power_address="10.11.0.2", faults={"commission_failure": [1]}
    )
    wf = settle(start(flow, "r02", "10.11.0.2").pk)
    assert (wf.state, wf.stage) == ("failed", "commission")
    assert verb(api, wf.pk, "rerun").status_code == 202
    wf = settle(wf.pk)
    assert wf.state == "succeeded", wf.reason
    assert flow.sim.mutations(sid).count("machine.commission") == 2  # once failed, once on rerun
    assert wf.attempt == 2
    # a second rerun of the succeeded workflow adopts everything and succeeds: MAAS gets nothing
    flow.sim.reset_counters()
    assert verb(api, wf.pk, "rerun").status_code == 202
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert flow.sim.mutations() == []
    assert (wf.attempt, wf.token_attempt, wf.enrolled_attempt) == (3, 3, 3)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_restart_clean_needs_confirm_undoes_maas_and_mints_new_tokens(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    wf = start(flow, "r03", "10.11.0.3")  # not in MAAS: this workflow creates it
    wf = settle(wf.pk, states=("succeeded", "failed"))
    assert wf.state == "succeeded" and wf.created_machine
    first_sid = wf.maas_system_id
    assert verb(api, wf.pk, "restart-clean").status_code == 409  # not from succeeded
    assert verb(api, wf.pk, "mark-manual-intervention", {"reason": "bad GPU"}).status_code == 409
    # fail it through a real path: a second onboarding is impossible, so drive restart from cancel
    other = start(flow, "r04", "10.11.0.4")
    wait_until(lambda: Onboarding.objects.get(pk=other.pk).stage == "deploy", what="r04 deploying")
    assert verb(api, other.pk, "cancel").status_code == 202
    other = settle(other.pk)
    assert other.state == "cancelled"
    refused = verb(api, other.pk, "restart-clean")
    assert refused.status_code == 400 and "confirm" in refused.json()["fields"]
    answer = verb(api, other.pk, "restart-clean", {"confirm": True, "reason": "start over"})
    assert answer.status_code == 202
    other = settle(other.pk)
    assert other.state == "succeeded", other.reason
    assert other.attempt == 2 and other.token_attempt == 2
    assert "machine.delete" in flow.sim.mutations()
    assert first_sid in flow.sim.model.machines  # the untouched onboarding keeps its machine


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cancel_aborts_the_in_flight_deploy(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    flow.sim.add(
        hostname="r05",
        status="ready",
        power_address="10.11.0.5",
        faults={"deploy_datasource_failure": [1]},
    )
    wf = start(flow, "r05", "10.11.0.5")
    wait_until(
        lambda: (
            Onboarding.objects.get(pk=wf.pk).stage == "deploy"
            and Onboarding.objects.get(pk=wf.pk).state == "waiting"
        ),
        what="deploy wait",
    )
    assert verb(api, wf.pk, "cancel", {"reason": "wrong rack"}).status_code == 202
    wf = settle(wf.pk)
    assert wf.state == "cancelled"
    mutations = flow.sim.mutations()
    assert mutations[-2:] == ["machine.abort", "machine.release"]
    assert wf.events.filter(kind="workflow.cancelled").exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_manual_intervention_freezes_then_resume_continues(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    node_side.set("r06", mode="silent")
    flow.sim.add(hostname="r06", status="ready", power_address="10.11.0.6")
    wf = start(flow, "r06", "10.11.0.6")
    wait_until(
        lambda: Onboarding.objects.get(pk=wf.pk).stage == "enrollment", what="enrollment wait"
    )
    assert (
        verb(api, wf.pk, "mark-manual-intervention", {"reason": "agent repo down"}).status_code
        == 202
    )
    frozen = Onboarding.objects.get(pk=wf.pk)
    assert frozen.state == "manual_intervention"
    assert frozen.events.filter(kind="node.onboarding.manual_intervention_required").exists()
    dispatch = frozen.dispatch
    import time

    time.sleep(2)  # several sweeps pass: nothing automatic touches a frozen workflow
    assert Onboarding.objects.get(pk=wf.pk).dispatch == dispatch
    answer = verb(api, wf.pk, "resume")
    assert answer.status_code == 202 and answer.json()["stage"] == "enrollment"
    wf = settle(wf.pk, states=("waiting",))
    assert wf.attempt == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_adopt_moves_a_hand_fixed_deployed_machine_to_enrollment(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    sid = flow.sim.add(
        hostname="r07",
        status="ready",
        power_address="10.11.0.7",
        faults={"deploy_curtin_failure": [1]},
    )
    wf = settle(start(flow, "r07", "10.11.0.7").pk)
    assert wf.state == "failed"
    flow.sim.post(f"machines/{sid}/status", {"status": "deployed", "power_state": "on"})
    answer = verb(api, wf.pk, "adopt")
    assert answer.status_code == 202, answer.json()
    assert answer.json()["stage"] == "enrollment"
    event = Onboarding.objects.get(pk=wf.pk).events.get(kind="operator.adopt")
    assert event.data["maas_status"] == "Deployed"
    # the hand-deployed machine boots the payload it was given: its agent enrolls, adopt finishes
    flow.sim.reset_counters()
    node_side.restart(flow.sim.model, sid)
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    assert (wf.attempt, wf.enrolled_attempt) == (1, 1)
    assert flow.sim.mutations() == []


# -- API rules (no worker needed) ------------------------------------------------------------


@pytest.mark.django_db
def test_disallowed_verb_is_409_with_allowed_verbs_and_changes_nothing(api: APIClient) -> None:
    wf = make_onboarding(make_site(), state="succeeded")
    answer = verb(api, wf.pk, "retry")
    assert answer.status_code == 409
    assert answer.json()["current_state"] == "succeeded"
    assert answer.json()["allowed_verbs"] == ["rerun"]
    assert Onboarding.objects.get(pk=wf.pk).attempt == 1
    assert not AuditLog.objects.exists()
    assert verb(api, 424242, "retry").status_code == 404
    assert api.post(f"{URL}/{wf.pk}/explode", {}, format="json").status_code == 404
    assert verb(api, wf.pk, "rerun", {"forced": True}).status_code == 400  # unknown field


@pytest.mark.django_db
def test_dry_run_describes_and_changes_nothing(api: APIClient) -> None:
    wf = make_onboarding(make_site(), state="failed", stage="deploy")
    answer = api.post(f"{URL}/{wf.pk}/retry?dry_run=true", {}, format="json")
    assert answer.status_code == 200
    plan = answer.json()
    assert (plan["dry_run"], plan["from_stage"], plan["attempt"]) == (True, "deploy", 2)
    assert any(c.startswith("deploy: deploy") for c in plan["maas_calls"])
    assert plan["preconditions"]
    clean = api.post(f"{URL}/{wf.pk}/restart-clean?dry_run=true", {}, format="json").json()
    assert clean["from_stage"] == "reset"
    assert any(c.startswith("delete_machine") for c in clean["maas_calls"])
    wf.refresh_from_db()
    assert (wf.state, wf.attempt) == ("failed", 1)
    assert not AuditLog.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("typo", ["ture", "on", "y", "dry"])
def test_a_mistyped_dry_run_is_a_400_and_never_runs_the_verb(api: APIClient, typo: str) -> None:
    wf = make_onboarding(make_site(), state="running", stage="deploy")
    answer = api.post(f"{URL}/{wf.pk}/cancel?dry_run={typo}", {}, format="json")
    assert answer.status_code == 400, answer.json()
    assert "dry_run" in answer.json()["fields"]
    wf.refresh_from_db()
    assert wf.state == "running"
    assert not AuditLog.objects.exists()
    start = api.post(f"/api/v1/admin/onboardings?dry_run={typo}", {}, format="json")
    assert start.status_code == 400 and "dry_run" in start.json()["fields"]


@pytest.mark.django_db
def test_idempotency_key_replays_and_rejects_a_different_body(api: APIClient) -> None:
    wf = make_onboarding(make_site(), state="failed", stage="deploy")
    first = verb(api, wf.pk, "retry", {"reason": "x"}, HTTP_IDEMPOTENCY_KEY="k-1")
    again = verb(api, wf.pk, "retry", {"reason": "x"}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert "Idempotent-Replayed" not in first and again["Idempotent-Replayed"] == "true"
    assert AuditLog.objects.filter(action="onboarding.retry").count() == 1
    other = verb(api, wf.pk, "retry", {"reason": "y"}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"
    # without a key, a second retry of a now-pending workflow is a 409
    assert verb(api, wf.pk, "retry", {"reason": "x"}).status_code == 409


@pytest.mark.django_db(transaction=True)
def test_two_verbs_racing_exactly_one_wins(api: APIClient) -> None:
    wf = make_onboarding(make_site(), state="failed", stage="deploy")
    barrier = threading.Barrier(6)
    codes: list[int] = []

    def go(name: str) -> None:
        try:
            barrier.wait()
            codes.append(verb(api, wf.pk, name).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(n,)) for n in ("retry", "rerun", "resume") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [202] + [409] * 5
    assert AuditLog.objects.filter(target_id=str(wf.pk)).count() == 1

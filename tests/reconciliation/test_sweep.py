"""Leaks we own and the ``sweep`` verb (docs/reconciliation.md, "Leaks"), on the MAAS simulator:
a machine left failed and held by our MAAS user is reported naming the workflow that left it,
and the sweep gives it back the safe way for its state and its history: released without erase
when no tenant ever had it, with its policy's erase when one may have, marked Broken where MAAS
cannot release; anything else is refused naming the state, and nothing reaches MAAS."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from maas_client.client import MaasClient
from maas_domain.models import Allocation, AuditLog, MaasSite, Node
from maas_simulator.node import NodeSide
from maas_simulator.users import User
from reconciliation import services
from reconciliation.models import DriftRecord, ReconcileRun
from tests.factories import make_node, make_onboarding, make_profile
from tests.reconciliation.conftest import reconcile
from tests.support.flows import Flow, settle, start, wait_until
from tests.support.maas import Sim
from tests.support.tokens import bearer_token

pytestmark = pytest.mark.django_db
SWEEP = "/api/v1/admin/reconciliation/leaks/sweep"


def sweep(api: APIClient, site: MaasSite, sid: str = "", dry_run: bool = False, **body: Any) -> Any:
    payload = {"site_id": site.pk, **({"system_id": sid} if sid else {}), **body}
    return api.post(SWEEP + ("?dry_run=true" if dry_run else ""), payload, format="json")


def failed_onboarding(site: MaasSite, sid: str, host: str, **node: Any) -> tuple[Node, Any]:
    """The node of an onboarding that failed at deploy, as a failed onboarding leaves it."""
    node_row = make_node(site, hostname=host, state=node.pop("state", "provisioning"), **node)
    wf = make_onboarding(
        site,
        node=node_row,
        hostname=host,
        state="failed",
        stage="deploy",
        failure_class="curtin",
        maas_system_id=sid,
    )
    return node_row, wf


def status(sim: Sim, sid: str) -> str:
    return str(sim.model.machines[sid].status.label)


def leak(site: MaasSite) -> DriftRecord:
    (rec,) = DriftRecord.objects.filter(site=site, kind="leak")
    return rec


def test_a_failed_onboardings_machine_is_a_leak_naming_it_and_swept_without_erase(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    sid = sim.add(hostname="gpu-l1", status="failed_deployment")
    _node, wf = failed_onboarding(site, sid, "gpu-l1")
    reconcile(site)
    rec = leak(site)
    assert rec.detail["left_by"] == {
        "kind": "onboarding",
        "id": wf.pk,
        "state": "failed",
        "stage": "deploy",
        "attempt": 1,
        "failure_class": "curtin",
        "reason": "",
    }
    assert rec.message.endswith(f"; left by onboarding {wf.pk} (failed at deploy: curtin)")

    answer = sweep(api, site, sid, reason="INC-7 clean-up")
    assert answer.status_code == 200, answer.json()
    (done,) = answer.json()["swept"]
    assert (done["action"], done["erase"], done["tenant_data"], done["outcome"]) == (
        "release",
        "none",
        False,
        "swept",
    )
    assert "never reached a tenant" in done["why"]
    assert sim.mutations(sid) == ["machine.release"]
    (sent,) = sim.sent("machine.release", sid)
    assert sent["erase"] == "false" and "INC-7 clean-up" in sent["comment"]
    sim.advance(60)
    assert status(sim, sid) == "Ready" and sim.model.machines[sid].owner is None
    row = AuditLog.objects.get(action="leak.sweep")
    assert (row.target_id, row.reason, row.actor_name) == (sid, "INC-7 clean-up", "ops-admin")
    assert row.after["action"] == "release" and row.before["status"] == "Failed deployment"
    assert wf.events.get(kind="leak.swept").actor_name == "ops-admin"
    reconcile(site)
    rec.refresh_from_db()
    assert rec.state == "cleared"  # no longer ours


@pytest.mark.parametrize(
    "history",
    ["allocated", "succeeded_before", "no_record", "draining"],
)
def test_a_machine_a_tenant_may_have_written_to_is_released_with_its_policys_erase(
    sim: Sim, site: MaasSite, api: APIClient, history: str
) -> None:
    sid = sim.add(hostname="gpu-t1", status="failed_deployment")
    if history != "no_record":
        node, wf = failed_onboarding(
            site, sid, "gpu-t1", state="draining" if history == "draining" else "provisioning"
        )
        wf.profile.policy_overrides = {"erase_mode": "secure"}
        wf.profile.save()
    if history == "allocated":
        allocation = Allocation.objects.create(node=node, holder="tenant-a")
        allocation.release()
        allocation.save()
    if history == "succeeded_before":
        make_onboarding(site, node=node, hostname="gpu-t1", state="succeeded", profile=wf.profile)
    answer = sweep(api, site, sid)
    assert answer.status_code == 200, answer.json()
    (done,) = answer.json()["swept"]
    mode = "quick" if history == "no_record" else "secure"  # the site's default, or the profile's
    assert (done["action"], done["erase"], done["tenant_data"]) == ("release", mode, True)
    (sent,) = sim.sent("machine.release", sid)
    assert sent["erase"] == "true" and sent[f"{mode}_erase"] == "true"
    assert status(sim, sid) == "Disk erasing"


def test_failed_testing_and_commissioning_are_marked_broken_never_released(
    sim: Sim, site: MaasSite, api: APIClient, maas: MaasClient
) -> None:
    tested = sim.add(hostname="gpu-b1", status="ready", faults={"script_fails": ["smartctl-short"]})
    maas.test(tested, testing_scripts=["smartctl-short"])
    commissioned = sim.add(
        hostname="gpu-b2", status="new", power_address="10.9.0.2",
        faults={"commission_failure": [1]},
    )  # fmt: skip
    maas.commission(commissioned)
    sim.advance(600)
    assert (status(sim, tested), status(sim, commissioned)) == (
        "Failed testing",
        "Failed commissioning",
    )
    node, _ = failed_onboarding(site, tested, "gpu-b1", state="quarantined")
    make_onboarding(site, node=node, hostname="gpu-b1", state="succeeded")  # it served before
    failed_onboarding(site, commissioned, "gpu-b2")  # never did
    sim.reset_counters()
    answer = sweep(api, site)  # the whole site
    assert answer.status_code == 200, answer.json()
    swept = {p["hostname"]: p for p in answer.json()["swept"]}
    assert set(swept) == {"gpu-b1", "gpu-b2"}
    assert (swept["gpu-b1"]["action"], swept["gpu-b1"]["erase_owed"]) == ("mark_broken", "quick")
    assert (swept["gpu-b2"]["action"], swept["gpu-b2"]["erase_owed"]) == ("mark_broken", "")
    assert sorted(sim.mutations()) == ["machine.mark_broken", "machine.mark_broken"]
    for sid in (tested, commissioned):
        assert status(sim, sid) == "Broken" and sim.model.machines[sid].owner is None
    assert AuditLog.objects.filter(action="leak.sweep").count() == 2


def test_a_machine_in_another_state_is_refused_naming_it_and_nothing_is_sent(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    deployed = sim.add(hostname="gpu-r1", status="deployed")
    sim.model.users["other"] = User("other", False, "ck", "tk", "ts")
    theirs = sim.add(hostname="gpu-r2", status="failed_deployment", owner="other")
    refused = sweep(api, site, deployed)
    assert refused.status_code == 409
    body = refused.json()
    assert body["maas_status"] == "Deployed" and "is Deployed in MAAS" in body["detail"]
    assert "Failed deployment" in body["detail"] and "Failed testing" in body["detail"]
    refused = sweep(api, site, theirs)
    assert refused.status_code == 409 and "held by other" in refused.json()["detail"]
    assert sweep(api, site, "nosuch").status_code == 404
    assert sim.mutations() == [] and not AuditLog.objects.filter(action="leak.sweep").exists()


def test_a_machine_claimed_by_an_open_workflow_or_an_active_node_is_not_swept(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    claimed = sim.add(hostname="gpu-c1", status="failed_deployment")
    wf = make_onboarding(site, hostname="gpu-c1", state="waiting", stage="deploy",
                         maas_system_id=claimed)  # fmt: skip
    in_service = sim.add(hostname="gpu-c2", status="failed_disk_erasing")
    make_node(site, hostname="gpu-c2", maas_system_id=in_service, state="active")
    refused = sweep(api, site, claimed)
    assert refused.status_code == 409
    assert refused.json()["open_workflows"][0] == {
        "kind": "onboarding", "id": wf.pk, "state": "waiting", "stage": "deploy",
    }  # fmt: skip
    refused = sweep(api, site, in_service)
    assert refused.status_code == 409 and "is active" in refused.json()["detail"]
    site_wide = sweep(api, site).json()
    assert site_wide["swept"] == [] and {s["system_id"] for s in site_wide["skipped"]} == {
        claimed,
        in_service,
    }
    assert sim.mutations() == []


def test_a_dry_run_plans_and_sends_nothing(sim: Sim, site: MaasSite, api: APIClient) -> None:
    sid = sim.add(hostname="gpu-d1", status="failed_disk_erasing")
    failed_onboarding(site, sid, "gpu-d1")
    answer = sweep(api, site, sid, dry_run=True)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["dry_run"] is True
    (planned,) = body["swept"]
    # an erase was asked for and never finished: asked again, whatever the history
    assert (planned["action"], planned["erase"], planned["outcome"]) == (
        "release",
        "quick",
        "planned",
    )
    assert sim.mutations() == [] and not AuditLog.objects.filter(action="leak.sweep").exists()
    assert sweep(api, site, "gpu/../x", dry_run=True).status_code == 400


def test_bad_input_and_the_wrong_role_change_nothing(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    sid = sim.add(hostname="gpu-e1", status="failed_deployment")
    for body in (
        {},
        {"site_id": 0},
        {"site_id": site.pk, "system_id": "ab\u00e9\u202e"},
        {"site_id": site.pk, "system_id": "x" * 33},
        {"site_id": site.pk, "force": True},
        {"site_id": site.pk, "reason": "r" * 501},
    ):
        answer = api.post(SWEEP, body, format="json")
        assert answer.status_code == 400, (body, answer.json())
    surrogate = b'{"site_id": %d, "system_id": "\\ud800"}' % site.pk
    raw = api.generic("POST", SWEEP, data=surrogate, content_type="application/json")  # type: ignore[arg-type]
    assert raw.status_code == 400
    assert api.post(SWEEP, {"site_id": 99999}, format="json").json()["fields"] == {
        "site_id": ["Site not found."]
    }
    user = get_user_model().objects.create_user("op-sweep", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    operator = APIClient()
    operator.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='operate')}")
    assert sweep(operator, site, sid).status_code == 403  # it releases machines: admin only
    site.status = "disabled"
    site.save()
    assert sweep(api, site, sid).status_code == 409
    assert sim.mutations() == []


def test_maas_down_is_a_503_and_records_nothing(sim: Sim, site: MaasSite, api: APIClient) -> None:
    sid = sim.add(hostname="gpu-m1", status="failed_deployment")
    sim.faults({"kind": "503", "count": 50})
    answer = sweep(api, site, sid)
    assert answer.status_code == 503 and answer.json()["dependency"] == "maas"
    assert not AuditLog.objects.filter(action="leak.sweep").exists()


def test_a_maas_refusal_in_a_site_sweep_is_reported_and_the_rest_goes_on(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    first = sim.add(hostname="gpu-f1", status="failed_deployment")
    second = sim.add(hostname="gpu-f2", status="failed_deployment")
    sim.faults({"kind": "409", "count": 1, "method": "POST", "system_id": first})
    body = sweep(api, site).json()
    assert [p["system_id"] for p in body["failed"]] == [first]
    assert body["failed"][0]["outcome"] == "failed" and body["failed"][0]["error"]
    assert [p["system_id"] for p in body["swept"]] == [second]
    assert AuditLog.objects.filter(action="leak.sweep").count() == 1


# -- the policy's own sweeps ------------------------------------------------------------------


def auto(site: MaasSite, **policy: Any) -> None:
    site.policy = {**site.policy, **policy}
    site.save()


def test_reconciliation_sweeps_what_never_reached_a_tenant_when_policy_says_so(
    sim: Sim, site: MaasSite
) -> None:
    never = sim.add(hostname="gpu-a1", status="failed_deployment")
    failed_onboarding(site, never, "gpu-a1")
    served = sim.add(hostname="gpu-a2", status="failed_deployment")
    node, _ = failed_onboarding(site, served, "gpu-a2")
    Allocation.objects.create(node=node, holder="tenant-b")
    unknown = sim.add(hostname="gpu-a3", status="failed_deployment")  # no record of ours
    quarantined = sim.add(hostname="gpu-a4", status="failed_deployment")
    failed_onboarding(site, quarantined, "gpu-a4", state="quarantined")

    first = reconcile(site)  # policy off: reported, never touched
    second = reconcile(site)
    assert (first.leaks_swept, second.leaks_swept) == (0, 0) and sim.mutations() == []
    assert DriftRecord.objects.filter(site=site, kind="leak").count() == 4

    auto(site, leak_auto_sweep=True)
    run = reconcile(site)  # every leak has been seen twice by now
    assert run.leaks_swept == 1 and run.state == "succeeded"
    assert sim.mutations() == ["machine.release"] and sim.mutations(never) == ["machine.release"]
    (row,) = AuditLog.objects.filter(action="leak.sweep")
    assert row.actor_name == "system" and "leak_auto_sweep" in row.reason
    assert row.after["erase"] == "none"
    assert {status(sim, s) for s in (served, unknown, quarantined)} == {"Failed deployment"}


def test_an_automatic_sweep_waits_for_a_second_run_and_respects_an_acknowledgement(
    sim: Sim, site: MaasSite, api: APIClient
) -> None:
    auto(site, leak_auto_sweep=True)
    sid = sim.add(hostname="gpu-w1", status="failed_deployment")
    failed_onboarding(site, sid, "gpu-w1")
    assert reconcile(site).leaks_swept == 0  # seen once: an operator may still be acting
    answer = api.post(
        f"/api/v1/admin/reconciliation/drift/{leak(site).node_id}/resolve",
        {"action": "acknowledge", "kind": "leak", "reason": "keeping it for the vendor"},
        format="json",
    )
    assert answer.status_code == 200
    assert reconcile(site).leaks_swept == 0 and sim.mutations() == []


def test_the_policy_of_the_workflow_that_left_the_machine_decides(sim: Sim, site: MaasSite) -> None:
    on = sim.add(hostname="gpu-p1", status="failed_deployment")
    _node, wf = failed_onboarding(site, on, "gpu-p1")
    type(wf).objects.filter(pk=wf.pk).update(
        profile=make_profile(site, policy_overrides={"leak_auto_sweep": True})
    )
    off = sim.add(hostname="gpu-p2", status="failed_deployment")
    _node, wf = failed_onboarding(site, off, "gpu-p2")
    type(wf).objects.filter(pk=wf.pk).update(
        profile=make_profile(site, policy_overrides={"leak_auto_sweep": False})
    )
    auto(site, leak_auto_sweep=False)
    reconcile(site)
    assert reconcile(site).leaks_swept == 1 and sim.mutations() == ["machine.release"]
    assert sim.mutations(on) == ["machine.release"]
    auto(site, leak_auto_sweep=True)  # the site says yes; gpu-p2's profile still says no
    assert reconcile(site).leaks_swept == 0 and sim.mutations(off) == []


def test_the_admin_sweeps_selected_leaks_with_the_same_rules(
    sim: Sim, site: MaasSite, client: Any, admin_user: Any
) -> None:
    sid = sim.add(hostname="gpu-h1", status="failed_deployment")
    failed_onboarding(site, sid, "gpu-h1")
    other = sim.add(hostname="gpu-h2", status="failed_deployment")
    reconcile(site)
    records = {r.hostname: r for r in DriftRecord.objects.filter(site=site, kind="leak")}
    with sim.model.lock:  # someone else took it meanwhile: no longer ours
        sim.model.machines[other].owner = None
        sim.model.machines[other].touch(sim.model.now())
    client.force_login(admin_user)
    answer = client.post(
        "/admin/reconciliation/driftrecord/",
        {"action": "sweep_leaks", "_selected_action": [r.pk for r in records.values()]},
        follow=True,
    )
    text = " ".join(str(m) for m in answer.context["messages"])
    assert "Swept by ops-admin: gpu-h1 (release, none erase)" in text
    assert "Not swept: gpu-h2" in text and "held by nobody" in text
    assert sim.mutations() == ["machine.release"]
    assert AuditLog.objects.get(action="leak.sweep").target_id == sid


def by_worker(site: MaasSite) -> None:
    """A reconcile run as the schedule makes one: queued, and run by the worker."""
    run, _ = services.reconcile_request(site=site, trigger="api")
    wait_until(
        lambda: ReconcileRun.objects.get(pk=run.pk).state == "succeeded", what="reconcile run"
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_failed_onboarding_leaves_a_machine_we_list_and_sweep(
    flow: Flow, node_side: NodeSide, api: APIClient
) -> None:
    """The simulator as MAAS: a deploy that fails leaves the machine Failed deployment, still
    held by the user that deployed it (ours); nothing else claims it."""
    sid = flow.sim.add(
        hostname="lk01", status="ready", power_address="10.12.0.1",
        faults={"deploy_curtin_failure": [1]},
    )  # fmt: skip
    wf = settle(start(flow, "lk01", "10.12.0.1").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "deploy", "curtin")
    machine = flow.sim.model.machines[sid]
    assert (machine.status.label, machine.owner) == ("Failed deployment", "admin")  # the key's user
    by_worker(flow.site)
    rec = leak(flow.site)
    assert (rec.node_id, rec.detail["left_by"]["id"]) == (wf.node_id, wf.pk)
    assert "Failed deployment, held by admin," in rec.message
    flow.sim.reset_counters()
    answer = sweep(api, flow.site, sid)
    assert answer.status_code == 200, answer.json()
    (done,) = answer.json()["swept"]
    assert (done["action"], done["erase"], done["tenant_data"]) == ("release", "none", False)
    assert flow.sim.mutations() == ["machine.release"]
    flow.sim.advance(120)  # the power-off MAAS waits for
    assert status(flow.sim, sid) == "Ready"
    by_worker(flow.site)
    rec.refresh_from_db()
    assert rec.state == "cleared"

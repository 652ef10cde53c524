"""Stage-level tests of the behaviours the first live run needs (docs/onboarding.md): what each
stage sends MAAS (parameters as the simulator received them), discovery in the prototype's
order, deploy retry, node reachability, node reports and completion gates, adopting MAAS's
truth on rerun. Each stage runs once against the simulator (tests/support/stages.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.conf import settings

from maas_client.hardware import Script
from maas_client.status import NodeStatus
from onboarding.models import Onboarding
from onboarding.stages.reachability import url_parameter_problem
from tests.support.maas import INFRA_REACH
from tests.support.stages import Bench, run_stage

pytestmark = pytest.mark.django_db
S = NodeStatus


def run(wf: Onboarding, stage: str, *, record: bool = False) -> Any:
    return run_stage("onboarding", wf, stage, record=record)


def name(result: Any) -> str:
    return type(result).__name__


def done(wf: Onboarding, result: Any) -> None:
    """Store a Done result's updates as the engine would."""
    assert name(result) == "Done", result
    Onboarding.objects.filter(pk=wf.pk).update(**result.updates)
    wf.refresh_from_db()


# -- what reaches MAAS ----------------------------------------------------------------------------


def test_commission_sends_the_policy_flags_and_scripts(bench: Bench) -> None:
    sid = bench.sim.add(hostname="m1", status="new")
    wf = bench.onboarding("m1", "10.5.0.1", maas_system_id=sid)
    run(wf, "commission")
    [sent] = bench.sim.sent("machine.commission", sid)
    # the prototype's flags, as MAAS's CommissionForm reads them ("0" would be true)
    assert (sent["enable_ssh"], sent["skip_bmc_config"]) == ("true", "true")
    assert (sent["skip_networking"], sent["skip_storage"]) == ("false", "false")
    assert "commissioning_scripts" not in sent
    bench.policy(
        commission_enable_ssh=False,
        commission_skip_bmc_config=False,
        commission_skip_storage=True,
        commission_scripts=["50-infra-firmware", "60-infra-nvme"],
    )
    sid2 = bench.sim.add(hostname="m2", status="new")
    run(bench.onboarding("m2", "10.5.0.2", maas_system_id=sid2), "commission")
    [sent] = bench.sim.sent("machine.commission", sid2)
    assert (sent["enable_ssh"], sent["skip_bmc_config"], sent["skip_storage"]) == (
        "false",
        "false",
        "true",
    )
    assert sent["commissioning_scripts"] == "50-infra-firmware,60-infra-nvme"


def test_deploy_sends_the_profile_series_kernel_and_this_attempts_payload(bench: Bench) -> None:
    bench.profile.distro_series, bench.profile.hwe_kernel = "noble", "ga-24.04"
    bench.profile.save()
    sid = bench.sim.add(hostname="m3", status="ready")
    wf = bench.onboarding("m3", "10.5.0.3", maas_system_id=sid)
    done(wf, run(wf, "payload")[0])
    run(wf, "deploy")
    [sent] = bench.sim.sent("machine.deploy", sid)
    assert (sent["distro_series"], sent["hwe_kernel"]) == ("noble", "ga-24.04")
    assert "enable_hw_sync" not in sent
    served = bench.sim.model.machines[sid].user_data or b""
    assert sent["user_data"] == {"sha256": hashlib.sha256(served).hexdigest(), "bytes": len(served)}
    text = served.decode()
    assert f"onboarding_id: {wf.pk}" in text and "attempt: 1" in text
    assert "enrollment_token: " in text  # the node gets its tokens; the record only a digest


def test_deploy_asks_for_hardware_sync_when_policy_requires_it(bench: Bench) -> None:
    bench.policy(hardware_sync_required=True)
    sid = bench.sim.add(hostname="m4", status="ready")
    wf = bench.onboarding("m4", "10.5.0.4", maas_system_id=sid)
    done(wf, run(wf, "payload")[0])
    run(wf, "deploy")
    assert bench.sim.sent("machine.deploy", sid)[0]["enable_hw_sync"] == "true"


# -- a reopened workflow describes its active run -------------------------------------------------


def test_rerun_clears_the_previous_runs_completion_and_enrollment(bench: Bench) -> None:
    from django.utils import timezone

    from onboarding.workflow import KIND
    from workflows import verbs

    now = timezone.now()
    wf = bench.onboarding("t1", "10.5.1.1", token_attempt=1, enrolled_attempt=1)
    Onboarding.objects.filter(pk=wf.pk).update(
        completed_at=now, enrolled_at=now, agent_started_at=now, finished_at=now
    )
    Onboarding.objects.filter(pk=wf.pk).update(state="succeeded")
    verbs.apply(KIND, wf.pk, "rerun", actor=bench.admin)
    wf.refresh_from_db()
    assert (wf.state, wf.attempt) == ("pending", 2)
    assert (wf.completed_at, wf.enrolled_at, wf.enrolled_attempt, wf.agent_started_at) == (
        None,
        None,
        None,
        None,
    )


def test_resume_keeps_what_the_same_attempt_already_proved(bench: Bench) -> None:
    from django.utils import timezone

    from onboarding.workflow import KIND
    from workflows import verbs

    now = timezone.now()
    wf = bench.onboarding("t2", "10.5.1.2", token_attempt=1, enrolled_attempt=1, stage="complete")
    Onboarding.objects.filter(pk=wf.pk).update(
        enrolled_at=now, agent_started_at=now, state="failed"
    )
    verbs.apply(KIND, wf.pk, "resume", actor=bench.admin)
    wf.refresh_from_db()
    assert (wf.attempt, wf.enrolled_attempt, wf.enrolled_at) == (1, 1, now)
    assert wf.agent_started_at == now


# -- node reports and completion gates ------------------------------------------------------------


def gated(bench: Bench, hostname: str, ip: str, **fields: Any) -> Onboarding:
    """An onboarding at its completion stage whose every gate holds (``fields`` break one)."""
    from django.utils import timezone

    now = timezone.now()
    sid = bench.sim.add(hostname=hostname, status="deployed")
    base: dict[str, Any] = {
        "maas_system_id": sid,
        "token_attempt": 1,
        "enrolled_attempt": 1,
        "enrolled_at": now,
        "agent_started_at": now,
        "site_bundle_version": "2024.10",
        "site_bundle_done_at": now,
    }
    return bench.onboarding(hostname, ip, **{**base, **fields})


@pytest.mark.parametrize(
    ("broken", "gate"),
    [
        ({"agent_started_at": None}, "agent_started"),
        ({"site_bundle_done_at": None}, "site_bundle"),
        ({"enrolled_at": None}, "enrolled"),
        ({"attempt": 2, "enrolled_attempt": 1}, "current_attempt"),
        ({"token_attempt": 2, "attempt": 2, "enrolled_attempt": 2}, None),
    ],
)
def test_each_completion_gate_can_fail_on_its_own(
    bench: Bench, broken: dict[str, Any], gate: str | None
) -> None:
    wf = gated(bench, f"g{len(broken)}{gate or 'ok'}"[:20].replace("_", "-"), "10.5.2.1", **broken)
    result, _ = run(wf, "complete")
    if gate is None:
        assert name(result) == "Done", result
        return
    assert (name(result), result.failure_class) == ("Fail", "completion_gate")
    assert [g for g, ok in result.data["gates"].items() if not ok] == [gate]
    assert gate in result.message


def test_the_maas_deployed_gate_fails_when_maas_no_longer_shows_deployed(bench: Bench) -> None:
    wf = gated(bench, "g-maas", "10.5.2.2")
    bench.sim.post(f"machines/{wf.maas_system_id}/status", {"status": "ready"})
    result, _ = run(wf, "complete")
    assert [g for g, ok in result.data["gates"].items() if not ok] == ["maas_deployed"]


def test_the_node_row_gate_fails_when_the_node_cannot_become_active(bench: Bench) -> None:
    from maas_domain.models import Node

    wf = gated(bench, "g-node", "10.5.2.3")
    Node.objects.filter(onboardings=wf).update(state="quarantined")
    result, _ = run(wf, "complete")
    assert [g for g, ok in result.data["gates"].items() if not ok] == ["node_row"]


def test_the_site_bundle_gate_does_not_apply_without_a_bundle(bench: Bench) -> None:
    wf = gated(bench, "g-nobundle", "10.5.2.4", site_bundle_version="", site_bundle_done_at=None)
    assert name(run(wf, "complete")[0]) == "Done"


@pytest.mark.parametrize(
    ("failure", "label"), [("site_bundle", "site bootstrap bundle"), ("agent_start", "node agent")]
)
def test_a_failure_the_node_reported_fails_enrollment_with_its_own_class(
    bench: Bench, failure: str, label: str
) -> None:
    wf = bench.onboarding(
        f"n-{failure}".replace("_", "-"),
        "10.5.2.5",
        node_failure=failure,
        node_failure_detail="run.sh exited 3",
    )
    result, _ = run(wf, "enrollment")
    assert (name(result), result.failure_class) == ("Fail", failure)
    assert result.message == f"the {label} failed on the node: run.sh exited 3"
    assert result.data == {"reported": failure, "detail": "run.sh exited 3"}


def test_a_node_failure_without_detail_says_so(bench: Bench) -> None:
    wf = bench.onboarding("n-nodetail", "10.5.2.6", node_failure="agent_start")
    result, _ = run(wf, "enrollment")
    assert result.message == "the node agent failed on the node: (no detail)"


# -- rerun and adopt take MAAS's truth ------------------------------------------------------------


def test_storage_and_pxe_are_left_alone_on_a_deployed_machine(bench: Bench) -> None:
    sid = bench.sim.add(hostname="a1", status="deployed")
    result, _ = run(bench.onboarding("a1", "10.5.3.1", maas_system_id=sid), "storage_pxe")
    assert name(result) == "Done" and "Deployed" in result.message
    assert bench.sim.mutations(sid) == []


def test_deploy_adopts_a_deployed_machine_and_keeps_the_payload_the_node_runs(
    bench: Bench,
) -> None:
    sid = bench.sim.add(hostname="a2", status="deployed")
    wf = bench.onboarding("a2", "10.5.3.2", maas_system_id=sid, attempt=2, node_token_attempt=1)
    done(wf, run(wf, "payload")[0])
    result, _ = run(wf, "deploy")
    assert (name(result), result.message) == ("Done", "already Deployed in MAAS; adopted (jammy)")
    wf.refresh_from_db()
    # this attempt's tokens are minted; the node still holds attempt 1's until it checks in
    assert (wf.token_attempt, wf.node_token_attempt, wf.deployed_attempt) == (2, 1, None)
    assert bench.sim.mutations(sid) == []


def test_a_deploy_sent_records_whose_tokens_the_node_will_hold(bench: Bench) -> None:
    from django.utils import timezone

    sid = bench.sim.add(hostname="a3", status="ready")
    wf = bench.onboarding(
        "a3", "10.5.3.3", maas_system_id=sid, attempt=3, site_bundle_done_at=timezone.now()
    )
    done(wf, run(wf, "payload")[0])
    run(wf, "deploy", record=True)
    wf.refresh_from_db()
    assert wf.node_token_attempt == wf.deployed_attempt == 3  # its enrollment is a first boot's
    assert wf.site_bundle_done_at is None  # a new first boot: the new payload must report again


# -- deploy retry as the prototype did it --------------------------------------------------------


def deploying(bench: Bench, hostname: str, ip: str, **faults: Any) -> tuple[Onboarding, str]:
    sid = bench.sim.add(hostname=hostname, status="ready", faults=faults)
    wf = bench.onboarding(hostname, ip, maas_system_id=sid)
    done(wf, run(wf, "payload")[0])
    result, _ = run(wf, "deploy", record=True)
    assert (name(result), result.status) == ("Wait", int(S.DEPLOYING))
    return wf, sid


def decisions(events: list[Any]) -> list[dict[str, Any]]:
    return [data for kind, _, data in events if kind == "retry.decision"]


def test_a_datasource_failure_seen_while_deploying_is_aborted_released_and_redeployed(
    bench: Bench,
) -> None:
    bench.sim.post("config", {"node_timeout": 600})  # MAAS's own timeout far away
    wf, sid = deploying(bench, "rd1", "10.5.4.1", deploy_datasource_failure=[1])
    bench.sim.advance(400)  # installed, rebooted, cloud-init stuck on the MAAS datasource
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.status) == ("Wait", int(S.DEPLOYING))
    assert any(kind == "deploy.watch" for kind, _, _ in events)  # a grace period first
    assert bench.sim.mutations(sid) == ["machine.deploy"]
    result, events = run(wf, "deploy", record=True)  # still stuck after the grace period
    [decision] = decisions(events)
    assert (decision["classification"], decision["retry"]) == ("datasource", True)
    assert "DataSourceMAAS" in decision["evidence"]
    assert bench.sim.mutations(sid) == ["machine.deploy", "machine.abort"]
    assert bench.sim.model.machines[sid].status == S.ALLOCATED
    result, _ = run(wf, "deploy", record=True)  # aborted: back to Ready before the redeploy
    assert bench.sim.mutations(sid)[-1] == "machine.release"
    assert (result.message, result.status, result.check_in) == (
        "releasing before redeploy",
        int(S.RELEASING),
        600,
    )
    [release] = bench.sim.sent("machine.release", sid)
    assert release["comment"] == f"onboarding {wf.pk}: release after abort"
    bench.sim.advance(60)
    result, _ = run(wf, "deploy", record=True)
    assert (name(result), result.status) == ("Wait", int(S.DEPLOYING))
    assert bench.sim.mutations(sid) == [
        "machine.deploy",
        "machine.abort",
        "machine.release",
        "machine.deploy",
    ]
    bench.sim.advance(400)
    assert (
        name(run(wf, "deploy", record=True)[0]) == "Done"
    )  # the second deploy reached its datasource


def test_a_datasource_failure_past_the_retry_bound_fails_early_with_its_class(
    bench: Bench,
) -> None:
    bench.policy(deploy_retry_limit=0)
    bench.sim.post("config", {"node_timeout": 600})
    wf, sid = deploying(bench, "rd2", "10.5.4.2", deploy_datasource_failure=[1])
    bench.sim.advance(400)
    run(wf, "deploy", record=True)
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.failure_class) == ("Fail", "datasource")
    assert decisions(events)[0]["retry"] is False
    # aborted, so the machine rests Allocated instead of Deploying for MAAS's 10 hours
    assert bench.sim.mutations(sid) == ["machine.deploy", "machine.abort"]


def test_each_redeploy_counts_once_against_the_retry_bound(bench: Bench) -> None:
    bench.policy(deploy_retry_limit=2)
    bench.sim.post("config", {"node_timeout": 600})
    wf, sid = deploying(bench, "rd9", "10.5.4.9", deploy_datasource_failure=[1, 2, 3])
    said = []
    for _ in range(2):
        bench.sim.advance(400)
        run(wf, "deploy", record=True)  # the grace period
        _, events = run(wf, "deploy", record=True)
        [decision] = [(m, d) for k, m, d in events if k == "retry.decision"]
        said.append((decision[0].rsplit("(", 1)[1], decision[1]["retry"]))
        run(wf, "deploy", record=True)  # released
        bench.sim.advance(60)
        run(wf, "deploy", record=True)  # deployed again
    assert said == [("retry 0 of 2)", True), ("retry 1 of 2)", True)]
    bench.sim.advance(400)
    run(wf, "deploy", record=True)
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.failure_class, result.data) == (
        "Fail",
        "datasource",
        {"deploy_tries": 2},
    )
    assert bench.sim.mutations(sid).count("machine.deploy") == 3


def test_maas_timing_out_an_installed_node_is_a_datasource_failure(bench: Bench) -> None:
    wf, sid = deploying(bench, "rd3", "10.5.4.3", deploy_datasource_failure=[1])
    bench.sim.advance(7200)  # MAAS's 30-minute timeout: Failed deployment
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.status) == ("Wait", int(S.RELEASING))
    assert decisions(events)[0]["classification"] == "datasource"
    assert bench.sim.mutations(sid) == ["machine.deploy", "machine.release"]


def test_maas_timing_out_before_the_os_installed_is_not_retried(bench: Bench) -> None:
    bench.sim.post("config", {"node_timeout": 1})  # MAAS gives up before curtin finishes
    wf, sid = deploying(bench, "rd4", "10.5.4.4")
    bench.sim.advance(120)
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.failure_class) == ("Fail", "deploy_timeout")
    assert decisions(events)[0]["retry"] is False
    assert bench.sim.mutations(sid) == ["machine.deploy"]


def test_a_bmc_that_times_out_is_a_power_failure_not_a_datasource_one(bench: Bench) -> None:
    wf, sid = deploying(bench, "rd5", "10.5.4.5", bmc_unreachable=True)
    bench.sim.advance(60)  # "Connection timed out while performing power action"
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.failure_class) == ("Fail", "power")
    assert decisions(events)[0]["retry"] is False
    assert bench.sim.mutations(sid) == ["machine.deploy"]


# -- discovery in the prototype's order -----------------------------------------------------------


def matched_by(events: list[Any]) -> str | None:
    return next(
        (data["matched_by"] for kind, _, data in events if kind == "discover.matched"), None
    )


def test_discover_learns_the_pxe_mac_maas_reports(bench: Bench) -> None:
    sid = bench.sim.add(hostname="dm1", status="ready", mac_addresses=["52:54:00:99:01:01"])
    result, events = run(bench.onboarding("dm1", "10.5.5.1"), "discover")
    assert matched_by(events) == "matched by hostname"
    assert result.updates["maas_system_id"] == sid
    assert result.updates["pxe_mac"] == "52:54:00:99:01:01"


def re_enlisted(bench: Bench, hostname: str, ip: str, mac: str) -> str:
    """The host was onboarded before (MAAS told us its PXE MAC); its machine was deleted and the
    box enlisted itself again: a random hostname and no BMC address MAAS knows."""
    earlier = bench.onboarding(hostname, ip, pxe_mac=mac)
    Onboarding.objects.filter(pk=earlier.pk).update(state="succeeded")
    return bench.sim.add(
        hostname="happy-newt", status="new", power_type="manual", mac_addresses=[mac]
    )


def test_discover_uses_a_learned_pxe_mac_as_its_third_match(bench: Bench) -> None:
    sid = re_enlisted(bench, "dm2", "10.5.5.2", "52:54:00:99:02:01")
    from maas_domain.models import Node

    node = Node.objects.get(hostname="dm2")
    wf = Onboarding.objects.create(
        site=bench.site,
        profile=bench.profile,
        sku=bench.sku,
        node=node,
        hostname="dm2",
        ipmi_ip="10.5.5.2",
        correlation_id="live-test",
    )
    result, events = run(wf, "discover")
    assert matched_by(events) == "matched by PXE MAC"
    assert result.updates["maas_system_id"] == sid
    assert bench.sim.mutations() == []


def test_a_learned_pxe_mac_is_not_used_when_policy_says_so(bench: Bench) -> None:
    bench.policy(match_pxe_mac=False, discovery_power_cycle=False)
    re_enlisted(bench, "dm3", "10.5.5.3", "52:54:00:99:03:01")
    from maas_domain.models import Node

    wf = Onboarding.objects.create(
        site=bench.site,
        profile=bench.profile,
        sku=bench.sku,
        node=Node.objects.get(hostname="dm3"),
        hostname="dm3",
        ipmi_ip="10.5.5.3",
        correlation_id="live-test",
    )
    result, events = run(wf, "discover")
    assert matched_by(events) is None
    assert any("match_pxe_mac is off" in message for _, message, _ in events)
    # nothing else may find the box: no power-cycle by policy, and the MAC is not to be used
    assert (name(result), result.failure_class) == ("Fail", "discovery")
    assert bench.sim.mutations() == []


def test_an_unknown_host_is_created_power_cycled_through_maas_and_waited_for(
    bench: Bench,
) -> None:
    wf = bench.onboarding("dm4", "10.5.5.4")
    result, _ = run(wf, "discover", record=True)
    assert (name(result), result.message) == ("Wait", "waiting for MAAS to discover the machine")
    sid = wf.maas_system_id
    assert sid and wf.created_machine
    # MAAS powers a machine nobody owns only by commissioning it: that is the power cycle
    assert bench.sim.mutations() == ["machines.create", "machine.commission"]
    assert bench.sim.sent("machine.commission", sid)[0]["skip_bmc_config"] == "true"
    bench.sim.advance(600)  # it PXE booted; commissioning found its NICs
    result, _ = run(wf, "discover", record=True)
    assert name(result) == "Done", result
    machine = bench.sim.model.machines[sid]
    assert wf.pxe_mac == machine.interfaces[0].mac_address
    assert name(run(wf, "commission")[0]) == "Done"  # not commissioned a second time
    assert bench.sim.mutations() == ["machines.create", "machine.commission"]


def test_a_box_that_enlists_itself_when_power_cycled_is_taken_instead(bench: Bench) -> None:
    # a BMC-only record this workflow created; powered, the box PXE boots and enlists itself
    sid = bench.sim.add(
        hostname="dm5",
        status="new",
        power_address="10.5.5.5",
        mac_addresses=[],
        faults={"enlist_on_power_cycle": True},
    )
    wf = bench.onboarding("dm5", "10.5.5.5", maas_system_id=sid, created_machine=True)
    result, _ = run(wf, "discover", record=True)
    assert name(result) == "Wait"
    [stranger] = [m for m in bench.sim.model.machines if m != sid]
    result, events = run(wf, "discover", record=True)
    assert name(result) == "Done", result
    assert (wf.maas_system_id, wf.created_machine) == (stranger, False)
    assert matched_by(events) == "enlisted when power-cycled (same BMC address)"
    assert sid not in bench.sim.model.machines  # our empty record is gone: no ambiguity left
    assert bench.sim.model.machines[stranger].hostname == "dm5"
    assert bench.sim.mutations() == [
        "machine.commission",
        "machine.abort",
        "machine.delete",
        "machine.update",
    ]


def test_discovery_without_power_cycle_refuses_a_host_maas_cannot_find(bench: Bench) -> None:
    bench.policy(discovery_power_cycle=False)
    result, _ = run(bench.onboarding("dm6", "10.5.5.6"), "discover")
    assert (name(result), result.failure_class) == ("Fail", "discovery")
    assert "discovery_power_cycle" in result.message
    assert bench.sim.mutations() == []


def test_a_power_cycle_maas_never_sees_boot_fails_discovery(bench: Bench) -> None:
    bench.sim.post("config", {"node_timeout": 1})
    wf = bench.onboarding("dm7", "10.5.5.7")
    sid = bench.sim.add(hostname="dm7", status="new", power_address="10.5.5.7", mac_addresses=[])
    bench.sim.post(f"machines/{sid}/faults", {"enlist_on_power_cycle": True})
    Onboarding.objects.filter(pk=wf.pk).update(maas_system_id=sid)
    first, _ = run(wf, "discover", record=True)
    assert name(first) == "Wait", first
    with bench.sim.model.lock:  # the box that enlisted is not ours after all (another BMC)
        for m in list(bench.sim.model.machines.values()):
            if m.system_id != sid:
                m.power_parameters = {"power_address": "10.9.9.9"}
    bench.sim.advance(600)  # MAAS times the record's commissioning out
    result, _ = run(wf, "discover")
    assert (name(result), result.failure_class) == ("Fail", "discovery"), result
    assert "never saw it boot" in result.message


def test_auto_claim_off_says_why_the_only_new_machine_was_not_taken(bench: Bench) -> None:
    bench.sim.add(hostname="lonely", status="new", power_type="manual")
    result, events = run(bench.onboarding("dm8", "10.5.5.8"), "discover")
    assert any("auto_claim_new is off" in message for _, message, _ in events)
    assert result.updates.get("maas_system_id") != "lonely"


# -- predeploy checks: from the node's own network, fetchability, CA, bundle references ----------


def reachable(bench: Bench, hostname: str, ip: str, **faults: Any) -> tuple[Onboarding, str]:
    bench.policy(reachability_script="infra-reach")
    sid = bench.sim.add(hostname=hostname, status="ready", faults=faults)
    return bench.onboarding(hostname, ip, maas_system_id=sid), sid


def test_the_reachability_stage_runs_only_when_policy_names_a_script(bench: Bench) -> None:
    from onboarding.workflow import KIND

    wf = bench.onboarding("rc0", "10.5.6.1")
    assert "reachability" not in [s.name for s in KIND.stages_for(wf)]
    bench.policy(reachability_script="infra-reach")
    wf.profile.site.refresh_from_db()
    names = [s.name for s in KIND.stages_for(wf)]
    assert names.index("storage_pxe") < names.index("reachability") < names.index("payload")


def test_the_node_checks_the_bootstrap_urls_from_its_own_network_before_deploy(
    bench: Bench,
) -> None:
    wf, sid = reachable(bench, "rc1", "10.5.6.2")
    result, _ = run(wf, "reachability", record=True)
    assert (name(result), result.status) == ("Wait", int(S.TESTING))
    [sent] = bench.sim.sent("machine.test", sid)
    urls = sent["infra-reach_url"].split(",")
    assert sent["testing_scripts"] == "infra-reach"
    assert urls == [
        f"{bench.site.node_api_url}/api/v1/node/health",
        f"{bench.site.node_api_url}/api/v1/node/agent/{settings.NODE_AGENT_VERSION}/bootstrap.sh",
    ]
    wait_for_status(bench, sid, S.READY)
    result, events = run(wf, "reachability")
    assert name(result) == "Done", result
    checked = next(data for kind, _, data in events if kind == "reachability.checked")
    assert "reachable (HTTP 200)" in checked["output"]


def test_a_node_network_that_cannot_reach_the_control_plane_fails_before_deploy(
    bench: Bench,
) -> None:
    wf, sid = reachable(bench, "rc2", "10.5.6.3", node_network_unreachable=True)
    run(wf, "reachability", record=True)
    wait_for_status(bench, sid, S.FAILED_TESTING)
    result, events = run(wf, "reachability")
    assert (name(result), result.failure_class) == ("Fail", "reachability")
    assert "connection timed out from the node's network" in result.message
    assert any(kind == "reachability.failed" and "output" in data for kind, _, data in events)
    assert bench.sim.mutations(sid) == ["machine.test"]


@pytest.mark.parametrize("unreachable", [False, True])
def test_a_presigned_bundle_signature_reaches_the_node_but_no_timeline_or_reason(
    bench: Bench, unreachable: bool
) -> None:
    secret = "SIGNATURE-0f9e8d7c6b5a"
    bench.policy(
        bootstrap_bundle_ref=f"{bench.site.node_api_url}/b.tgz?X-Amz-Signature={secret}&x=1",
        bootstrap_bundle_version="2024.10",
        bootstrap_bundle_digest="sha256:" + "ab" * 32,
    )
    wf, sid = reachable(
        bench, f"rs{int(unreachable)}", "10.5.6.9", node_network_unreachable=unreachable
    )
    _, started = run(wf, "reachability", record=True)
    [sent] = bench.sim.sent("machine.test", sid)
    assert secret in sent["infra-reach_url"]  # the node needs the whole URL
    wait_for_status(bench, sid, S.FAILED_TESTING if unreachable else S.READY)
    result, events = run(wf, "reachability")
    stored = repr([started, events, getattr(result, "message", ""), getattr(result, "data", {})])
    assert "b.tgz" in stored and secret not in stored


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"url": {"type": "url"}}, "declares its url parameter without allow_list"),
        ({}, "declares no url parameter"),
        (None, "MAAS has no testing script infra-single"),
    ],
)
def test_the_reachability_check_sends_only_what_maas_reads_as_every_url(
    bench: Bench, spec: dict[str, Any] | None, why: str
) -> None:
    """MAAS 3.5 takes one URL in a url parameter without allow_list (host:port URLs joined by a
    comma: 400 Invalid URL; URLs with paths: taken as one URL), drops a parameter a script does
    not declare, and refuses a script it lacks: the stage fails naming why, and sends nothing."""
    if spec is not None:
        bench.sim.model.scripts_from_scenario(
            [{**INFRA_REACH, "name": "infra-single", "parameters": spec}]
        )
    wf, sid = reachable(bench, f"ru{len(why)}", "10.5.6.10")
    bench.policy(reachability_script="infra-single")
    result, _ = run(wf, "reachability")
    assert (name(result), result.failure_class) == ("Fail", "reachability_script")
    assert why in result.message
    assert bench.sim.mutations(sid) == []


def test_one_url_needs_no_allow_list_and_a_comma_in_a_url_is_refused() -> None:
    single = Script.from_json({"name": "one", "parameters": {"url": {"type": "url"}}, "tags": []})
    listed = Script.from_json(
        {"name": "many", "parameters": {"url": {"type": "url", "allow_list": True}}}
    )
    assert url_parameter_problem([single], "one", ["http://10.0.0.1:8080/h"]) == ""
    assert url_parameter_problem([listed], "many", ["http://a/x", "http://b/y"]) == ""
    assert "comma" in url_parameter_problem([listed], "many", ["http://a/x?k=1,2", "http://b/"])


def wait_for_status(bench: Bench, sid: str, status: NodeStatus) -> None:
    from maas_client.client import MaasClient
    from tests.support.maas import API_KEY, wait_for

    client = MaasClient(bench.sim.url, API_KEY, site="check")
    wait_for(client, sid, status)
    client.close()


class _Paths:
    """A node-facing server that answers some paths and 404s the others."""

    def __init__(self, ok: set[str]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        allowed = ok

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.send_response(200 if self.path in allowed else 404)
                self.end_headers()

            do_GET = do_HEAD

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def node_api(bench: Bench) -> Any:
    served = _Paths({"/api/v1/node/health"})
    bench.site.node_api_url = served.url
    bench.site.save()
    yield served
    served.server.shutdown()


def test_preflight_fails_when_the_agent_script_url_is_not_fetchable(
    bench: Bench, node_api: Any
) -> None:
    result, _ = run(bench.onboarding("pf1", "10.5.6.4"), "preflight")
    assert (name(result), result.failure_class) == ("Fail", "preflight")
    [problem] = result.data["problems"]
    assert problem.startswith("node-agent bootstrap script") and "HTTP 404" in problem


def test_preflight_fails_when_the_site_bundle_is_not_fetchable(bench: Bench, node_api: Any) -> None:
    from onboarding import payload as p

    bench.policy(
        bootstrap_bundle_ref=f"{node_api.url}/bundles/site-2024.10.tgz",
        bootstrap_bundle_version="2024.10",
        bootstrap_bundle_digest="sha256:" + "ab" * 32,
    )
    result, _ = run(bench.onboarding("pf2", "10.5.6.5"), "preflight")
    problems = result.data["problems"]
    assert any(x.startswith("site bootstrap bundle") and "HTTP 404" in x for x in problems)
    assert p.agent_script_url(bench.site).endswith("bootstrap.sh")


def test_preflight_fails_on_placeholder_ca_material_alone(bench: Bench) -> None:
    bench.site.ca_bundle_pem = "-----BEGIN CERTIFICATE-----\n{{ ca }}\n-----END CERTIFICATE-----\n"
    bench.site.save()
    result, _ = run(bench.onboarding("pf3", "10.5.6.6"), "preflight")
    assert result.data["problems"] == [
        "ca_bundle_pem: A CERTIFICATE block does not parse as an X.509 certificate. "
        "Replace the site's ca_bundle_pem."
    ]


def test_an_oci_bundle_reference_is_refused_until_the_payload_can_fetch_it(bench: Bench) -> None:
    from maas_domain.errors import InvalidInput
    from maas_domain.policy import validate_policy

    with pytest.raises(InvalidInput) as refused:
        validate_policy({"bootstrap_bundle_ref": "oci://registry.test/infra/site:2024.10"})
    [reason] = refused.value.extra["fields"]["policy.bootstrap_bundle_ref"]
    assert "oci://" in reason and "https://" in reason
    # a reference stored before the rule (raw row) fails the preflight instead of a curl
    bench.site.policy = {
        **bench.site.policy,
        "bootstrap_bundle_ref": "oci://registry.test/infra/site:2024.10",
        "bootstrap_bundle_version": "2024.10",
        "bootstrap_bundle_digest": "sha256:" + "ab" * 32,
    }
    bench.site.save()
    result, _ = run(bench.onboarding("pf4", "10.5.6.7"), "preflight")
    assert any("oci://" in x for x in result.data["problems"])


# -- token storage stays aligned -------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "replaced"])
def test_deploy_repairs_token_storage_that_no_longer_matches_the_row(
    bench: Bench, damage: str
) -> None:
    from maas_domain.secrets import get_backend
    from onboarding import payload as p

    sid = bench.sim.add(hostname=f"tk-{damage}", status="ready")
    wf = bench.onboarding(f"tk-{damage}", "10.5.7.1", maas_system_id=sid)
    done(wf, run(wf, "payload")[0])
    path = p.tokens_path(wf.site.region, wf.pk, wf.attempt)
    if damage == "missing":  # lost with a backend restored from an older backup
        from maas_domain.models import SecretVersion

        SecretVersion.objects.filter(path__endswith=path).delete()
    else:
        get_backend().write(path, {"bootstrap_token": "x", "enrollment_token": "y"})
    result, events = run(wf, "deploy", record=True)
    assert (name(result), result.status) == ("Wait", int(S.DEPLOYING))
    assert any(kind == "payload.tokens_repaired" for kind, _, _ in events)
    tokens = p.read_tokens(wf)
    assert tokens is not None  # both values and both hashes belong to one minting again
    served = bench.sim.model.machines[sid].user_data or b""
    assert tokens.enrollment.encode() in served and tokens.bootstrap.encode() in served


def test_adopt_of_a_failed_deployment_continues_at_deploy(bench: Bench) -> None:
    from onboarding.stages import adopt_stage

    sid = bench.sim.add(hostname="ad-fd", status="failed_deployment")
    wf = bench.onboarding("ad-fd", "10.5.8.1", maas_system_id=sid)
    assert adopt_stage(wf) == (
        "deploy",
        {"maas_status": "Failed deployment", "adopted_stage": "deploy"},
    )


def test_a_box_enlisting_beside_a_record_this_workflow_did_not_create_fails_closed(
    bench: Bench,
) -> None:
    sid = bench.sim.add(
        hostname="dm9",
        status="new",
        power_address="10.5.5.9",
        mac_addresses=[],
        faults={"enlist_on_power_cycle": True},
    )
    wf = bench.onboarding("dm9", "10.5.5.9", maas_system_id=sid)  # an operator's record
    run(wf, "discover", record=True)
    result, _ = run(wf, "discover")
    assert (name(result), result.failure_class) == ("Fail", "ambiguous")
    assert sid in result.data["candidates"] and len(result.data["candidates"]) == 2
    assert bench.sim.mutations() == ["machine.commission"]  # nothing deleted or renamed


def test_the_reachability_check_needs_a_ready_machine(bench: Bench) -> None:
    bench.policy(reachability_script="infra-reach")
    sid = bench.sim.add(hostname="rc9", status="deployed")
    wf = bench.onboarding("rc9", "10.5.6.9", maas_system_id=sid)
    result, _ = run(wf, "reachability")
    assert (name(result), result.failure_class, result.message) == (
        "Fail",
        "unexpected_state",
        "machine is Deployed; the check needs Ready",
    )
    assert bench.sim.mutations(sid) == []


def test_deploy_refuses_a_machine_in_a_state_it_cannot_deploy(bench: Bench) -> None:
    sid = bench.sim.add(hostname="dx9", status="new")
    wf = bench.onboarding("dx9", "10.5.4.99", maas_system_id=sid)
    result, _ = run(wf, "deploy")
    assert (name(result), result.failure_class, result.message) == (
        "Fail",
        "unexpected_state",
        "machine is New in MAAS during deploy",
    )
    assert bench.sim.mutations(sid) == []


# -- a run that redeployed nothing: a bounded wait, an adopted enrollment or a clear end ----------


def undeployed(bench: Bench, hostname: str, ip: str, **fields: Any) -> Onboarding:
    """A rerun (attempt 2) of a node attempt 1 deployed: MAAS shows it Deployed, so this run
    deployed nothing; its tokens are minted and the node still holds attempt 1's."""
    from django.utils import timezone

    sid = bench.sim.add(hostname=hostname, status="deployed")
    base: dict[str, Any] = {
        "maas_system_id": sid,
        "attempt": 2,
        "token_attempt": 2,
        "deployed_attempt": 1,
        "node_token_attempt": 1,
        "stage": "enrollment",
        "stage_started_at": timezone.now(),
    }
    return bench.onboarding(hostname, ip, **{**base, **fields})


def enrolled_in_attempt(wf: Onboarding, attempt: int) -> None:
    """The node's agent enrolled in that attempt (as onboarding/node.py records it)."""
    wf.events.create(kind="node.enrolled", attempt=attempt, message="node agent 1.0 enrolled")


def ago(seconds: int) -> Any:
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() - timedelta(seconds=seconds)


def test_a_run_that_redeployed_nothing_waits_only_its_window_then_says_what_it_saw(
    bench: Bench,
) -> None:
    wf = undeployed(bench, "u1", "10.5.4.1")
    enrolled_in_attempt(wf, 1)
    result, _ = run(wf, "enrollment")
    assert name(result) == "Wait" and "at most 600s" in result.message
    assert result.check_in <= 601
    Onboarding.objects.filter(pk=wf.pk).update(stage_started_at=ago(601))
    result, _ = run(wf, "enrollment")
    assert (name(result), result.failure_class) == ("Fail", "agent_unconfirmed")
    assert "its agent has never checked in" in result.message
    assert "rerun_enrollment_window" in result.message and "reimage" in result.message
    assert result.data["window"] == 600 and result.data["standing_enrollment"] == 1
    # an agent that checked in before this run (with the tokens it held) but not since
    Onboarding.objects.filter(pk=wf.pk).update(agent_checkin_at=ago(700), agent_checkin_attempt=1)
    result, _ = run(wf, "enrollment")
    assert "has not checked in since" in result.message and "attempt 1's tokens" in result.message
    # handed this attempt's tokens, then silent
    Onboarding.objects.filter(pk=wf.pk).update(node_token_attempt=2)
    assert "was handed attempt 2's tokens" in run(wf, "enrollment")[0].message
    # the window is the policy's
    bench.policy(rerun_enrollment_window=60)
    Onboarding.objects.filter(pk=wf.pk).update(stage_started_at=ago(61))
    assert run(wf, "enrollment")[0].failure_class == "agent_unconfirmed"
    Onboarding.objects.filter(pk=wf.pk).update(stage_started_at=ago(30))
    assert name(run(wf, "enrollment")[0]) == "Wait"
    assert bench.sim.mutations() == []


def test_a_run_that_redeployed_nothing_adopts_an_agent_holding_this_attempts_tokens(
    bench: Bench,
) -> None:
    from django.utils import timezone

    wf = undeployed(bench, "u2", "10.5.4.2", node_token_attempt=2)
    enrolled_in_attempt(wf, 1)
    Onboarding.objects.filter(pk=wf.pk).update(agent_checkin_at=ago(5), agent_checkin_attempt=2)
    result, _ = run(wf, "enrollment")
    assert name(result) == "Done", result
    assert "adopted the node's enrollment" in result.message
    assert "attempt 2's tokens" in result.message and "(attempt 1)" in result.message
    assert result.updates["enrollment_adopted_at"] <= timezone.now()
    # its completion gates hold on the adopted enrollment
    done(wf, result)
    Onboarding.objects.filter(pk=wf.pk).update(stage="complete", site_bundle_version="")
    assert name(run(wf, "complete")[0]) == "Done"
    Onboarding.objects.filter(pk=wf.pk).update(enrollment_adopted_at=None)
    gates = run(wf, "complete")[0].data["gates"]
    assert [g for g, ok in gates.items() if not ok] == ["agent_started", "enrolled",
                                                        "current_attempt"]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"agent_checkin_attempt": 1}, "the tokens it holds are attempt 1's"),
        ({"agent_checkin_at": "old"}, "its check-in is older than the window"),
        ({"standing": False}, "its agent never enrolled with the payload the machine runs"),
        ({"deployed_attempt": 2}, "this run deployed: its node must enroll"),
    ],
)
def test_an_enrollment_is_adopted_only_on_its_every_condition(
    bench: Bench, change: dict[str, Any], why: str
) -> None:
    wf = undeployed(bench, "u3", "10.5.4.3", node_token_attempt=2)
    if change.pop("standing", True):
        enrolled_in_attempt(wf, 1)
    if change.get("agent_checkin_at") == "old":
        change["agent_checkin_at"] = ago(700)
    fields = {"agent_checkin_at": ago(5), "agent_checkin_attempt": 2, **change}
    Onboarding.objects.filter(pk=wf.pk).update(**fields)
    assert name(run(wf, "enrollment")[0]) == "Wait", why


def test_a_run_that_deployed_waits_for_its_first_boot_past_the_window(bench: Bench) -> None:
    wf = undeployed(bench, "u4", "10.5.4.4", deployed_attempt=2, stage_started_at=ago(1000))
    result, _ = run(wf, "enrollment")
    assert (name(result), result.message) == ("Wait", "waiting for the node agent to enroll")

"""Each decommission stage function, run once against the simulator with no broker and no
worker (tests/support/stages.py); the whole-flow tests (test_flows.py) keep one run per
behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from decommission.models import Decommission, Mode
from maas_client.status import NodeStatus
from maas_domain.models import Allocation, Node
from tests.support.maas import Api
from tests.support.stages import Bench, run_stage
from workflows import family

pytestmark = pytest.mark.django_db
S = NodeStatus


def decommission(
    bench: Bench, hostname: str, mode: str = Mode.STORAGE_CLEANUP, **machine: Any
) -> Decommission:
    machine.setdefault("status", "deployed")
    ipmi = machine.pop("ipmi", "10.2.0.1")
    sid = bench.sim.add(hostname=hostname, **machine)
    node = bench.node(hostname, ipmi, maas_system_id=sid, state="active")
    return Decommission.objects.create(
        site=bench.site,
        node=node,
        profile=bench.profile,
        mode=mode,
        hostname=hostname,
        maas_system_id=sid,
        prior_node_state="active",
        correlation_id="stage-test",
    )


def run(wf: Decommission, stage: str) -> Any:
    return run_stage("decommission", wf, stage)


def test_preflight_finds_the_machine_and_takes_the_erase_mode(bench: Bench) -> None:
    wf = decommission(bench, "q1")
    result, _ = run(wf, "preflight")
    assert (type(result).__name__, result.updates) == (
        "Done",
        {"maas_system_id": wf.maas_system_id, "erase_mode": "quick"},
    )


def test_preflight_refuses_while_allocations_are_active(bench: Bench) -> None:
    wf = decommission(bench, "q2")
    Allocation.objects.create(node=wf.node, holder="tenant-7")
    result, _ = run(wf, "preflight")
    assert (type(result).__name__, result.failure_class) == ("Fail", "preflight")
    assert "tenant-7" in result.message


def test_preflight_fails_closed_when_the_machine_is_gone(bench: Bench) -> None:
    wf = decommission(bench, "q3")
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="gone00", hostname="nobody")
    result, _ = run(wf, "preflight")
    assert (type(result).__name__, result.failure_class) == ("Fail", "preflight")


def test_drain_takes_the_node_out_of_its_pool_once(bench: Bench) -> None:
    wf = decommission(bench, "q4")
    assert run(wf, "drain")[0].message == "node drained from its pool (was active)"
    assert Node.objects.get(pk=wf.node_id).state == "draining"
    assert run(wf, "drain")[0].message == "node already draining"


def test_release_sends_the_policy_erase_once_and_waits(bench: Bench) -> None:
    bench.policy(erase_mode="secure")
    wf = decommission(bench, "q5")
    Decommission.objects.filter(pk=wf.pk).update(erase_mode="secure")
    result, events = run(wf, "release")
    assert type(result).__name__ == "Wait"
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]
    action = next(data for kind, _, data in events if kind == "maas.action")
    assert action["erase_mode"] == "secure"
    wf.refresh_from_db()
    assert wf.release_requested is True  # stored before the call: a cancel quarantines
    bench.sim.advance(7200)
    result, _ = run(wf, "release")
    assert (type(result).__name__, result.updates["erased"]) == ("Done", True)
    # each disk MAAS listed before the release has its own line of the wipe's output
    evidence = result.updates["erase_evidence"]
    assert evidence["erased"] is True and evidence["mode"] == "secure"
    assert {d["name"]: d["outcome"] for d in evidence["disks"]} == {
        "nvme0n1": "erased",
        "nvme1n1": "erased",
    }
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]


def test_a_failed_erase_without_the_fallback_holds_with_disks_not_erased(bench: Bench) -> None:
    bench.policy(release_fallback_allowed=False)
    wf = decommission(bench, "q6", faults={"erase_failure": [1]})
    run(wf, "release")
    bench.sim.advance(7200)
    result, _ = run(wf, "release")
    assert (type(result).__name__, result.failure_class, result.updates) == (
        "Hold",
        "erase_failed",
        {"erased": False},
    )
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]


def test_retire_deletes_the_machine_unless_policy_keeps_it(bench: Bench) -> None:
    wf = decommission(bench, "q7", Mode.FULL, status="ready")
    bench.policy(delete_machine_on_full_decommission=False)
    assert run(wf, "retire")[0].message == "machine left Ready in MAAS (policy keeps it)"
    bench.policy(delete_machine_on_full_decommission=True)
    result, _ = run(wf, "retire")
    assert (result.message, result.updates) == (
        "machine deleted from MAAS",
        {"machine_deleted": True},
    )
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.delete"]


def test_storage_cleanup_completes_only_after_a_confirmed_erase(bench: Bench) -> None:
    wf = decommission(bench, "q8")
    result, _ = run(wf, "complete")
    assert (type(result).__name__, result.failure_class) == ("Hold", "not_erased")
    Decommission.objects.filter(pk=wf.pk).update(erased=True)
    assert type(run(wf, "complete")[0]).__name__ == "Done"


@pytest.mark.parametrize(
    ("mode", "erase", "quick", "secure"),
    [
        ("none", "false", "false", "false"),
        ("quick", "true", "true", "false"),
        ("secure", "true", "false", "true"),
    ],
)
def test_release_sends_the_erase_options_policy_names(
    bench: Bench, mode: str, erase: str, quick: str, secure: str
) -> None:
    wf = decommission(bench, f"q9{mode}")
    Decommission.objects.filter(pk=wf.pk).update(erase_mode=mode)
    result, events = run(wf, "release")
    [sent] = bench.sim.sent("machine.release", wf.maas_system_id)
    assert (sent["erase"], sent["quick_erase"], sent["secure_erase"]) == (erase, quick, secure)
    assert (result.message, result.system_id) == ("releasing", wf.maas_system_id)
    said = "no erase" if mode == "none" else f"{mode} erase"
    [action] = [m for k, m, _ in events if k == "maas.action"]
    assert action.startswith(f"release sent ({said}): MAAS answered ")


def test_a_disk_the_wipe_could_not_erase_holds_and_is_named(bench: Bench) -> None:
    """MAAS's trap, through the simulator: a failed quick wipe leaves the result Passed and
    the machine Ready; the disk's own line says it was not wiped, and that decides."""
    wf = decommission(bench, "q9", faults={"erase_fails": ["nvme1n1"]})
    run(wf, "release")
    bench.sim.advance(7200)
    result, events = run(wf, "release")
    assert (type(result).__name__, result.failure_class) == ("Hold", "not_erased")
    assert "nvme1n1" in result.message and "nvme0n1" not in result.message
    wf.refresh_from_db()
    disks = {d["name"]: d["outcome"] for d in wf.erase_evidence["disks"]}
    assert disks == {"nvme0n1": "erased", "nvme1n1": "failed"}
    assert wf.erase_evidence["result_status"] == "Passed"
    assert "erase.unproven" in [e[0] for e in events]
    # never left allocatable: taken back from MAAS's Ready pool and marked Broken, the disk named
    machine = bench.sim.model.machines[wf.maas_system_id]
    assert machine.status.label == "Broken"
    assert (
        "nvme1n1" in machine.error_description and "NOT known erased" in machine.error_description
    )
    assert bench.sim.mutations()[-2:] == ["machines.allocate", "machine.mark_broken"]
    assert "machine left Broken in MAAS" in result.message


# What an operator would notice if a rule of the decommission stages went missing.


def step(wf: Decommission, stage: str = "release") -> Any:
    """One step of ``stage`` recorded as the engine records it (its scratch data kept)."""
    return run_stage("decommission", wf, stage, record=True)


def erasing_since(wf: Decommission, seconds_ago: float) -> None:
    from datetime import timedelta

    from django.utils import timezone

    wf.refresh_from_db()
    since = (timezone.now() - timedelta(seconds=seconds_ago)).isoformat()
    Decommission.objects.filter(pk=wf.pk).update(
        stage_data={**wf.stage_data, "erasing_since": since}
    )


def kinds(events: list[Any]) -> list[str]:
    return [kind for kind, _, _ in events]


def test_an_erase_stuck_past_the_policy_limit_counts_as_failed(bench: Bench) -> None:
    bench.policy(erase_stuck_seconds=60, release_fallback_allowed=False)
    wf = decommission(bench, "s1", faults={"release_stuck": True})
    assert type(step(wf)[0]).__name__ == "Wait"  # release sent; MAAS starts erasing
    result, _ = step(wf)
    assert (type(result).__name__, result.message) == ("Wait", "erasing disks")
    assert 60 < result.check_in <= 61  # woken when the erase becomes stuck, not 10 min later
    erasing_since(wf, 59)
    assert type(step(wf)[0]).__name__ == "Wait"  # not yet
    erasing_since(wf, 61)
    result, events = step(wf)
    assert (type(result).__name__, result.failure_class) == ("Hold", "erase_failed")
    # MAAS never times out a release's scripts: the stage's own clock decides
    assert result.message == (
        "disk erase failed (Releasing for more than 60s) and policy forbids the no-erase "
        "fallback: machine left Releasing in MAAS; disks NOT erased; node quarantined"
    )
    assert "erase.failed" in kinds(events)
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]


def test_a_stuck_erase_in_releasing_is_marked_broken_as_maas_cannot_abort_it(
    bench: Bench,
) -> None:
    """Our erase runs in Releasing, which MAAS cannot abort: the fallback says so and marks the
    machine Broken at once; once failed, the stage never re-judges the erase."""
    bench.policy(erase_stuck_seconds=60, release_fallback_allowed=True)
    wf = decommission(bench, "s2", faults={"release_stuck": True})
    step(wf)
    step(wf)
    erasing_since(wf, 61)
    result, events = step(wf)
    assert (type(result).__name__, result.failure_class, result.updates) == (
        "Hold",
        "erase_failed",
        {"erased": False, "fallback_used": True},
    )
    assert result.message == (
        "disk erase failed (Releasing for more than 60s); the fallback left the machine "
        "Broken in MAAS (out of the Ready pool): disks NOT erased; node quarantined"
    )
    steps = [m for kind, m, _ in events if kind == "fallback.step"]
    assert steps[0] == "abort: MAAS cannot abort a machine in Releasing"
    assert steps[1].startswith("mark-broken (keeps the unerased machine out of the Ready pool)")
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release", "machine.mark_broken"]
    [broken] = bench.sim.sent("machine.mark_broken", wf.maas_system_id)
    assert broken["comment"] == f"erase failed (decommission {wf.pk}, storage_cleanup)"
    assert Api(bench.sim).status(wf.maas_system_id) == "Broken"


def test_a_stuck_disk_erasing_is_aborted_then_the_next_step_marks_the_machine_broken(
    bench: Bench,
) -> None:
    """A release someone else sent with wipe-disks alone runs in Disk erasing, which MAAS can
    abort: the fallback aborts it, waits for the abort to land, then marks it Broken."""
    bench.policy(erase_stuck_seconds=60, release_fallback_allowed=True)
    wf = decommission(bench, "s2b", faults={"release_stuck": True})
    assert Api(bench.sim).ok(wf.maas_system_id, "release", erase="true")["status"] == 14
    step(wf)
    erasing_since(wf, 61)
    result, events = step(wf)
    assert (type(result).__name__, result.message) == (
        "Wait",
        "fallback: waiting for the erase to stop",
    )
    assert kinds(events)[-3:] == ["erase.failed", "fallback.started", "fallback.step"]
    assert events[-1][1] == "abort: MAAS answered Disk erasing"
    [abort] = bench.sim.sent("machine.abort", wf.maas_system_id)
    assert abort["comment"] == f"abort (decommission {wf.pk}, storage_cleanup)"
    bench.sim.advance(120)  # the abort lands: Failed disk erasing
    result, events = step(wf)
    assert (type(result).__name__, result.failure_class) == ("Hold", "erase_failed")
    assert "erase.failed" not in kinds(events)
    assert bench.sim.mutations(wf.maas_system_id) == [
        "machine.release",
        "machine.abort",
        "machine.mark_broken",
    ]


def test_a_failed_erase_with_the_fallback_marks_the_machine_broken(bench: Bench) -> None:
    bench.policy(release_fallback_allowed=True)
    wf = decommission(bench, "s3", faults={"erase_failure": [1]})
    step(wf)
    bench.sim.advance(7200)
    result, events = step(wf)
    assert (type(result).__name__, result.failure_class) == ("Hold", "erase_failed")
    assert "the fallback left the machine Broken in MAAS" in result.message
    messages = [m for kind, m, _ in events if kind == "fallback.step"]
    assert messages[0] == "abort: nothing in flight (MAAS shows Releasing failed)"
    assert messages[1].startswith("mark-broken (keeps the unerased machine out of the Ready pool)")
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release", "machine.mark_broken"]


def test_a_ready_machine_is_allocated_so_maas_can_erase_it(bench: Bench) -> None:
    wf = decommission(bench, "s4", status="ready")
    result, events = run(wf, "release")
    assert (type(result).__name__, result.message) == ("Wait", "releasing")
    assert bench.sim.mutations()[-2:] == ["machines.allocate", "machine.release"]
    assert (
        "maas.action",
        "allocated the Ready machine so MAAS can erase its disks: Allocated",
    ) in [(k, m) for k, m, _ in events]
    [sent] = bench.sim.sent("machine.release", wf.maas_system_id)
    assert (sent["erase"], sent["quick_erase"]) == ("true", "true")
    [allocate] = bench.sim.sent("machines.allocate")
    assert allocate["comment"] == (
        f"allocate to erase its disks (decommission {wf.pk}, storage_cleanup)"
    )


def test_a_ready_machine_that_needs_no_erase_is_released_as_it_is(bench: Bench) -> None:
    wf = decommission(bench, "s5", status="ready")
    Decommission.objects.filter(pk=wf.pk).update(erase_mode="none")
    result, _ = run(wf, "release")
    assert (type(result).__name__, result.message, result.updates) == (
        "Done",
        "released: MAAS shows Ready; no erase (policy erase_mode none)",
        {"erased": None},
    )
    assert bench.sim.mutations(wf.maas_system_id) == []


def test_a_machine_erased_earlier_in_the_workflow_is_not_erased_again(bench: Bench) -> None:
    wf = decommission(bench, "s6", status="ready")
    Decommission.objects.filter(pk=wf.pk).update(erased=True)
    result, _ = run(wf, "release")
    assert (type(result).__name__, result.message, result.updates) == (
        "Done",
        "released: MAAS shows Ready; disks were erased earlier in this workflow",
        {"erased": True},
    )
    assert bench.sim.mutations(wf.maas_system_id) == []


def test_a_machine_maas_cannot_release_fails(bench: Bench) -> None:
    wf = decommission(bench, "s7", status="new")
    result, _ = run(wf, "release")
    assert (type(result).__name__, result.failure_class, result.message) == (
        "Fail",
        "unexpected_state",
        "machine is New in MAAS; cannot release it",
    )
    assert bench.sim.mutations(wf.maas_system_id) == []


def test_a_release_in_progress_is_waited_for(bench: Bench) -> None:
    wf = decommission(bench, "s8", faults={"release_stuck": True})
    Decommission.objects.filter(pk=wf.pk).update(erase_mode="none")
    step(wf)
    result, _ = step(wf)
    assert (type(result).__name__, result.message, result.check_in) == ("Wait", "releasing", 600)
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]


def test_preflight_names_every_problem_at_once(bench: Bench) -> None:
    bench.policy(erase_mode="none")
    wf = decommission(bench, "s9")
    Allocation.objects.create(node=wf.node, holder="tenant-9")
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="", hostname="nobody")
    result, _ = run(wf, "preflight")
    alloc = Allocation.objects.get(node=wf.node)
    assert result.data["problems"] == [
        "policy erase_mode is none: storage cleanup needs quick or secure",
        f"node has active allocations: {alloc.pk} (tenant-9); drain them or start again "
        "with force_release",
        "no MAAS machine matches nobody (system id '')",
    ]
    assert result.message == "; ".join(result.data["problems"])


def test_a_reimage_needs_an_active_profile(bench: Bench) -> None:
    wf = decommission(bench, "s10", Mode.REIMAGE)
    bench.profile.status = "retired"
    bench.profile.save()
    result, _ = run(wf, "preflight")
    assert result.data["problems"] == ["reimage needs an active profile to deploy"]


def test_preflight_finds_a_machine_by_hostname_when_its_recorded_id_is_gone(
    bench: Bench,
) -> None:
    wf = decommission(bench, "s11")
    sid = wf.maas_system_id
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="gone00")
    result, events = run(wf, "preflight")
    assert (type(result).__name__, result.updates["maas_system_id"]) == ("Done", sid)
    assert ("maas.observed", "recorded machine gone00 is gone from MAAS") in [
        (k, m) for k, m, _ in events
    ]


def test_preflight_fails_closed_when_two_machines_share_the_hostname(bench: Bench) -> None:
    bench.sim.model.allow_duplicate_hostnames = True
    wf = decommission(bench, "s12")
    sid = wf.maas_system_id
    other = bench.sim.add(hostname="s12", status="ready")
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="")
    result, events = run(wf, "preflight")
    assert (type(result).__name__, result.failure_class) == ("Fail", "preflight")
    observed = [m for k, m, _ in events if k == "maas.observed"]
    assert observed in (
        [f"2 MAAS machines are named s12: {sid}, {other}"],
        [f"2 MAAS machines are named s12: {other}, {sid}"],
    )


def test_drain_refuses_a_node_that_is_not_in_service(bench: Bench) -> None:
    wf = decommission(bench, "s13")
    Node.objects.filter(pk=wf.node_id).update(state="registered")
    result, _ = run(wf, "drain")
    assert (type(result).__name__, result.failure_class, result.message) == (
        "Fail",
        "node_state",
        "node is registered; it cannot be drained",
    )
    Node.objects.filter(pk=wf.node_id).update(state="quarantined")
    assert run(wf, "drain")[0].message == "node drained from its pool (was quarantined)"


def test_retire_of_a_machine_already_gone(bench: Bench) -> None:
    wf = decommission(bench, "s14", Mode.FULL, status="ready")
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="gone00")
    result, _ = run(wf, "retire")
    assert (result.message, result.updates) == (
        "machine already gone from MAAS",
        {"machine_deleted": True},
    )


@pytest.mark.parametrize(
    ("mode", "erased", "message"),
    [
        (Mode.REIMAGE, None, "reimage complete; no erase (policy)"),
        (Mode.FULL, True, "full complete; disks erased"),
        (Mode.FULL, False, "full complete; disks NOT erased"),
    ],
)
def test_complete_says_what_became_of_the_disks(
    bench: Bench, mode: str, erased: bool | None, message: str
) -> None:
    wf = decommission(bench, f"s15{mode}{erased}", mode)
    Decommission.objects.filter(pk=wf.pk).update(erased=erased)
    assert run(wf, "complete")[0].message == message


def test_cancel_aborts_an_erase_once_and_says_when_maas_cannot(bench: Bench) -> None:
    wf = decommission(bench, "s16", faults={"release_stuck": True})
    step(wf)
    result, events = run(wf, "cancel")
    assert (type(result).__name__, result.message) == ("Done", "cancelled; MAAS shows Releasing")
    assert (
        "maas.observed",
        "MAAS cannot abort a machine in Releasing: the release (and its erase) runs on",
    ) in [(k, m) for k, m, _ in events]
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]
    set_status(bench, wf.maas_system_id, S.DISK_ERASING)  # an erase MAAS can abort
    result, _ = run(wf, "cancel")
    assert result.message == "cancelled; MAAS shows Disk erasing"
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release", "machine.abort"]


def test_cancel_leaves_a_deployed_machine_alone(bench: Bench) -> None:
    wf = decommission(bench, "s17")
    result, _ = run(wf, "cancel")
    assert result.message == "cancelled; MAAS shows Deployed"
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="")
    assert run(wf, "cancel")[0].message == "cancelled before MAAS was touched"
    assert bench.sim.mutations() == []


def test_reset_aborts_an_erase_and_forgets_the_last_attempt(bench: Bench) -> None:
    wf = decommission(bench, "s18", faults={"release_stuck": True})
    step(wf)
    set_status(bench, wf.maas_system_id, S.DISK_ERASING)
    result, _ = run(wf, "reset")
    assert (type(result).__name__, result.updates) == (
        "Done",
        {"erased": None, "fallback_used": False, "release_requested": False},
    )
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release", "machine.abort"]
    Decommission.objects.filter(pk=wf.pk).update(maas_system_id="gone00")
    result, _ = run(wf, "reset")
    assert (type(result).__name__, result.failure_class, result.message) == (
        "Fail",
        "not_in_maas",
        "machine gone00 is gone from MAAS",
    )


def test_release_keeps_what_the_erase_must_account_for_before_sending_it(bench: Bench) -> None:
    wf = decommission(bench, "t1")
    run(wf, "release")
    assert wf.erase_evidence["mode"] == "quick"
    assert wf.erase_evidence["outcome"] == "requested"
    assert {d["name"] for d in wf.erase_evidence["disks"]} == {"nvme0n1", "nvme1n1"}
    none = decommission(bench, "t2", ipmi="10.2.0.2")
    Decommission.objects.filter(pk=none.pk).update(erase_mode="none")
    run(none, "release")
    assert none.release_requested is True and not none.erase_evidence


def set_status(bench: Bench, sid: str, status: S) -> None:
    sim = bench.sim.model
    with sim.lock:
        sim.set_status(sim.machines[sid], status)


def test_a_release_maas_has_not_started_is_waited_for_not_sent_again(bench: Bench) -> None:
    wf = decommission(bench, "t3", faults={"release_stuck": True})
    step(wf)
    set_status(bench, wf.maas_system_id, S.DEPLOYED)
    result, _ = step(wf)
    assert (type(result).__name__, result.message, result.check_in) == (
        "Wait",
        "waiting for MAAS to start the release",
        30,
    )
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release"]


def test_a_release_maas_failed_fails_the_stage(bench: Bench) -> None:
    wf = decommission(bench, "t4", faults={"release_stuck": True})
    Decommission.objects.filter(pk=wf.pk).update(erase_mode="none")
    step(wf)
    set_status(bench, wf.maas_system_id, S.FAILED_RELEASING)
    result, _ = step(wf)
    assert (type(result).__name__, result.failure_class) == ("Fail", "release_failed")
    assert result.message.startswith("MAAS could not release the machine: ")


def test_releasing_failed_after_an_erase_is_judged_by_the_evidence(bench: Bench) -> None:
    """Our erase runs as a release script: Releasing failed means wipe-disks failed, or the
    release after it did. No evidence: a failed erase; every disk proven: a failed release."""
    bench.policy(release_fallback_allowed=False)
    failed = decommission(bench, "t4a", faults={"erase_failure": [1]})
    step(failed)
    bench.sim.advance(7200)
    assert Api(bench.sim).status(failed.maas_system_id) == "Releasing failed"
    result, _ = step(failed)
    assert (type(result).__name__, result.failure_class) == ("Hold", "erase_failed")
    failed.refresh_from_db()
    assert failed.erase_evidence["erased"] is False
    assert failed.erase_evidence["result_status"] == "Failed"

    erased = decommission(bench, "t4b", ipmi="10.2.0.3")
    step(erased)
    bench.sim.advance(7200)  # the wipe passed and MAAS released the machine...
    set_status(bench, erased.maas_system_id, S.FAILED_RELEASING)  # ...then failed its power-off
    result, _ = step(erased)
    assert (type(result).__name__, result.failure_class, result.updates) == (
        "Fail",
        "release_failed",
        {"erased": True},
    )
    assert result.message.startswith("every disk was erased (evidence kept) but MAAS could not")
    erased.refresh_from_db()
    assert erased.erase_evidence["erased"] is True


def test_only_a_run_this_release_made_is_evidence(bench: Bench) -> None:
    """MAAS keeps a machine's last three release runs: a wipe from an earlier release (its
    success lines and all) proves nothing about this one."""
    wf = decommission(bench, "t4c")
    sid = wf.maas_system_id
    earlier = Api(bench.sim).ok(sid, "release", erase="true", quick_erase="true", scripts="wipe")
    assert earlier["status_name"] == "Releasing"
    bench.sim.advance(7200)
    assert Api(bench.sim).post("machines/", "allocate", data={"system_id": sid}).ok
    step(wf)  # our release, with erase: a new run...
    sim = bench.sim.model
    with sim.lock:  # ...that MAAS never made (a release it took for a redundant retry)
        m = sim.machines[sid]
        newest = max((ss for ss in m.script_sets if ss.type == 3), key=lambda ss: ss.id)
        m.script_sets.remove(newest)
    bench.sim.advance(7200)
    result, _ = step(wf)
    assert (type(result).__name__, result.failure_class) == ("Hold", "not_erased")
    wf.refresh_from_db()  # kept with the row before the machine is taken out of the pool
    evidence = wf.erase_evidence
    assert {d["outcome"] for d in evidence["disks"]} == {"no_evidence"}
    assert evidence["run_id"] is None


def test_reset_says_the_next_attempt_starts_from_preflight(bench: Bench) -> None:
    wf = decommission(bench, "t5")
    result, _ = run(wf, "reset")
    assert result.message == "reset: the next attempt starts from preflight"
    assert bench.sim.mutations() == []


def test_cancel_says_what_it_aborted(bench: Bench) -> None:
    wf = decommission(bench, "t6", faults={"release_stuck": True})
    step(wf)
    set_status(bench, wf.maas_system_id, S.DISK_ERASING)
    _, events = run(wf, "cancel")
    assert ("maas.action", "aborted Disk erasing") in [(k, m) for k, m, _ in events]


# -- the reimage child and adopt ---------------------------------------------------------------


def latest_child(wf: Decommission) -> int:
    child = family.latest_child(wf)
    assert child is not None
    return int(child.pk)


def test_redeploy_starts_one_child_onboarding_and_follows_it(bench: Bench) -> None:
    from onboarding.models import Onboarding

    wf = decommission(bench, "t7", Mode.REIMAGE)
    Node.objects.filter(pk=wf.node_id).update(state="draining")  # as the drain stage left it
    result, events = run(wf, "redeploy")
    child = Onboarding.objects.get(parent_kind="decommission", parent_id=wf.pk)
    assert (type(result).__name__, result.message) == (
        "Wait",
        f"redeploying through onboarding {child.pk}",
    )
    [(_, message, data)] = [e for e in events if e[0] == "reimage.started"]
    assert data == {"onboarding_id": child.pk}
    assert message.startswith(f"redeploying through onboarding {child.pk} (conformance")
    assert (child.stage, child.checkpoint, child.parent_kind, child.parent_id) == (
        "conformance",
        "commission",
        "decommission",
        wf.pk,
    )
    assert child.layout_kept  # storage_pxe and reachability do not run again
    assert (child.maas_system_id, child.node_id, child.hostname) == (
        wf.maas_system_id,
        wf.node_id,
        "t7",
    )
    assert child.parent_attempt == wf.attempt
    assert Node.objects.get(pk=wf.node_id).state == "provisioning"
    assert type(run(wf, "redeploy")[0]).__name__ == "Wait"
    assert Onboarding.objects.filter(parent_id=wf.pk).count() == 1  # not a second child

    Onboarding.objects.filter(pk=child.pk).update(state="running", stage="deploy")
    result, _ = run(wf, "redeploy")
    assert result.message == f"onboarding {child.pk} is running at deploy"
    Onboarding.objects.filter(pk=child.pk).update(state="succeeded")
    result, _ = run(wf, "redeploy")
    assert (type(result).__name__, result.message) == (
        "Done",
        f"onboarding {child.pk} redeployed and enrolled the node",
    )


def test_a_failed_or_cancelled_child_fails_the_redeploy_until_a_new_attempt(
    bench: Bench,
) -> None:
    from onboarding.models import Onboarding

    wf = decommission(bench, "t8", Mode.REIMAGE)
    Node.objects.filter(pk=wf.node_id).update(state="draining")  # as the drain stage left it
    run(wf, "redeploy")
    child = latest_child(wf)
    Onboarding.objects.filter(pk=child).update(
        state="failed", stage="deploy", reason="curtin failed", failure_class="deploy_failed"
    )
    result, _ = run(wf, "redeploy")
    assert (type(result).__name__, result.failure_class, result.message, result.data) == (
        "Fail",
        "reimage",
        f"redeploy failed in onboarding {child} at deploy: curtin failed",
        {"onboarding_id": child, "onboarding_failure_class": "deploy_failed"},
    )
    Onboarding.objects.filter(pk=child).update(state="cancelled")
    result, _ = run(wf, "redeploy")
    assert (result.failure_class, result.message) == (
        "reimage",
        f"redeploy onboarding {child} was cancelled",
    )
    Decommission.objects.filter(pk=wf.pk).update(attempt=2)  # a retry of the stage
    result, _ = run(wf, "redeploy")
    assert type(result).__name__ == "Wait"
    newer = Onboarding.objects.get(pk=latest_child(wf))
    assert newer.pk != child and newer.parent_attempt == 2


def test_cancel_cancels_an_open_child_first(bench: Bench) -> None:
    from onboarding.models import Onboarding

    wf = decommission(bench, "t9", Mode.REIMAGE)
    Node.objects.filter(pk=wf.node_id).update(state="draining")  # as the drain stage left it
    run(wf, "redeploy")
    child = latest_child(wf)
    Onboarding.objects.filter(pk=child).update(state="waiting", stage="deploy")
    result, _ = run(wf, "cancel")
    assert (type(result).__name__, result.message) == (
        "Wait",
        f"waiting for onboarding {child} to cancel",
    )
    assert Onboarding.objects.get(pk=child).state == "cancelling"
    assert bench.sim.mutations() == []  # the child drives the machine, not us
    Onboarding.objects.filter(pk=child).update(state="manual_intervention")
    assert run(wf, "cancel")[0].message == "cancelled; MAAS shows Deployed"


@pytest.mark.parametrize(
    ("mode", "status", "erased", "stage"),
    [
        (Mode.REIMAGE, "ready", True, "redeploy"),
        (Mode.FULL, "ready", True, "retire"),
        (Mode.STORAGE_CLEANUP, "ready", True, "complete"),
        (Mode.STORAGE_CLEANUP, "ready", None, "release"),
        (Mode.STORAGE_CLEANUP, "deployed", None, "release"),
    ],
)
def test_adopt_names_the_stage_that_matches_maas(
    bench: Bench, mode: str, status: str, erased: bool | None, stage: str
) -> None:
    from decommission.stages import adopt_stage

    wf = decommission(bench, f"t10{mode}{status}{erased}", mode, status=status)
    Decommission.objects.filter(pk=wf.pk).update(erased=erased)
    wf.refresh_from_db()
    label = "Ready" if status == "ready" else "Deployed"
    assert adopt_stage(wf) == (stage, {"maas_status": label, "adopted_stage": stage})


def test_adopt_of_a_machine_gone_from_maas(bench: Bench) -> None:
    from decommission.stages import adopt_stage
    from maas_domain.errors import Conflict

    full = decommission(bench, "t11", Mode.FULL)
    Decommission.objects.filter(pk=full.pk).update(maas_system_id="gone00")
    full.refresh_from_db()
    assert adopt_stage(full) == (
        "complete",
        {"maas_status": "missing", "adopted_stage": "complete"},
    )
    cleanup = decommission(bench, "t12", ipmi="10.2.0.2")
    Decommission.objects.filter(pk=cleanup.pk).update(maas_system_id="gone00")
    cleanup.refresh_from_db()
    with pytest.raises(Conflict) as refused:
        adopt_stage(cleanup)
    assert refused.value.message == "cannot adopt: the machine is gone from MAAS"


def test_adopt_refuses_a_machine_in_a_state_no_stage_handles(bench: Bench) -> None:
    from decommission.stages import adopt_stage
    from maas_domain.errors import Conflict

    wf = decommission(bench, "t13", status="new")
    Decommission.objects.filter(pk=wf.pk).update(state="failed")
    wf.refresh_from_db()
    with pytest.raises(Conflict) as refused:
        adopt_stage(wf)
    assert refused.value.extra["current_state"] == "failed"
    assert refused.value.message == (
        "cannot adopt: MAAS shows New; fix it in MAAS, or restart-clean"
    )
    assert refused.value.extra["maas_status"] == "New"


def test_adopt_of_a_redeployed_machine_goes_back_to_its_child(bench: Bench) -> None:
    from decommission.stages import adopt_stage

    wf = decommission(bench, "t14", Mode.REIMAGE)
    Node.objects.filter(pk=wf.node_id).update(state="draining")
    run(wf, "redeploy")
    assert adopt_stage(wf) == ("redeploy", {"maas_status": "Deployed", "adopted_stage": "redeploy"})


def test_an_erase_proven_late_takes_the_node_out_of_quarantine(bench: Bench) -> None:
    wf = decommission(bench, "t15")
    Node.objects.filter(pk=wf.node_id).update(state="quarantined")
    run(wf, "release")
    bench.sim.advance(7200)
    result, _ = run(wf, "release")
    assert (type(result).__name__, result.updates["erased"]) == ("Done", True)
    assert Node.objects.get(pk=wf.node_id).state == "draining"


def test_reset_does_not_abort_twice(bench: Bench) -> None:
    wf = decommission(bench, "t16", faults={"release_stuck": True})
    step(wf)
    set_status(bench, wf.maas_system_id, S.DISK_ERASING)
    run(wf, "reset")
    bench.sim.advance(1)  # the abort lands; then, as if it had not yet, Disk erasing again
    set_status(bench, wf.maas_system_id, S.DISK_ERASING)
    run(wf, "reset")
    assert bench.sim.mutations(wf.maas_system_id) == ["machine.release", "machine.abort"]


def test_a_machine_maas_will_not_mark_broken_holds_and_says_so(bench: Bench) -> None:
    bench.policy(release_fallback_allowed=True)
    wf = decommission(bench, "t17", faults={"erase_failure": [1]})
    step(wf)
    bench.sim.advance(7200)
    sim = bench.sim.model
    with sim.lock:  # taken by someone else meanwhile: MAAS refuses our mark-broken
        m = sim.machines[wf.maas_system_id]
        m.owner = "someone-else"
        m.touch(sim.now())
    result, events = step(wf)
    assert (type(result).__name__, result.failure_class, result.updates) == (
        "Hold",
        "erase_failed",
        {"erased": False, "fallback_used": True},
    )
    assert result.message.endswith(
        "and MAAS did not mark the machine Broken: left Releasing failed in MAAS; disks NOT "
        "erased; node quarantined"
    )
    refused = [m for k, m, _ in events if k == "fallback.step" and "MAAS refused" in m]
    assert len(refused) == 1  # asked once

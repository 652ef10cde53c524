"""Each decommission stage function, run once against the simulator with no broker and no
worker (tests/support/stages.py); the whole-flow tests (test_flows.py) keep one run per
behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from decommission.models import Decommission, Mode
from maas_client.status import NodeStatus
from maas_domain.models import Allocation, Node
from tests.support.stages import Bench, run_stage

pytestmark = pytest.mark.django_db
S = NodeStatus


def decommission(
    bench: Bench, hostname: str, mode: str = Mode.STORAGE_CLEANUP, **machine: Any
) -> Decommission:
    machine.setdefault("status", "deployed")
    sid = bench.sim.add(hostname=hostname, **machine)
    node = bench.node(hostname, "10.2.0.1", maas_system_id=sid, state="active")
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
    assert result.updates == {"machine_deleted": True}
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
    run(wf, "release")
    [sent] = bench.sim.sent("machine.release", wf.maas_system_id)
    assert (sent["erase"], sent["quick_erase"], sent["secure_erase"]) == (erase, quick, secure)


def test_a_disk_the_wipe_could_not_erase_holds_and_is_named(bench: Bench) -> None:
    """MAAS's trap, through the simulator: a failed quick wipe leaves the result Passed and
    the machine Ready; the disk's own line says it was not wiped, and that decides."""
    wf = decommission(bench, "q9", faults={"erase_fails": ["nvme1n1"]})
    run(wf, "release")
    bench.sim.advance(7200)
    result, events = run(wf, "release")
    assert (type(result).__name__, result.failure_class) == ("Hold", "not_erased")
    assert "nvme1n1" in result.message and "nvme0n1" not in result.message
    disks = {d["name"]: d["outcome"] for d in result.updates["erase_evidence"]["disks"]}
    assert disks == {"nvme0n1": "erased", "nvme1n1": "failed"}
    assert result.updates["erase_evidence"]["result_status"] == "Passed"
    assert "erase.unproven" in [e[0] for e in events]

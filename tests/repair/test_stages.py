"""The repair stages one at a time against the simulator (its MAAS rules: mark broken only for
the owner, mark fixed answers Deployed for a machine broken while deployed): what each sends,
what each refuses."""

from __future__ import annotations

from typing import Any

import pytest

from maas_domain.models import Cordon, Node
from repair.models import Repair
from repair.packet import failing
from tests.support.stages import Bench, run_stage

pytestmark = pytest.mark.django_db


def repair(bench: Bench, hostname: str, state: str = "quarantined", **machine: Any) -> Repair:
    machine.setdefault("status", "ready")
    sid = bench.sim.add(hostname=hostname, **machine)
    node = bench.node(hostname, "10.6.0.1", maas_system_id=sid, state=state)
    return Repair.objects.create(
        site=bench.site, node=node, profile=bench.profile, hostname=hostname,
        maas_system_id=sid, fault_class="hardware_nonconformant", ticket="T-9",
        correlation_id="stage-test",
    )  # fmt: skip


def run(wf: Repair, stage: str) -> Any:
    return run_stage("repair", wf, stage)


def name(result: Any) -> str:
    return type(result).__name__


def test_preflight_refuses_a_machine_a_tenant_may_have_written_to(bench: Bench) -> None:
    wf = repair(bench, "rs1", status="deployed")
    result, _ = run(wf, "preflight")
    assert (name(result), result.failure_class) == ("Fail", "preflight")
    assert "MAAS shows Deployed" in result.message and "storage-cleanup" in result.message
    assert bench.sim.mutations() == []


def test_hand_over_allocates_an_unowned_ready_machine_then_marks_it_broken(bench: Bench) -> None:
    wf = repair(bench, "rs2")
    result, _ = run(wf, "hand_over")
    assert name(result) == "Done", result
    assert bench.sim.mutations() == ["machines.allocate", "machine.mark_broken"]
    [sent] = bench.sim.sent("machine.mark_broken", wf.maas_system_id)
    assert (
        sent["comment"] == f"hardware_nonconformant: handed to repair (repair {wf.pk}; ticket T-9)"
    )
    node = Node.objects.get(pk=wf.node_id)
    assert node.state == "in_repair"
    assert Cordon.objects.get(node=node, lifted_at=None).source == f"repair:{wf.pk}"
    again, _ = run(wf, "hand_over")  # adopts what MAAS shows: nothing sent twice
    assert name(again) == "Done" and len(bench.sim.mutations()) == 2


def test_hand_over_marks_an_owned_failed_machine_broken_directly(bench: Bench) -> None:
    wf = repair(bench, "rs3", status="failed_deployment", owner="admin")
    result, _ = run(wf, "hand_over")
    assert name(result) == "Done", result
    assert bench.sim.mutations() == ["machine.mark_broken"]


def test_hand_over_refuses_a_new_machine(bench: Bench) -> None:
    wf = repair(bench, "rs4", status="new")
    result, _ = run(wf, "hand_over")
    assert (name(result), result.failure_class) == ("Fail", "unexpected_state")
    assert bench.sim.mutations() == []
    assert Node.objects.get(pk=wf.node_id).state == "quarantined"


def test_in_repair_waits_until_the_repair_is_reported_done(bench: Bench) -> None:
    wf = repair(bench, "rs5", status="broken")
    result, _ = run(wf, "in_repair")
    assert name(result) == "Wait" and result.check_in >= 7 * 24 * 3600
    Repair.objects.filter(pk=wf.pk).update(repaired_by="ops", repair_note="PSU")
    wf.refresh_from_db()
    from django.utils import timezone

    Repair.objects.filter(pk=wf.pk).update(repaired_at=timezone.now())
    result, _ = run(wf, "in_repair")
    assert (name(result), result.message) == ("Done", "repair reported done by ops: PSU")


def test_requalify_fails_closed_when_mark_fixed_answers_deployed(bench: Bench) -> None:
    """MAAS's mark-fixed returns a machine that broke while Deployed to Deployed: no
    commissioning is possible there, so nothing is handed back."""
    wf = repair(bench, "rs6", status="deployed", owner="admin")
    bench.sim.post(f"machines/{wf.maas_system_id}/status", {"status": "broken"})
    Node.objects.filter(pk=wf.node_id).update(state="in_repair")
    result, _ = run(wf, "requalify")
    assert (name(result), result.failure_class) == ("Fail", "unexpected_state")
    assert "Deployed" in result.message
    assert bench.sim.mutations() == ["machine.mark_fixed"]
    assert not Repair.objects.get(pk=wf.pk).events.filter(kind="requalify.started").exists()
    assert Node.objects.get(pk=wf.node_id).state == "in_repair"


def test_the_packet_names_what_failed_from_each_kind_of_evidence() -> None:
    hardware = {"checks": [
        {"requirement": "gpu.count", "expected": "8", "observed": "7", "passed": False},
        {"requirement": "memory", "expected": "512", "observed": "512", "passed": True},
    ]}  # fmt: skip
    assert failing("hardware_nonconformant", hardware) == [
        {"category": "gpu", "requirement": "gpu.count", "expected": "8", "observed": "7"}
    ]
    tests = {"results": [{"script": "gpu-burn", "device": "", "status": "Failed",
                          "passed": False, "output_excerpt": "Xid 79"}]}  # fmt: skip
    assert [(f["category"], f["script"]) for f in failing("acceptance_failed", tests)] == [
        ("test", "gpu-burn")
    ]
    disks = {"disks": [{"name": "nvme1n1", "serial": "S1", "outcome": "no_evidence"},
                       {"name": "nvme0n1", "serial": "S0", "outcome": "erased"}]}  # fmt: skip
    assert [f["disk"] for f in failing("not_erased", disks)] == ["nvme1n1"]
    assert failing("hardware_nonconformant", {"checks": "not a list"}) == []

"""Hardware truth in the onboarding stages (docs/hardware.md), each stage run once against the
simulator's machines and their faults (tests/support/stages.py): the conformance judgement and
its report, warn mode, a machine MAAS knows nothing of, the completion gate that judges a
machine adopted past the stage, and the quarantine with its evidence."""

from __future__ import annotations

from typing import Any

import pytest

from maas_domain.models import AuditLog, ImmutableEvidence, Node, QuarantineEvidence
from onboarding.models import Onboarding
from tests.support.stages import Bench, run_stage
from workflows.kinds import KINDS

pytestmark = pytest.mark.django_db

FABRIC = [
    {"name": f"ens{i}np0", "mac_address": f"52:54:00:ab:00:{i:02x}", "speed": 400000,
     "vendor": "Mellanox Technologies", "product": "MT2910 Family [ConnectX-7]"}
    for i in range(8)
]  # fmt: skip
PXE = {"name": "eno1", "mac_address": "52:54:00:ab:01:01", "subnet": 1}
PROFILE = {
    "gpu": {"pci_ids": ["10de:2330"], "per_numa_node": {"0": 4, "1": 4}},
    "cpu": {"min": 64},
    "memory": {"min_gib": 1024},
    "nics": [
        {"role": "fabric", "count": 8, "min_speed_mbps": 400000, "vendor": "Mellanox"},
        {"role": "pxe", "pxe": True, "count": 1, "min_speed_mbps": 25000},
    ],
    "disks": [{"count": 2, "type": "nvme", "min_size_gb": 900}],
}


def machine(bench: Bench, hostname: str, **spec: Any) -> str:
    sid: str = bench.sim.add(
        hostname=hostname, status=spec.pop("status", "ready"), interfaces=[PXE, *FABRIC], **spec
    )
    model = bench.sim.model
    with model.lock:  # what MAAS said of the machine when it commissioned it
        model.event(model.machines[sid], "INFO", "Commissioning", "GPU 7 not found on bus")
    return sid


def profiled(bench: Bench, **changes: Any) -> None:
    bench.sku.hardware = {**PROFILE, **changes}
    bench.sku.gpu_model = "H100"
    bench.sku.save()


def judged(
    bench: Bench, hostname: str, ipmi: str, **spec: Any
) -> tuple[Any, Onboarding, list[Any]]:
    sid = machine(bench, hostname, **spec)
    wf = bench.onboarding(hostname, ipmi, maas_system_id=sid)
    result, events = run_stage("onboarding", wf, "conformance")
    return result, wf, events


def checks(report: dict[str, Any]) -> dict[str, bool]:
    return {c["requirement"]: c["passed"] for c in report["checks"]}


def test_a_machine_as_its_sku_promises_conforms_with_a_report_of_every_requirement(
    bench: Bench,
) -> None:
    profiled(bench)
    result, _, events = judged(bench, "hw1", "10.6.0.1")
    assert type(result).__name__ == "Done", result
    report = result.updates["hardware_report"]
    assert report["conformant"] is True and report["mode"] == "enforce"
    assert report["sku"] == "gpu-8x" and report["maas_system_id"]
    assert set(checks(report)) == {"gpu.count", "gpu.model", "gpu.per_numa_node", "cpu.count",
                                   "memory", "nics.fabric", "nics.pxe", "disks.0"}  # fmt: skip
    assert all(checks(report).values())
    assert [e[0] for e in events] == ["hardware.conformant"]


def test_a_gpu_off_the_bus_fails_closed_naming_the_count(bench: Bench) -> None:
    profiled(bench)
    result, _, events = judged(bench, "hw2", "10.6.0.2", faults={"gpu_missing": 1})
    assert (type(result).__name__, result.failure_class) == ("Fail", "hardware_nonconformant")
    assert "gpu.count: expected 8 x 10de:2330, observed 7" in result.message
    report = result.updates["hardware_report"]
    assert checks(report)["gpu.count"] is False and checks(report)["gpu.per_numa_node"] is False
    assert report["conformant"] is False
    assert any("GPU 7 not found" in e["message"] for e in report["maas_events"])
    assert ("hardware.nonconformant", True) in [(e[0], e[2].get("enforced")) for e in events]


def test_with_the_comparison_deleted_seven_gpus_would_pass(bench: Bench, monkeypatch: Any) -> None:
    """The test above fails if the judgement is taken away: shown by taking it away."""
    from maas_domain import hardware

    profiled(bench)
    monkeypatch.setattr(hardware, "judge", lambda **kw: [])
    result, _, _ = judged(bench, "hw3", "10.6.0.3", faults={"gpu_missing": 1})
    assert type(result).__name__ == "Done"  # what the product would do without the stage


def test_a_fabric_nic_linking_at_100g_fails_its_role(bench: Bench) -> None:
    profiled(bench)
    result, _, _ = judged(bench, "hw4", "10.6.0.4", faults={"nic_slow": {"ens3np0": 100000}})
    assert result.failure_class == "hardware_nonconformant"
    fabric = next(c for c in result.updates["hardware_report"]["checks"]
                  if c["requirement"] == "nics.fabric")  # fmt: skip
    assert fabric["observed"] == "7 of 8 matching; short: ens3np0 at 100G"


def test_the_bmc_vga_does_not_make_seven_gpus_eight(bench: Bench) -> None:
    """A SKU that states only a count (as every SKU did before profiles) counts accelerators,
    not MAAS's GPU type: the simulated machine's ASPEED VGA is a 'GPU' to MAAS."""
    bench.sku.hardware = {}
    bench.sku.save()
    result, _, _ = judged(bench, "hw5", "10.6.0.5", faults={"gpu_missing": 1})
    assert result.failure_class == "hardware_nonconformant"
    assert "observed 7; not counted: ASPEED" in result.message


def test_warn_mode_records_and_continues(bench: Bench) -> None:
    profiled(bench)
    bench.policy(hardware_conformance="warn")
    result, _, events = judged(bench, "hw6", "10.6.0.6", faults={"gpu_missing": 2})
    assert type(result).__name__ == "Done"
    assert result.updates["hardware_report"]["conformant"] is False
    warned = [e for e in events if e[0] == "hardware.nonconformant"]
    assert warned and warned[0][2]["enforced"] is False
    assert "hardware_conformance is warn" in warned[0][1]


def test_a_sku_stating_nothing_reads_nothing_from_maas(bench: Bench) -> None:
    bench.sku.gpu_count = 0
    bench.sku.save()
    bench.sim.reset_counters()
    result, _, _ = judged(bench, "hw7", "10.6.0.7")
    assert type(result).__name__ == "Done"
    assert bench.sim.count("machine.read") == 0 and bench.sim.count("nodedevices.read") == 0


def test_a_machine_maas_never_commissioned_is_never_judged_conformant(bench: Bench) -> None:
    """Created through the API and not commissioned: MAAS knows only its MACs."""
    from maas_client.client import MaasClient
    from tests.support.maas import API_KEY

    client = MaasClient(bench.sim.url, API_KEY)
    created = client.create_machine(
        hostname="hw8",
        mac_addresses=["52:54:00:ab:09:01"],
        power_parameters={"power_address": "10.6.0.8"},
    )
    sid = created.system_id
    client.close()
    wf = bench.onboarding("hw8", "10.6.0.8", maas_system_id=sid)
    result, _ = run_stage("onboarding", wf, "conformance")
    assert (type(result).__name__, result.failure_class) == ("Fail", "hardware_unknown")
    assert "nothing was judged conformant" in result.message
    assert result.updates["hardware_report"]["conformant"] is False


def test_the_completion_gate_judges_a_machine_adopted_past_conformance(bench: Bench) -> None:
    profiled(bench)
    sid = machine(bench, "hw9", status="deployed", faults={"gpu_missing": 1})
    wf = bench.onboarding("hw9", "10.6.0.9", maas_system_id=sid, token_attempt=1)
    result, _ = run_stage("onboarding", wf, "complete")
    assert result.failure_class == "hardware_nonconformant"


def test_a_nonconformant_machine_quarantines_its_node_with_frozen_evidence(bench: Bench) -> None:
    profiled(bench)
    sid = machine(bench, "hwa", faults={"gpu_missing": 1})
    wf = bench.onboarding("hwa", "10.6.0.10", maas_system_id=sid)
    run_stage("onboarding", wf, "conformance", record=True)
    wf.refresh_from_db()
    assert (wf.state, wf.failure_class) == ("failed", "hardware_nonconformant")
    assert wf.hardware_report["conformant"] is False
    node = Node.objects.get(pk=wf.node_id or 0)
    assert node.state == "quarantined" and node.maas_system_id == sid
    evidence = QuarantineEvidence.objects.get(node=node)
    assert (evidence.kind, evidence.workflow_kind, evidence.workflow_id) == (
        "hardware_nonconformant", "onboarding", wf.pk,
    )  # fmt: skip
    assert evidence.report["checks"] == wf.hardware_report["checks"]
    assert "maas_events" not in evidence.report
    assert any("GPU 7 not found" in e["message"] for e in evidence.maas_events)
    assert [e["kind"] for e in evidence.timeline][-1] == "stage.failed"
    assert AuditLog.objects.filter(action="node.evidence", target_id=str(node.pk)).exists()
    assert wf.events.filter(kind="node.quarantined").exists()
    # frozen: neither the row nor a queryset can change or remove it
    evidence.reason = "edited"
    with pytest.raises(ImmutableEvidence):
        evidence.save()
    with pytest.raises(ImmutableEvidence):
        QuarantineEvidence.objects.filter(pk=evidence.pk).update(reason="edited")
    with pytest.raises(ImmutableEvidence):
        QuarantineEvidence.objects.filter(pk=evidence.pk).delete()


def test_a_rerun_after_repair_takes_the_node_back_and_judges_again(bench: Bench) -> None:
    from workflows import verbs

    profiled(bench)
    sid = machine(bench, "hwb", faults={"gpu_missing": 1})
    wf = bench.onboarding("hwb", "10.6.0.11", maas_system_id=sid)
    run_stage("onboarding", wf, "conformance", record=True)
    bench.sim.post(f"machines/{sid}/faults", {"gpu_missing": 0})  # the GPU is reseated
    verbs.apply(KINDS["onboarding"], wf.pk, "rerun", actor=bench.admin, reason="GPU reseated")
    node = Node.objects.get(pk=wf.node_id or 0)
    assert node.state == "provisioning"
    # the evidence of the first judgement stays
    assert QuarantineEvidence.objects.filter(node=node).count() == 1


def test_a_node_quarantined_for_another_reason_stays_quarantined_on_rerun(bench: Bench) -> None:
    from maas_domain.services import evidence as evidence_services
    from workflows import verbs

    profiled(bench)
    sid = machine(bench, "hwc", faults={"gpu_missing": 1})
    wf = bench.onboarding("hwc", "10.6.0.12", maas_system_id=sid)
    run_stage("onboarding", wf, "conformance", record=True)
    node = Node.objects.get(pk=wf.node_id or 0)
    from django.db import transaction

    with transaction.atomic():  # a decommission found its disks not erased afterwards
        evidence_services.freeze(node=node, kind="not_erased", workflow_kind="decommission",
                                 workflow_id=999, maas_system_id=sid, reason="disks",
                                 report={}, timeline=[])  # fmt: skip
    verbs.apply(KINDS["onboarding"], wf.pk, "rerun", actor=bench.admin, reason="retry")
    node.refresh_from_db()
    assert node.state == "quarantined"


# -- acceptance ------------------------------------------------------------------------------------

BURN = "infra-gpu-burn"


def accepting(bench: Bench, **policy: Any) -> None:
    model = bench.sim.model
    with model.lock:
        if model.scripts.named(BURN) is None:
            model.scripts.add_testing(
                {"name": BURN, "tags": ["infra-gpu"], "hardware_type": "gpu", "timeout": "0:30:00",
                 "parameters": {"duration": {"type": "runtime"}}},
                model.now(),
            )  # fmt: skip
    bench.policy(acceptance_scripts=[BURN, "smartctl-validate"], **policy)


def until_done(wf: Onboarding, bench: Bench) -> Any:
    """Run the stage, let MAAS's clock finish the tests, run it again (as a wake would)."""
    first, _ = run_stage("onboarding", wf, "acceptance", record=True)
    assert type(first).__name__ == "Wait", first
    bench.sim.advance(3600)
    wf.refresh_from_db()
    return run_stage("onboarding", wf, "acceptance")


def test_acceptance_runs_infra_scripts_once_and_passes_per_script_and_disk(bench: Bench) -> None:
    accepting(bench, acceptance_parameters={f"{BURN}_duration": "600"})
    sid = machine(bench, "ac1")
    wf = bench.onboarding("ac1", "10.6.1.1", maas_system_id=sid)
    result, events = until_done(wf, bench)
    assert type(result).__name__ == "Done", result
    report = result.updates["acceptance_report"]
    assert report["passed"] is True and report["scripts"] == [BURN, "smartctl-validate"]
    rows = {(r["script"], r["device"]) for r in report["results"]}
    assert (BURN, "") in rows
    assert {d for s, d in rows if s == "smartctl-validate"} == {"nvme0n1", "nvme1n1"}  # per disk
    assert bench.sim.mutations(sid) == ["machine.test"]  # sent once, with what policy said
    sent = bench.sim.sent("machine.test", sid)[0]
    assert sent["testing_scripts"] == f"{BURN},smartctl-validate"
    assert sent[f"{BURN}_duration"] == "600"
    assert "acceptance.passed" in [e[0] for e in events]


def test_a_failed_burn_in_fails_closed_naming_script_exit_and_output(bench: Bench) -> None:
    accepting(bench)
    sid = machine(bench, "ac2", faults={"script_fails": [BURN]})
    wf = bench.onboarding("ac2", "10.6.1.2", maas_system_id=sid)
    result, events = until_done(wf, bench)
    assert (type(result).__name__, result.failure_class) == ("Fail", "acceptance_failed")
    assert BURN in result.message and "exit 1" in result.message
    assert result.data == {"failed": [BURN]}  # what the timeline and the alert name
    [failed] = [data for kind, _, data in events if kind == "acceptance.failed"]
    assert set(failed["failed"]) == {BURN}
    failing = [r for r in result.updates["acceptance_report"]["results"] if not r["passed"]]
    assert [r["script"] for r in failing] == [BURN]
    assert failing[0]["exit_status"] == 1 and failing[0]["output_excerpt"]
    assert result.updates["acceptance_report"]["passed"] is False


def test_a_machine_not_ready_is_never_tested(bench: Bench) -> None:
    """MAAS reboots a Deployed machine to test it: the stage refuses instead."""
    accepting(bench)
    sid = machine(bench, "ac3", status="deployed")
    wf = bench.onboarding("ac3", "10.6.1.3", maas_system_id=sid)
    result, _ = run_stage("onboarding", wf, "acceptance")
    assert (type(result).__name__, result.failure_class) == ("Fail", "unexpected_state")
    assert bench.sim.mutations(sid) == []


def test_acceptance_applies_only_when_policy_names_scripts(bench: Bench) -> None:
    from onboarding.stages.acceptance import acceptance_applies

    wf = bench.onboarding("ac4", "10.6.1.4")
    assert not acceptance_applies(wf)
    bench.policy(acceptance_scripts=[BURN])
    assert acceptance_applies(wf)


def test_a_sku_that_states_no_hardware_is_conformant_by_its_own_words(bench: Bench) -> None:
    bench.sku.gpu_count = 0
    bench.sku.hardware = {}
    bench.sku.save()
    wf = bench.onboarding("nohw1", "10.6.9.1")
    result, _ = run_stage("onboarding", wf, "conformance")
    assert (type(result).__name__, result.message) == (
        "Done",
        f"SKU {bench.sku.code} states no hardware requirements",
    )
    report = result.updates["hardware_report"]
    assert (report["conformant"], report["checks"], report["note"]) == (
        True,
        [],
        "the SKU states no hardware",
    )
    assert (report["sku"], report["sku_revision"]) == (bench.sku.code, bench.sku.revision)
    assert bench.sim.mutations() == []


def test_conformance_without_a_machine_is_an_internal_failure(bench: Bench) -> None:
    profiled(bench)
    wf = bench.onboarding("nosid", "10.6.9.2")
    result, _ = run_stage("onboarding", wf, "conformance")
    assert (type(result).__name__, result.failure_class, result.message) == (
        "Fail",
        "internal",
        "no MAAS machine recorded; rerun from discover",
    )

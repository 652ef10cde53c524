"""The simulator held to reality: every recorded exchange with a real MAAS 3.5.10 region
(tests/data/maas-transcripts/) replayed against a fresh simulator, scenario by scenario, and
every difference either gone or listed, with its reason, in docs/simulator.md's "Known
differences from MAAS 3.5" (tests/support/transcripts.py says how the answers are compared).
And our hardware judgement run on the hardware MAAS's own parsers produced there."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from maas_client.hardware import MachineHardware, NodeDevice
from maas_domain.hardware import judge, validate_profile
from tests.support.transcripts import (
    SCENARIOS,
    Difference,
    Known,
    known_differences,
    load,
    replay_all,
)


def ranges(steps: list[int]) -> str:
    out: list[list[int]] = []
    for step in sorted(set(steps)):
        if out and step == out[-1][1] + 1:
            out[-1][1] = step
        else:
            out.append([step, step])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def test_the_simulator_answers_as_the_recorded_maas_does() -> None:
    known = known_differences()
    found = list(replay_all())
    unlisted = [d for d in found if not any(k.matches(d) for k in known)]
    stale = [k for k in known if not any(k.matches(d) for d in found)]
    grouped: dict[tuple[str, str], list[Difference]] = defaultdict(list)
    for d in unlisted:
        grouped[(d.scenario, d.key)].append(d)
    report = [
        f"| `{scenario}` | `{ranges([d.step for d in ds])}` | `{key}` | "
        f"(MAAS: {ds[0].recorded}; simulator: {ds[0].simulated}) |"
        for (scenario, key), ds in sorted(grouped.items())
    ]
    assert not report, (
        "differences from the recorded MAAS 3.5.10 that are neither fixed nor listed in "
        "docs/simulator.md, 'Known differences from MAAS 3.5':\n" + "\n".join(report)
    )
    assert not stale, "listed differences that no longer occur (remove them):\n" + "\n".join(
        f"{k.scenario} {k.steps} {k.pattern}" for k in stale
    )


def test_every_known_difference_says_why() -> None:
    known = known_differences()
    assert known, "the known-differences table is missing or unreadable"
    assert all(isinstance(k, Known) and len(k.why) > 20 for k in known)
    assert {k.scenario for k in known} <= {*SCENARIOS, "*"}


def test_a_difference_nobody_listed_fails_the_replay() -> None:
    """The list is what the replay is judged by: a row matches exactly its scenario, steps and
    key, nothing wider."""
    row = Known("errors", "179-182,184", "status 500/401", "a stand-in artifact")
    assert row.matches(Difference("errors", 181, "status 500/401"))
    assert not row.matches(Difference("errors", 183, "status 500/401"))
    assert not row.matches(Difference("listings", 181, "status 500/401"))
    assert not row.matches(Difference("errors", 181, "status 503/200"))


# -- the recorded machine's hardware, judged -------------------------------------------------------

H100_8X: dict[str, Any] = {
    "gpu": {"pci_ids": ["10de:2330"], "per_numa_node": {"0": 8}},
    "cpu": {"min": 8},
    "memory": {"min_gib": 512},
    "nics": [{"role": "pxe", "pxe": True, "count": 1, "min_speed_mbps": 10000}],
    "disks": [{"count": 2, "min_size_gb": 3800, "type": "nvme"}],
    "firmware": {"mainboard_firmware_version": ["1.2.3"]},
}


def recorded(scenario: str, step: int) -> Any:
    line = next(x for x in load(scenario) if x["step"] == step)
    assert line["response"]["status"] == 200, line["label"]
    return line["response"]["body"]


@pytest.mark.parametrize(("machine_step", "devices_step"), [(57, 58), (67, 68), (77, 78)])
def test_hardware_judgement_passes_the_recorded_8x_h100(
    machine_step: int, devices_step: int
) -> None:
    """The machine, its interfaces, disks and node devices as MAAS 3.5.10's own commissioning
    parsers produced them (onboarding-sequence.jsonl, the machines commissioned with true/false,
    false and omitted flags) meet an 8x H100 profile, check by check."""
    profile = validate_profile(H100_8X, gpu_count=8, gpu_model="H100")
    machine = MachineHardware.from_json(recorded("onboarding-sequence", machine_step))
    devices = [NodeDevice.from_json(d) for d in recorded("onboarding-sequence", devices_step)]
    checks = judge(
        gpu_count=8, gpu_model="H100", hardware=profile, machine=machine, devices=devices
    )
    assert {c.requirement for c in checks} == {
        "gpu.count",
        "gpu.model",
        "gpu.per_numa_node",
        "cpu.count",
        "memory",
        "nics.pxe",
        "disks.0",
        "firmware.mainboard_firmware_version",
    }
    assert [c for c in checks if not c.passed] == []


def test_hardware_judgement_refuses_what_the_recorded_machine_lacks() -> None:
    machine = MachineHardware.from_json(recorded("onboarding-sequence", 57))
    devices = [NodeDevice.from_json(d) for d in recorded("onboarding-sequence", 58)]
    stricter = {**H100_8X, "disks": [{"count": 3, "min_size_gb": 3800, "type": "nvme"}]}
    profile = validate_profile(stricter, gpu_count=8, gpu_model="H100")
    checks = judge(
        gpu_count=8, gpu_model="H100", hardware=profile, machine=machine, devices=devices
    )
    assert [c.requirement for c in checks if not c.passed] == ["disks.0"]
    checks = judge(
        gpu_count=8, gpu_model="H100", hardware=profile, machine=machine, devices=devices[:-1]
    )
    assert "gpu.count" in {c.requirement for c in checks if not c.passed}
    # the machine commissioned with every flag "0" (storage and networking skipped): no disks,
    # no boot NIC link, so the same profile fails there (onboarding-sequence.jsonl step 44)
    skipped = MachineHardware.from_json(recorded("onboarding-sequence", 44))
    checks = judge(
        gpu_count=8, gpu_model="H100", hardware=profile, machine=skipped, devices=devices
    )
    assert "disks.0" in {c.requirement for c in checks if not c.passed}

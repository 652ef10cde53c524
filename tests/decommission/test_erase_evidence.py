"""Erase evidence per disk (decommission/erase.py, docs/hardware.md "Erase evidence"): read from
the one wipe-disks result MAAS keeps for a release, as MAAS 3.5's script prints it, joined with
the disks MAAS listed before. A disk is erased only when its own success line is there."""

from __future__ import annotations

import base64
from typing import Any

from decommission import erase
from maas_client.hardware import ScriptRun

DISKS = [
    {"id": 1, "name": "nvme0n1", "serial": "S1", "model": "MZ1L2960", "size": 960 * 10**9},
    {"id": 2, "name": "nvme1n1", "serial": "S2", "model": "MZQL27T6", "size": 7680 * 10**9},
]


def run(output: str, *, status: str = "Passed", run_id: int = 530) -> ScriptRun:
    return ScriptRun.from_json(
        {
            "id": run_id,
            "type": 3,
            "type_name": "Release",
            "status": 2,
            "status_name": status,
            "started": "Sat, 01 Mar 2025 10:12:00 -0000",
            "ended": "Sat, 01 Mar 2025 10:15:12 -0000",
            "results": [
                {
                    "id": 9101,
                    "name": "wipe-disks",
                    "status": 2,
                    "status_name": status,
                    "exit_status": 0,
                    "started": "Sat, 01 Mar 2025 10:12:00 -0000",
                    "ended": "Sat, 01 Mar 2025 10:15:12 -0000",
                    "runtime": "0:03:12",
                    "parameters": {},
                    "output": base64.b64encode(output.encode()).decode(),
                }
            ],
        }
    )


def outcomes(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {d["name"]: (d["outcome"], d["mode"]) for d in report["disks"]}


def test_every_disk_with_its_success_line_is_erased_with_its_serial_and_time() -> None:
    out = (
        "nvme0n1, nvme1n1 to be wiped.\nnvme0n1: successfully quickly wiped.\n"
        "nvme1n1: successfully quickly wiped.\nAll disks have been successfully wiped.\n"
    )
    report = erase.evidence(DISKS, [run(out)], mode="quick")
    assert report["erased"] is True
    assert outcomes(report) == {"nvme0n1": ("erased", "quick"), "nvme1n1": ("erased", "quick")}
    first = report["disks"][0]
    assert (first["serial"], first["size"], first["line"]) == (
        "S1",
        960 * 10**9,
        "nvme0n1: successfully quickly wiped.",
    )
    assert first["time"] == "2025-03-01T10:15:12+00:00" and report["run_id"] == 530


def test_a_failed_quick_wipe_that_maas_calls_passed_is_not_erased() -> None:
    """MAAS's trap: the script prints the failure, prints "all wiped" and exits 0."""
    out = (
        "nvme0n1, nvme1n1 to be wiped.\nnvme0n1: successfully quickly wiped.\n"
        "nvme1n1: failed to be quickly wiped.\nAll disks have been successfully wiped.\n"
    )
    report = erase.evidence(DISKS, [run(out, status="Passed")], mode="quick")
    assert report["result_status"] == "Passed" and report["erased"] is False
    assert outcomes(report)["nvme1n1"] == ("failed", "quick")
    assert erase.not_erased(report) == ["nvme1n1 (serial S2, failed)"]


def test_a_disk_the_output_never_names_has_no_evidence() -> None:
    out = (
        "nvme0n1 to be wiped.\nnvme0n1: successfully zeroed.\n"
        "All disks have been successfully wiped.\n"
    )
    report = erase.evidence(DISKS, [run(out)], mode="none")
    assert report["erased"] is False
    assert outcomes(report) == {"nvme0n1": ("erased", "zeroed"), "nvme1n1": ("no_evidence", "none")}


def test_a_secure_erase_that_fell_back_is_named_by_what_it_did() -> None:
    out = (
        "nvme0n1, nvme1n1 to be wiped.\nSecure erase was successful on NVMe drive nvme0n1\n"
        "nvme1n1: not using secure erase; drive does not support secure erase\n"
        "nvme1n1: successfully zeroed.\nAll disks have been successfully wiped.\n"
    )
    report = erase.evidence(DISKS, [run(out)], mode="secure")
    assert outcomes(report) == {"nvme0n1": ("erased", "secure"), "nvme1n1": ("erased", "zeroed")}


def test_no_wipe_result_or_no_disk_is_never_erased() -> None:
    assert erase.evidence(DISKS, [], mode="quick")["erased"] is False
    assert (
        erase.evidence([], [run("All disks have been successfully wiped.\n")], mode="quick")[
            "erased"
        ]
        is False
    )


def test_the_newest_run_is_read_and_a_line_for_an_unlisted_disk_is_reported() -> None:
    old = run(
        "nvme0n1: successfully quickly wiped.\nnvme1n1: successfully quickly wiped.\n", run_id=10
    )
    new = run("nvme0n1: successfully quickly wiped.\nsdz: successfully quickly wiped.\n", run_id=11)
    report = erase.evidence(DISKS, [new, old], mode="quick")  # newest first
    assert report["run_id"] == 11 and report["erased"] is False
    assert report["unaccounted"] == ["sdz"]


def test_lookalike_lines_do_not_count() -> None:
    out = (
        "nvme1n1: successfully quickly wiped. (not really)\n  nvme0n1:successfully quickly wiped.\n"
    )
    assert set(erase.per_disk(out)) == set()


def test_half_a_quick_wipe_failing_is_not_erased_though_the_script_says_so() -> None:
    """MAAS 3.5's wipe_quickly: with wipefs failed and the 2 MiB overwrite done (or the other
    way round) its error count is 0 and it prints the success line anyway."""
    out = (
        "nvme0n1, nvme1n1 to be wiped.\n"
        "nvme0n1: starting quick wipe.\nnvme0n1: wipefs failed (1)\n"
        "nvme0n1: successfully quickly wiped.\n"
        "nvme1n1: starting quick wipe.\n"
        "nvme1n1: OS error while wiping beginning/end of disk (Input/output error)\n"
        "nvme1n1: successfully quickly wiped.\nAll disks have been successfully wiped.\n"
    )
    report = erase.evidence(DISKS, [run(out)], mode="quick")
    assert report["erased"] is False
    assert outcomes(report) == {"nvme0n1": ("failed", "quick"), "nvme1n1": ("failed", "quick")}
    assert report["disks"][0]["line"] == "nvme0n1: wipefs failed (1)"


def test_a_disk_erasing_run_proves_nothing() -> None:
    """A release whose one script is wipe-disks runs in Disk erasing, where MAAS 3.5 stores no
    result: Pending, no output, whatever the node did (the recorded release-erase steps)."""
    pending = run("", status="Pending")
    report = erase.evidence(DISKS, [pending], mode="secure")
    assert (report["erased"], report["result_status"]) == (False, "Pending")
    assert {d["outcome"] for d in report["disks"]} == {"no_evidence"}

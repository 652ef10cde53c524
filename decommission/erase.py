"""Erase evidence per disk (docs/hardware.md, "Erase evidence"): what MAAS's release run says it
did to each disk, joined with the disks MAAS knew before the release.

MAAS runs one ``wipe-disks`` script for every disk and reports one result; what it did to each
disk is only a line of that script's output, keyed by the disk's kernel name. A failed quick
wipe prints a line and still passes, so the verdict is per disk and positive: a disk is erased
only when its own success line for the mode asked is there. A disk with no such line is not
erased, whatever the result's status says. MAAS keeps that output only for a release that runs
in Releasing (docs/decommission.md, "What a site can prove about an erase"): a Disk erasing
run's result stays Pending with no output, and proves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from maas_client.hardware import Disk, ScriptRun

WIPE_SCRIPT = "wipe-disks"
# wipe-disks' tag in MAAS 3.5: sent as the release's script list beside the erase flags, it
# makes the list [wipe, wipe-disks], which MAAS runs in Releasing and keeps the output of
WIPE_TAG = "wipe"
# The success line of each way wipe-disks erases a disk, and its failure lines (the disk's kernel
# name in group 1).
ERASED = [
    (re.compile(r"^Secure erase was successful on NVMe drive (\S+)$"), "secure"),
    (re.compile(r"^(\S+): successfully securely erased\.$"), "secure"),
    (re.compile(r"^(\S+): successfully quickly wiped\.$"), "quick"),
    # NVMe disks are zeroed with write-zeroes and say so; other disks by overwriting
    (re.compile(r"^(\S+): successfully zeroed(?: \(using write-zeroes\))?\.$"), "zeroed"),
]
FAILED = [re.compile(r"^(\S+): failed to be quickly wiped\.$")]
# Half of a quick wipe failing: MAAS 3.5's wipe_quickly counts +1 per failed half and -1 per
# good one, so with one half failed it still prints "successfully quickly wiped". A disk with
# one of these lines is not erased, whatever its last line says.
PARTIAL = [
    re.compile(r"^(\S+): wipefs failed \(.*\)$"),
    re.compile(r"^(\S+): OS error while wiping beginning/end of disk \(.*\)$"),
]


def disks_before(disks: Sequence[Disk]) -> list[dict[str, Any]]:
    """The disks to account for, as MAAS knows them before the release."""
    return [
        {"id": d.id, "name": d.name, "serial": d.serial, "model": d.model, "size": d.size}
        for d in disks
    ]


def wipe_result(runs: Sequence[ScriptRun]) -> tuple[ScriptRun, Any] | None:
    """The newest release run with a wipe-disks result, and that result."""
    for run in runs:  # newest first
        for result in run.results:
            if result.name == WIPE_SCRIPT:
                return run, result
    return None


def per_disk(output: str) -> dict[str, tuple[str, str]]:
    """kernel name → (``erased:<how>`` or ``failed``, the line that says so); the last word
    about a disk wins (a secure erase that fell back to zeroing ends with the zeroing), except
    that half a quick wipe failing is final (``PARTIAL``)."""
    found: dict[str, tuple[str, str]] = {}
    partial: dict[str, str] = {}
    for raw in output.splitlines():
        line = raw.strip()
        for pattern, how in ERASED:
            if match := pattern.match(line):
                found[match.group(1)] = (f"erased:{how}", line)
        for pattern in FAILED:
            if match := pattern.match(line):
                found[match.group(1)] = ("failed", line)
        for pattern in PARTIAL:
            if match := pattern.match(line):
                partial.setdefault(match.group(1), line)
    return found | {name: ("failed", line) for name, line in partial.items()}


def evidence(
    disks: Sequence[dict[str, Any]], runs: Sequence[ScriptRun], *, mode: str
) -> dict[str, Any]:
    """Every disk with its outcome (``erased``, ``failed`` or ``no_evidence``), the line that
    shows it, the erase mode asked for and the wipe's time; ``erased`` is true only if every
    disk has its success line."""
    found = wipe_result(runs)
    lines: dict[str, tuple[str, str]] = {}
    facts: dict[str, Any] = {"mode": mode, "run_id": None, "result_status": "", "ended": None}
    if found is not None:
        run, result = found
        lines = per_disk(result.output)
        facts |= {
            "run_id": run.id,
            "result_status": result.status_name,
            "ended": result.ended.isoformat() if result.ended else None,
        }
    rows = []
    for disk in disks:
        outcome, line = lines.get(disk["name"], ("no_evidence", ""))
        how = outcome.partition(":")[2]
        rows.append(
            {
                **disk,
                "mode": how or mode,
                "outcome": "erased" if outcome.startswith("erased") else outcome,
                "line": line,
                "time": facts["ended"],
            }
        )
    unknown = sorted(set(lines) - {d["name"] for d in disks})
    return {
        **facts,
        "erased": bool(rows) and all(r["outcome"] == "erased" for r in rows),
        "disks": rows,
        "unaccounted": unknown,  # disks the wipe named that MAAS did not list before
    }


def not_erased(report: dict[str, Any]) -> list[str]:
    """``name (serial …)`` of each disk without evidence of erase."""
    return [
        f"{d['name']} (serial {d['serial'] or '?'}, {d['outcome']})"
        for d in report.get("disks", ())
        if d["outcome"] != "erased"
    ]

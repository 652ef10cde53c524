"""What scripts print on a simulated machine: plausible output for testing scripts (passing, or
failing under the ``script_fails`` fault) and the per-disk lines of ``wipe-disks`` for each
erase mode (docs/simulator.md, "Testing scripts and results", "Disk erase evidence").
"""

from __future__ import annotations

from maas_simulator.hardware import CPU, GPU, MEMORY, NETWORK, STORAGE
from maas_simulator.nodes import Machine, ScriptResult, ScriptSet


def failing(m: Machine, ss: ScriptSet) -> set[int]:
    """The results ``script_fails`` makes exit 1: each named script's first result (one
    device of a per-device script)."""
    chosen: set[int] = set()
    for name in m.faults.script_fails:
        first = next((r for r in ss.results if r.name == name), None)
        if first is not None:
            chosen.add(first.id)
    return chosen


def test_output(m: Machine, r: ScriptResult, passed: bool) -> bytes:
    """A few lines of what the script printed."""
    kind = r.script.hardware_type if r.script is not None else None
    device = r.disk[1] if r.disk else (r.interface[1] if r.interface else "")
    if kind == STORAGE and device:
        lines = [
            f"INFO: Verifying SMART support for the following drive: /dev/{device}",
            f"INFO: Running command: sudo -n smartctl --xall /dev/{device}",
        ]
        lines += (
            ["SMART overall-health self-assessment test result: PASSED"]
            if passed
            else [
                "SMART overall-health self-assessment test result: FAILED!",
                "Media and Data Integrity Errors:    12",
                f"FAILURE: SMART tests have FAILED on: /dev/{device}",
            ]
        )
    elif kind == GPU:
        gpus = [d for d in m.node_devices if d.hardware_type == GPU and d.vendor_id == "10de"]
        lines = [f"GPU {i}: {d.product_name} ({d.pci_address}): OK" for i, d in enumerate(gpus)]
        lines = lines or ["No devices were found"]
        if not passed:
            bad = min(3, max(len(gpus) - 1, 0))
            lines = [
                *lines[:bad],
                f"GPU {bad}: Xid 79 fallen off the bus",
                f"{r.name}: FAILED on GPU {bad}",
            ]
    elif kind == NETWORK and device:
        lines = [f"{device}: link up, checks {'passed' if passed else 'FAILED'}"]
    elif kind == MEMORY:
        lines = ["memtester version 4.5.1 (64-bit)", "  Stuck Address       : ok"]
        lines += ["Done."] if passed else ["  Random Value        : FAILURE: 0x5a5a != 0x5b5a"]
    elif kind == CPU:
        lines = ["stress-ng: info:  [1842] dispatching hogs: 224 cpu"]
        lines += (
            ["stress-ng: info:  [1842] successful run completed"]
            if passed
            else ["stress-ng: fail:  [1842] cpu: computation error detected on CPU 117"]
        )
    else:
        lines = [f"{r.name}: {'PASSED' if passed else 'FAILED'}"]
    if not passed:
        lines.append("exit status 1")
    return ("\n".join(lines) + "\n").encode()


# -- wipe-disks -----------------------------------------------------------------------------------


def wipe_output(disks: list[str], secure: bool, quick: bool, fails: set[str]) -> tuple[bytes, bool]:
    """``maas_wipe``'s output: the disks to wipe (kernel names), then per disk a secure erase
    when asked (NVMe: ``nvme format``; the other disks here are SATA drives whose ATA secure
    erase MAAS finds unsupported), falling back to the quick wipe when asked, else to zeroing
    (NVMe write-zeroes; a full overwrite for the others); the last line is ``All disks have
    been successfully wiped.``.

    A disk in ``fails`` fails at whatever it reaches: its secure erase (the script falls back),
    its quick wipe (only a line: the script still passes), its zeroing (an uncaught error: the
    script stops and fails). Returns (output, passed).
    """
    lines = [f"{', '.join(disks)} to be wiped."]
    for disk in disks:
        broken, nvme = disk in fails, disk.startswith("nvme")
        if secure:
            if nvme and not broken:
                lines.append(f"Secure erase was successful on NVMe drive {disk}")
                continue
            lines.append(
                "Error with format command (1)"
                if nvme
                else f"{disk}: drive does not support secure erase."
            )
        if quick:
            lines.append(f"{disk}: starting quick wipe.")
            if broken:
                lines += [
                    f"{disk}: wipefs failed (1)",
                    f"{disk}: OS error while wiping beginning/end of disk (Input/output error)",
                    f"{disk}: failed to be quickly wiped.",
                ]
            else:
                lines.append(f"{disk}: successfully quickly wiped.")
            continue
        if nvme and not broken:
            lines.append(f"{disk}: successfully zeroed (using write-zeroes).")
            continue
        if nvme:
            lines.append("Error with write-zeroes command (1)")
        lines.append(f"{disk}: started zeroing.")
        if broken:
            lines += [
                "Traceback (most recent call last):",
                '  File "/tmp/user_data.sh.abc123/scripts/release/wipe-disks", line 575, in '
                "<module>",
                "    main()",
                f"OSError: [Errno 5] Input/output error: '/dev/{disk}'",
            ]
            return ("\n".join(lines) + "\n").encode(), False
        lines.append(f"{disk}: successfully zeroed.")
    lines.append("All disks have been successfully wiped.")
    return ("\n".join(lines) + "\n").encode(), True

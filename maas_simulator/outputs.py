"""What scripts print on a simulated machine: plausible output for testing scripts (passing, or
failing under the ``script_fails`` fault), the per-disk lines of ``wipe-disks`` for each erase
mode, and MAAS 3.5's commissioning scripts' output in their real formats (the machine-resources
JSON, ``lshw -xml``, modaliases, the kernel command line) (docs/simulator.md, "Testing scripts
and results", "Disk erase evidence").
"""

from __future__ import annotations

import json
from typing import Any
from xml.sax.saxutils import escape

from maas_simulator.hardware import CPU, GPU, MEMORY, NETWORK, STORAGE, NodeDevice
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


# -- commissioning --------------------------------------------------------------------------------


def commissioning_output(m: Machine, name: str, devices: list[NodeDevice]) -> bytes:
    """What one of MAAS 3.5's commissioning scripts prints on this machine, in its real format
    (recorded against MAAS 3.5.10: the machine-resources JSON, which MAAS parses, is printed by
    both ``20-maas-03-machine-resources`` and ``50-maas-01-commissioning``); the scripts that
    only set the machine up print nothing."""
    if name in ("20-maas-03-machine-resources", "50-maas-01-commissioning"):
        return json.dumps(machine_resources(m, devices), indent=4).encode() + b"\n"
    if name == "maas-lshw":
        return lshw_xml(m, devices).encode()
    if name == "maas-list-modaliases":
        return ("\n".join(modaliases(m, devices)) + "\n").encode()
    if name == "maas-kernel-cmdline":
        boot = m.boot_interface
        mac = (boot.mac_address if boot else "00:00:00:00:00:00").replace(":", "-")
        return f"BOOT_IMAGE=/casper/vmlinuz console=tty1 console=ttyS0 BOOTIF=01-{mac}\n".encode()
    return b""


BMC_CONFIG_SKIPPED = (
    "INFO: User {user} has choosen to skip BMC configuration during commissioning\n"  # sic
)


def machine_resources(m: Machine, devices: list[NodeDevice]) -> dict[str, Any]:
    """The LXD resources document MAAS's ``machine-resources`` binary prints (its shape as
    recorded against MAAS 3.5.10), from what the machine has."""
    info = m.hardware_info
    threads = list(range(m.cpu_count))
    gpus = [d for d in devices if d.hardware_type == GPU]
    nics = [i for i in m.interfaces if i.type == "physical"]
    by_mac = {d.physical_interface: d for d in devices if d.physical_interface is not None}
    return {
        "api_extensions": ["resources", "resources_v2", "api_os", "resources_system",
                           "resources_usb_pci"],
        "api_version": "1.0",
        "environment": {
            "kernel": "Linux",
            "kernel_architecture": "x86_64",
            "kernel_version": "5.15.0-91-generic",
            "os_name": "ubuntu",
            "os_version": "22.04",
            "server": "maas-machine-resources",
            "server_name": m.hostname,
            "server_version": "4.11",
        },
        "resources": {
            "cpu": {
                "architecture": "x86_64",
                "sockets": [
                    {
                        "name": info.get("cpu_model", "Unknown"),
                        "vendor": "GenuineIntel",
                        "socket": 0,
                        "cores": [{"core": n, "threads": [{"id": n, "thread": 0,
                                                          "online": True, "numa_node": 0}]}
                                  for n in threads],
                    }
                ],
                "total": m.cpu_count,
            },
            "memory": {
                "hugepages_total": 0,
                "hugepages_used": 0,
                "hugepages_size": 0,
                "used": 0,
                "total": m.memory * 1024 * 1024,
            },
            "gpu": {
                "cards": [
                    {"driver": d.commissioning_driver, "pci_address": d.pci_address,
                     "vendor": d.vendor_name, "vendor_id": d.vendor_id,
                     "product": d.product_name, "product_id": d.product_id,
                     "numa_node": d.numa_node}
                    for d in gpus
                ],
                "total": len(gpus),
            },
            "network": {
                "cards": [
                    {
                        "pci_address": (by_mac[i.id].pci_address if i.id in by_mac else None),
                        "vendor": i.vendor,
                        "product": i.product,
                        "firmware_version": i.firmware_version,
                        "numa_node": i.numa_node,
                        "ports": [
                            {"id": i.name, "port": 0, "address": i.mac_address,
                             "protocol": "ethernet", "link_detected": i.link_connected,
                             "link_speed": i.link_speed}
                        ],
                    }
                    for i in nics
                ],
                "total": len(nics),
            },
            "storage": {
                "disks": [
                    {"id": d.name, "size": d.size, "partitions": [],
                     "type": "nvme" if d.name.startswith("nvme") else "scsi",
                     "model": d.model, "serial": d.serial, "block_size": d.block_size,
                     "firmware_version": d.firmware_version, "numa_node": d.numa_node,
                     "device_id": (d.id_path or "").removeprefix("/dev/disk/by-id/")}
                    for d in m.storage.physical
                ],
                "total": len(m.storage.physical),
            },
            "usb": {"devices": [], "total": 0},
            "pci": {
                "devices": [
                    {"driver": d.commissioning_driver, "pci_address": d.pci_address,
                     "vendor": d.vendor_name, "vendor_id": d.vendor_id,
                     "product": d.product_name, "product_id": d.product_id,
                     "numa_node": d.numa_node}
                    for d in devices
                    if d.bus == 1
                ],
                "total": sum(1 for d in devices if d.bus == 1),
            },
            "system": {
                "uuid": m.hardware_uuid,
                "vendor": info.get("system_vendor", ""),
                "product": info.get("system_product", ""),
                "family": info.get("system_family", ""),
                "version": info.get("system_version", ""),
                "sku": info.get("system_sku", ""),
                "serial": info.get("system_serial", ""),
                "type": "physical",
                "firmware": {
                    "vendor": info.get("mainboard_firmware_vendor", ""),
                    "date": info.get("mainboard_firmware_date", ""),
                    "version": info.get("mainboard_firmware_version", ""),
                },
                "chassis": {
                    "vendor": info.get("chassis_vendor", ""),
                    "type": info.get("chassis_type", ""),
                    "serial": info.get("chassis_serial", ""),
                    "version": info.get("chassis_version", ""),
                },
                "motherboard": {
                    "vendor": info.get("mainboard_vendor", ""),
                    "product": info.get("mainboard_product", ""),
                    "serial": info.get("mainboard_serial", ""),
                    "version": info.get("mainboard_version", ""),
                },
            },
        },
        "networks": {
            i.name: {"name": i.name, "hwaddr": i.mac_address, "type": "broadcast",
                     "state": "up" if i.link_connected else "down", "addresses": [],
                     "vlan": None, "bridge": None, "bond": None}
            for i in nics
        },
        "network-extra": {
            "interfaces": {i.name: {"mac_address": i.mac_address} for i in nics},
            "monitored-interfaces": [],
            "hints": None,
        },
    }  # fmt: skip


def modaliases(m: Machine, devices: list[NodeDevice]) -> list[str]:
    """``maas-list-modaliases``: the DMI alias, then one alias per PCI device."""
    info = m.hardware_info

    def squash(value: str) -> str:
        return "".join(value.split()) if value != "Unknown" else ""

    dmi = (
        f"dmi:bvn{squash(info.get('mainboard_firmware_vendor', ''))}:"
        f"bvr{squash(info.get('mainboard_firmware_version', ''))}:"
        f"bd{squash(info.get('mainboard_firmware_date', ''))}:"
        f"svn{squash(info.get('system_vendor', ''))}:pn{squash(info.get('system_product', ''))}:"
    )
    pci = [
        f"pci:v0000{d.vendor_id.upper()}d0000{d.product_id.upper()}"
        f"sv0000{d.vendor_id.upper()}sd00000000bc{'03' if d.hardware_type == GPU else '02'}sc00i00"
        for d in devices
        if d.bus == 1
    ]
    return [dmi, *pci]


def lshw_xml(m: Machine, devices: list[NodeDevice]) -> str:
    """A small ``lshw -xml``: system, CPU, memory, disks, NICs, and the display-class PCI
    functions (GPUs and the BMC's VGA) as lshw lists them (``class="display"``)."""
    info = m.hardware_info
    disks = "".join(
        f'<node id="disk" class="disk"><logicalname>/dev/{escape(d.name)}</logicalname>'
        f"<product>{escape(d.model or '')}</product><serial>{escape(d.serial or '')}</serial>"
        f'<size units="bytes">{d.size}</size></node>'
        for d in m.storage.physical
    )
    nics = "".join(
        f'<node id="network" class="network"><logicalname>{escape(i.name)}</logicalname>'
        f"<serial>{escape(i.mac_address)}</serial></node>"
        for i in m.interfaces
        if i.type == "physical"
    )
    displays = "".join(
        f'<node id="display" class="display"><product>{escape(d.product_name)}</product>'
        f"<vendor>{escape(d.vendor_name)}</vendor>"
        f"<businfo>pci@{escape(d.pci_address or '')}</businfo></node>"
        for d in devices
        if d.hardware_type == 5
    )
    return (
        '<?xml version="1.0" standalone="yes" ?>\n<list>\n'
        f'<node id="{escape(m.hostname)}" class="system">'
        f"<product>{escape(info.get('system_product', ''))}</product>"
        f"<vendor>{escape(info.get('system_vendor', ''))}</vendor>"
        f"<serial>{escape(info.get('system_serial', ''))}</serial>"
        f'<node id="core" class="bus"><node id="cpu" class="processor">'
        f"<product>{escape(info.get('cpu_model', ''))}</product></node>"
        f'<node id="memory" class="memory"><size units="bytes">{m.memory * 1024 * 1024}</size>'
        f'</node><node id="pci" class="bridge">{displays}</node>{disks}{nics}</node></node>\n'
        "</list>\n"
    )

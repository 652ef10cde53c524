"""The RMA packet (docs/repair.md, "The packet"): what a vendor needs to repair a node, frozen
once when it is handed over: the machine's identity, its SKU, the fault and its evidence, the
failing parts as MAAS last saw them (serials, slots, PCI addresses, firmware), MAAS's events,
when and under which ticket. Built from what the control plane already holds (the quarantine
evidence, the cordons) and one read of MAAS's facts; a pure function of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from maas_client.hardware import GPU, Disk, MachineHardware, Nic, NodeDevice
from maas_domain.hardware import HARDWARE_INFO_KEYS

# A requirement of a hardware report → the kind of part it concerns.
CATEGORIES = {"gpu": "gpu", "nic": "nic", "disk": "disk", "cpu": "system", "memory": "system",
              "firmware": "system"}  # fmt: skip


def failing(kind: str, report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What failed, from a quarantine's evidence report or a drift's detail: each failed
    hardware requirement, failed acceptance result, or disk not erased, with its category."""
    found: list[dict[str, Any]] = []
    for check in report.get("checks") or report.get("failed") or ():
        if isinstance(check, Mapping) and not check.get("passed", False):
            requirement = str(check.get("requirement", ""))
            found.append(
                {
                    "category": CATEGORIES.get(requirement.split(".")[0], "system"),
                    "requirement": requirement,
                    "expected": str(check.get("expected", "")),
                    "observed": str(check.get("observed", "")),
                }
            )
    for result in report.get("results") or ():
        if isinstance(result, Mapping) and not result.get("passed", True):
            found.append(
                {
                    "category": "test",
                    "script": str(result.get("script", "")),
                    "device": result.get("device") or "",
                    "device_serial": result.get("device_serial") or "",
                    "status": str(result.get("status", "")),
                    "output_excerpt": str(result.get("output_excerpt", "")),
                }
            )
    if kind == "not_erased":
        for disk in report.get("disks") or ():
            if isinstance(disk, Mapping) and disk.get("outcome") != "erased":
                found.append(
                    {
                        "category": "disk",
                        "disk": str(disk.get("name", "")),
                        "serial": str(disk.get("serial", "")),
                        "outcome": str(disk.get("outcome", "")),
                    }
                )
    return found


def _gpu(d: NodeDevice) -> dict[str, Any]:
    return {"category": "gpu", "pci_address": d.pci_address or "", "pci_id": d.pci_id,
            "vendor": d.vendor_name, "product": d.product_name, "numa_node": d.numa_node,
            "driver": d.commissioning_driver}  # fmt: skip


def _nic(n: Nic) -> dict[str, Any]:
    return {"category": "nic", "name": n.name, "mac_address": n.mac_address, "vendor": n.vendor,
            "product": n.product, "firmware_version": n.firmware_version,
            "link_speed": n.link_speed, "interface_speed": n.interface_speed,
            "numa_node": n.numa_node}  # fmt: skip


def _disk(d: Disk) -> dict[str, Any]:
    return {"category": "disk", "name": d.name, "model": d.model, "serial": d.serial,
            "id_path": d.id_path, "size": d.size, "firmware_version": d.firmware_version,
            "numa_node": d.numa_node}  # fmt: skip


def parts(
    categories: set[str], machine: MachineHardware, devices: Sequence[NodeDevice]
) -> list[dict[str, Any]]:
    """The machine's parts of the failing categories, as MAAS last saw them (a GPU that fell
    off the bus is absent here: the vendor compares with the SKU's count and the slots)."""
    found: list[dict[str, Any]] = []
    if "gpu" in categories:
        found += [_gpu(d) for d in devices if d.hardware_type == GPU]
    if "nic" in categories:
        found += [_nic(n) for n in machine.nics]
    if "disk" in categories:
        found += [_disk(d) for d in machine.disks]
    return found


def build(
    *,
    hostname: str,
    system_id: str,
    site: str,
    sku: Mapping[str, Any],
    fault_class: str,
    evidence: Mapping[str, Any] | None,
    findings: Sequence[tuple[str, Mapping[str, Any]]],
    cordons: Sequence[Mapping[str, Any]],
    machine: MachineHardware,
    devices: Sequence[NodeDevice],
    maas_events: Sequence[Mapping[str, Any]],
    ticket: str,
    reason: str,
) -> dict[str, Any]:
    """The packet, as stored and shown (JSON only). ``findings``: (kind, report) of what put
    the node out of service (its quarantine evidence, the detail of its critical drift)."""
    failed = [f for kind, report in findings for f in failing(kind, report)]
    categories = {f["category"] for f in failed} or {"gpu", "nic", "disk"}
    info = machine.hardware_info
    return {
        "hostname": hostname,
        "system_id": system_id,
        "site": site,
        "sku": dict(sku),
        "fault_class": fault_class,
        "reason": reason,
        "ticket": ticket,
        "evidence": dict(evidence) if evidence else None,
        "cordons": [{k: c.get(k) for k in ("reason", "source", "detail")} for c in cordons],
        "failing": failed,
        "parts": parts(categories, machine, devices),
        "system": {k: info[k] for k in HARDWARE_INFO_KEYS if k in info},
        "cpu_count": machine.cpu_count,
        "memory_mib": machine.memory,
        "maas_events": [dict(e) for e in maas_events],
    }

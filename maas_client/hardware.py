"""What MAAS knows of a machine's hardware, and the testing it runs on it (docs/maas-api.md,
"Hardware"): the machine's commissioning facts (CPUs, memory, NUMA nodes, NICs with their link
speeds, disks, the SMBIOS/firmware strings), its PCI and USB devices, the testing scripts a
region has, and the results of a testing or release run per script and per device.

``HardwareReads`` is mixed into ``MaasClient``: these reads are few per node (the conformance
and acceptance stages, reconciliation's hardware drift and the erase evidence each make one or
two), so they parse everything MAAS sends about the hardware, unlike the hot machine read.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from maas_client.errors import MaasBadRequest
from maas_client.status import NodeStatus

# hardware_type, shared by node devices, scripts and results (docs/maas-api.md, "Hardware")
HARDWARE_TYPES = {0: "node", 1: "cpu", 2: "memory", 3: "storage", 4: "network", 5: "gpu"}
GPU = 5


def _iso(value: Any) -> datetime | None:
    """A machine's ``last_sync``: ISO, naive region time (taken as UTC), milliseconds."""
    if not value:
        return None
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def _rfc2822(value: Any) -> datetime | None:
    """A script result's ``started``/``ended``: ``Sat, 01 Mar 2025 10:15:00 -0000``."""
    if not value:
        return None
    return datetime.strptime(str(value), "%a, %d %b %Y %H:%M:%S %z").astimezone(UTC)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _decoded(value: Any) -> str:
    return base64.b64decode(value).decode("utf-8", "replace") if value else ""


@dataclass(frozen=True)
class NodeDevice:
    """One PCI or USB device of a machine (``nodes/{id}/devices/``)."""

    id: int
    hardware_type: int  # HARDWARE_TYPES
    bus_name: str  # PCIE or USB
    vendor_id: str  # 4 hex digits, lower case
    product_id: str
    vendor_name: str
    product_name: str
    numa_node: int | None
    pci_address: str | None
    commissioning_driver: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> NodeDevice:
        numa = d.get("numa_node")
        return cls(
            id=int(d["id"]),
            hardware_type=int(d["hardware_type"]),
            bus_name=_text(d.get("bus_name")),
            vendor_id=_text(d.get("vendor_id")).lower(),
            product_id=_text(d.get("product_id")).lower(),
            vendor_name=_text(d.get("vendor_name")),
            product_name=_text(d.get("product_name")),
            numa_node=None if numa is None else int(numa),
            pci_address=d.get("pci_address") or None,
            commissioning_driver=_text(d.get("commissioning_driver")),
        )

    @property
    def pci_id(self) -> str:
        return f"{self.vendor_id}:{self.product_id}"

    def describe(self) -> str:
        where = f" at {self.pci_address}" if self.pci_address else ""
        return f"{self.vendor_name or self.vendor_id} {self.product_name} ({self.pci_id}){where}"


@dataclass(frozen=True)
class Nic:
    """A physical network interface as commissioning saw it. Speeds are Mbit/s: ``link_speed``
    negotiated (0 with no link), ``interface_speed`` the port's best supported mode."""

    id: int
    name: str
    type: str
    mac_address: str
    vendor: str
    product: str
    firmware_version: str
    link_connected: bool
    link_speed: int
    interface_speed: int
    numa_node: int | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Nic:
        numa = d.get("numa_node")
        return cls(
            id=int(d["id"]),
            name=_text(d.get("name")),
            type=_text(d.get("type")) or "physical",
            mac_address=_text(d.get("mac_address")),
            vendor=_text(d.get("vendor")),
            product=_text(d.get("product")),
            firmware_version=_text(d.get("firmware_version")),
            link_connected=bool(d.get("link_connected")),
            link_speed=int(d.get("link_speed") or 0),
            interface_speed=int(d.get("interface_speed") or 0),
            numa_node=None if numa is None else int(numa),
        )


@dataclass(frozen=True)
class Disk:
    """A physical block device (size in bytes; ``name`` is the kernel name, e.g. nvme0n1)."""

    id: int
    name: str
    model: str
    serial: str
    id_path: str
    size: int
    tags: tuple[str, ...]
    firmware_version: str
    numa_node: int | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Disk:
        numa = d.get("numa_node")
        return cls(
            id=int(d["id"]),
            name=_text(d.get("name")),
            model=_text(d.get("model")),
            serial=_text(d.get("serial")),
            id_path=_text(d.get("id_path")),
            size=int(d.get("size") or 0),
            tags=tuple(str(t) for t in d.get("tags") or ()),
            firmware_version=_text(d.get("firmware_version")),
            numa_node=None if numa is None else int(numa),
        )


@dataclass(frozen=True)
class MachineHardware:
    """The hardware facts of ``GET machines/{id}/``: ``cpu_count`` logical threads, ``memory``
    MiB, ``hardware_info`` the 18 SMBIOS/firmware strings ("Unknown" when unknown)."""

    system_id: str
    hostname: str
    status: NodeStatus
    status_name: str
    cpu_count: int
    memory: int
    hardware_info: dict[str, str]
    numa_nodes: tuple[int, ...]  # the NUMA indexes
    nics: tuple[Nic, ...]
    disks: tuple[Disk, ...]
    boot_interface_id: int | None
    enable_hw_sync: bool
    last_sync: datetime | None
    sync_interval: int | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MachineHardware:
        boot = d.get("boot_interface") or {}
        disks = d.get("physicalblockdevice_set")
        if disks is None:
            disks = [b for b in d.get("blockdevice_set") or () if b.get("type") == "physical"]
        interval = d.get("sync_interval")
        return cls(
            system_id=str(d["system_id"]),
            hostname=_text(d.get("hostname")),
            status=NodeStatus(d["status"]),
            status_name=_text(d.get("status_name")),
            cpu_count=int(d.get("cpu_count") or 0),
            memory=int(d.get("memory") or 0),
            hardware_info={str(k): _text(v) for k, v in (d.get("hardware_info") or {}).items()},
            numa_nodes=tuple(int(n["index"]) for n in d.get("numanode_set") or ()),
            nics=tuple(
                Nic.from_json(i)
                for i in d.get("interface_set") or ()
                if (i.get("type") or "physical") == "physical"
            ),
            disks=tuple(Disk.from_json(b) for b in disks),
            boot_interface_id=None if boot.get("id") is None else int(boot["id"]),
            enable_hw_sync=bool(d.get("enable_hw_sync")),
            last_sync=_iso(d.get("last_sync")),
            sync_interval=None if interval is None else int(interval),
        )

    @property
    def boot_nic(self) -> Nic | None:
        return next((n for n in self.nics if n.id == self.boot_interface_id), None)

    @property
    def known(self) -> bool:
        """Whether MAAS has commissioning facts at all (a machine never commissioned has none)."""
        return bool(self.cpu_count or self.memory or self.nics or self.disks)


@dataclass(frozen=True)
class Script:
    """A script of the region's catalogue (``scripts/``)."""

    name: str
    type_name: str
    tags: tuple[str, ...]
    hardware_type: int
    timeout: str  # "H:MM:SS"; "0:00:00" is no limit
    destructive: bool
    for_hardware: tuple[str, ...]
    # each declared parameter's definition (``type``, ``allow_list``, ``default``, …): MAAS
    # drops a parameter a script does not declare, and checks each value by its definition
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Script:
        params = d.get("parameters")
        return cls(
            name=str(d["name"]),
            type_name=_text(d.get("type_name")),
            tags=tuple(str(t) for t in d.get("tags") or ()),
            hardware_type=int(d.get("hardware_type") or 0),
            timeout=_text(d.get("timeout")),
            destructive=bool(d.get("destructive")),
            for_hardware=tuple(str(h) for h in d.get("for_hardware") or ()),
            parameters={str(k): dict(v) for k, v in (params or {}).items() if isinstance(v, dict)}
            if isinstance(params, dict)
            else {},
        )


@dataclass(frozen=True)
class RunResult:
    """One script's result in a run; a per-disk or per-interface testing script has one per
    device, named in its parameters (``device``: the disk's or interface's name). A release's
    ``wipe-disks`` is one result for every disk (decommission/erase.py reads its lines)."""

    id: int
    name: str
    status_name: str
    exit_status: int | None
    started: datetime | None
    ended: datetime | None
    runtime: str
    device: str
    device_serial: str
    parameters: dict[str, Any]
    output: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunResult:
        device, serial = "", ""
        for spec in (d.get("parameters") or {}).values():
            value = spec.get("value") if isinstance(spec, dict) else None
            if spec.get("type") in ("storage", "interface") and isinstance(value, dict):
                device, serial = _text(value.get("name")), _text(value.get("serial"))
        exit_status = d.get("exit_status")
        return cls(
            id=int(d["id"]),
            name=str(d["name"]),
            status_name=_text(d.get("status_name")),
            exit_status=None if exit_status is None else int(exit_status),
            started=_rfc2822(d.get("started")),
            ended=_rfc2822(d.get("ended")),
            runtime=_text(d.get("runtime")),
            device=device,
            device_serial=serial,
            parameters=dict(d.get("parameters") or {}),
            output=_decoded(d.get("output")),
        )


@dataclass(frozen=True)
class ScriptRun:
    """A script set: one testing, commissioning, installation or release run."""

    id: int
    type_name: str
    status_name: str
    started: datetime | None
    ended: datetime | None
    results: tuple[RunResult, ...]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScriptRun:
        return cls(
            id=int(d["id"]),
            type_name=_text(d.get("type_name")),
            status_name=_text(d.get("status_name")),
            started=_rfc2822(d.get("started")),
            ended=_rfc2822(d.get("ended")),
            results=tuple(RunResult.from_json(r) for r in d.get("results") or ()),
        )


class _Sends(Protocol):
    def _send(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        op: str | None = None,
        query: Sequence[tuple[str, str]] = (),
        form: Sequence[tuple[str, str]] = (),
        system_id: str = "",
    ) -> Any: ...


class HardwareReads:
    """The hardware reads of ``MaasClient`` (mixed in; ``_send`` is the client's)."""

    def machine_hardware(self: _Sends, system_id: str) -> MachineHardware:
        data = self._send(
            "get_machine_hardware", "GET", f"machines/{system_id}/", system_id=system_id
        )
        return MachineHardware.from_json(data)

    def node_devices(self: _Sends, system_id: str) -> list[NodeDevice]:
        """Every PCI and USB device MAAS found on the machine (filtered by the caller: MAAS
        has no NUMA or address filter, and one read serves every check)."""
        data = self._send(
            "list_node_devices", "GET", f"nodes/{system_id}/devices/", system_id=system_id
        )
        return [NodeDevice.from_json(d) for d in data or ()]

    def testing_scripts(self: _Sends) -> list[Script]:
        data = self._send("list_scripts", "GET", "scripts/", query=[("type", "testing")])
        return [Script.from_json(s) for s in data or ()]

    def testing_run(self: _Sends, system_id: str) -> ScriptRun | None:
        """The machine's current testing run with each result's output; None if it has none
        (MAAS answers 400 ``Unknown id "current-testing"`` for a machine never tested)."""
        try:
            data = self._send(
                "get_testing_results",
                "GET",
                f"nodes/{system_id}/results/current-testing/",
                query=[("include_output", "1")],
                system_id=system_id,
            )
        except MaasBadRequest as exc:
            if "current-testing" in exc.message:
                return None
            raise
        return ScriptRun.from_json(data) if data else None

    def release_runs(self: _Sends, system_id: str) -> list[ScriptRun]:
        """The machine's release runs (MAAS keeps the last three) with their output, newest
        first: a release with erase has one ``wipe-disks`` result for every disk."""
        data = self._send(
            "list_release_results",
            "GET",
            f"nodes/{system_id}/results/",
            query=[("type", "release"), ("include_output", "1")],
            system_id=system_id,
        )
        runs = [ScriptRun.from_json(s) for s in data or ()]
        return sorted(runs, key=lambda r: r.id, reverse=True)

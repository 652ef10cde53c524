"""Nodes as the simulated region holds them: machines (what MAAS knows of them and what they
really have), devices, the rack controller, their script results, and the boot images a machine
can be deployed with (docs/simulator.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from maas_client.status import NodeStatus
from maas_simulator.faults import MachineFaults
from maas_simulator.hardware import GpuSpec, HardwareInfo, NicSpec, NodeDevice
from maas_simulator.interfaces import Interface
from maas_simulator.scripts import Script
from maas_simulator.storage import Storage
from maas_simulator.users import Event

S = NodeStatus


@dataclass
class ScriptResult:
    """A ``ScriptResult``: one run of a script (of one disk or interface for per-device
    scripts; the device is named in ``parameters``)."""

    id: int
    name: str
    status: int  # SCRIPT_STATUS
    output: bytes
    started: float | None
    ended: float | None
    exit_status: int | None = None
    script: Script | None = None  # None: a built-in output stored by name only
    parameters: dict[str, Any] = field(default_factory=dict)
    disk: tuple[int, str] | None = None  # (block device id, name) of a per-disk result
    interface: tuple[int, str] | None = None  # (interface id, name) of a per-interface one
    stdout: bytes | None = None  # None: the same as output
    stderr: bytes = b""
    result: bytes = b""  # the YAML the script wrote to $RESULT_PATH
    created: float | None = None
    updated: float | None = None
    suppressed: bool = False
    # output made when first read (a commissioning run's JSON of each of 10,000 seeded machines
    # is not built unless someone reads it)
    lazy: Callable[[], bytes] | None = None

    def out(self) -> bytes:
        """The output, made now if it is made on first read."""
        if self.lazy is not None:
            self.output, self.lazy = self.lazy(), None
        return self.output

    @property
    def title(self) -> str:
        """How MAAS names the run in events: ``<name> on <disk>`` for a per-device one."""
        device = self.disk or self.interface
        return f"{self.name} on {device[1]}" if device else self.name

    @property
    def device_key(self) -> tuple[str, int | None, int | None]:
        """Results of one script on one device, across runs (its history)."""
        return (
            self.name,
            self.disk[0] if self.disk else None,
            self.interface[0] if self.interface else None,
        )


SCRIPT_STATUS = {
    0: "Pending",
    1: "Running",
    2: "Passed",
    3: "Failed",
    4: "Timed out",
    5: "Aborted",
    6: "Degraded",
    7: "Installing dependencies",
    8: "Failed installing dependencies",
    9: "Skipped",
    10: "Applying custom network configuration",
    11: "Failed to apply custom network configuration",
}
RUNNING_OR_PENDING = {0, 1, 7, 10}
SKIPPED = 9
RESULT_TYPES = {0: "Commissioning", 1: "Installation", 2: "Testing", 3: "Release"}


def overall_status(statuses: list[int]) -> int:
    """``get_overall_status``: Running, Applying netconf and Installing → Running; then
    Pending, Aborted; the failures and Timed out → Failed; Degraded; else Passed."""
    for candidate in (1, 10, 7, 0, 5, 3, 11, 8, 4, 6):
        if candidate in statuses:
            if candidate in (1, 10, 7):
                return 1
            if candidate in (3, 11, 8, 4):
                return 3
            return candidate
    return 2


@dataclass
class ScriptSet:
    id: int
    type: int
    started: float  # when it was created
    results: list[ScriptResult] = field(default_factory=list)
    ended: float | None = None

    @property
    def status(self) -> int:
        """The set's status from its results that are not suppressed (-1: none at all)."""
        if not self.results:
            return -1
        return overall_status([r.status for r in self.results if not r.suppressed])

    @property
    def first_started(self) -> float | None:
        started = [r.started for r in self.results if r.started is not None]
        return min(started) if started else None

    @property
    def last_ended(self) -> float | None:
        """None while any result has not ended."""
        if not self.results or any(r.ended is None for r in self.results):
            return None
        return max(r.ended for r in self.results if r.ended is not None)


@dataclass
class Hardware:
    """What the machine really has; MAAS learns it by commissioning (or enlistment)."""

    cpu_count: int = 128
    memory: int = 2 * 1024 * 1024  # MiB
    disks: list[dict[str, Any]] | None = None  # None: the default GPU server's disks
    gpus: GpuSpec = field(default_factory=GpuSpec)
    bmc_vga: bool = True  # the BMC's VGA function (ASPEED), also a PCI display device
    nvswitches: int | None = None  # None: 4 with NVIDIA GPUs, else none
    numa_nodes: int = 2
    info: HardwareInfo = field(default_factory=HardwareInfo)
    nics: dict[str, NicSpec] = field(default_factory=dict)  # by MAC address
    gpus_lost: int = 0  # GPUs that fell off the bus since (gpu_lost_after_deploy)
    bios_boot_method: str | None = "uefi"  # what the firmware reports (None: nothing)


@dataclass
class Machine:
    system_id: str
    hostname: str
    architecture: str = "amd64/generic"
    status: NodeStatus = S.NEW
    previous_status: NodeStatus = S.NEW
    power_type: str = "ipmi"
    power_parameters: dict[str, Any] = field(default_factory=dict)
    power_state: str = "off"
    owner: str | None = None
    agent_name: str = ""
    token: str | None = None  # the API token that allocated it (op=allocate), for list_allocated
    osystem: str = ""
    distro_series: str = ""
    hwe_kernel: str | None = None
    bios_boot_method: str | None = None  # as commissioning read it
    error_description: str = ""
    interfaces: list[Interface] = field(default_factory=list)
    hardware: Hardware = field(default_factory=Hardware)
    cpu_count: int = 0  # as MAAS knows it: 0 until commissioning has run
    memory: int = 0
    storage: Storage = field(default_factory=Storage)
    tags: set[str] = field(default_factory=set)
    zone: str = "default"
    pool: str = "default"
    enable_hw_sync: bool = False
    last_sync: float | None = None
    sync_interval: int | None = None
    synced_since_deploy: bool = False  # the first sync after a deploy has happened
    # what commissioning told MAAS beyond CPUs, memory, disks and NICs
    hardware_info: dict[str, str] = field(default_factory=dict)  # empty: all "Unknown"
    numa_nodes: int = 1  # MAAS always has NUMA node 0
    node_devices: list[NodeDevice] = field(default_factory=list)
    # A first discovery's node devices are made when first needed (``Simulator.devices``):
    # the number of GPUs that were off the bus when it read them.
    devices_due: int | None = None
    user_data: bytes | None = None
    owner_data: dict[str, str] = field(default_factory=dict)
    locked: bool = False
    netboot: bool = True
    hardware_uuid: str = ""
    faults: MachineFaults = field(default_factory=MachineFaults)
    # operation bookkeeping
    op_id: int = 0
    op_name: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    last_event: Event | None = None
    script_sets: list[ScriptSet] = field(default_factory=list)
    # the deployment's installation run; release clears it (MAAS then answers 400 for
    # current-installation, recorded against MAAS 3.5.10), the run itself is kept
    current_installation: int | None = None
    # a release the release_stuck fault holds: (its script set, wipe only, failing)
    stuck_release: tuple[Any, bool, bool] | None = None
    created: float = 0.0
    updated: float = 0.0
    _json: bytes | None = None

    node_type = 0
    is_controller = False

    def touch(self, now: float) -> None:
        self.updated = now
        self._json = None

    @property
    def boot_interface(self) -> Interface | None:
        return self.interfaces[0] if self.interfaces else None

    @property
    def power_address(self) -> str:
        return str(self.power_parameters.get("power_address", ""))

    def next_count(self, op: str) -> int:
        self.counts[op] = self.counts.get(op, 0) + 1
        return self.counts[op]


@dataclass
class Device:
    """A MAAS device: a node MAAS only tracks (a switch, a PDU, a BMC), never deploys."""

    system_id: str
    hostname: str
    owner: str | None = None
    interfaces: list[Interface] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    zone: str = "default"
    description: str = ""
    script_sets: list[ScriptSet] = field(default_factory=list)
    # a release the release_stuck fault holds: (its script set, wipe only, failing)
    stuck_release: tuple[Any, bool, bool] | None = None

    node_type = 1
    is_controller = False
    status = S.DEPLOYED  # MAAS keeps devices in a fixed status; edits are never refused
    locked = False

    def touch(self, now: float) -> None:
        pass


@dataclass
class RackController:
    """The region's rack controller: a node with an interface and an address on every VLAN."""

    system_id: str = "rack01"
    hostname: str = "rack01"
    interfaces: list[Interface] = field(default_factory=list)
    script_sets: list[ScriptSet] = field(default_factory=list)
    # a release the release_stuck fault holds: (its script set, wipe only, failing)
    stuck_release: tuple[Any, bool, bool] | None = None
    owner: str | None = None
    tags: set[str] = field(default_factory=set)
    zone: str = "default"

    node_type = 2
    is_controller = True
    status = S.DEPLOYED
    locked = False

    def touch(self, now: float) -> None:
        pass


Node = Machine | Device | RackController


@dataclass
class BootResource:
    id: int
    name: str  # ubuntu/jammy
    architecture: str  # amd64/ga-22.04
    type: str = "Synced"


def default_disks(n: int) -> list[dict[str, Any]]:
    """A GPU server's disks: a 960 GB M.2 boot SSD and a 7.68 TB U.2 data SSD."""
    return [
        {
            "name": "nvme0n1",
            "size": 960_197_124_096,
            "block_size": 512,
            "model": "SAMSUNG MZ1L2960HCJR-00A07",
            "serial": f"S665NE0R{n:06d}",
            "firmware_version": "GDC7302Q",
            "tags": ["ssd"],
        },
        {
            "name": "nvme1n1",
            "size": 7_681_501_126_656,
            "block_size": 4096,
            "model": "SAMSUNG MZQL27T6HBLA-00A07",
            "serial": f"S6CKNE0W{n:06d}",
            "firmware_version": "GDC5902Q",
            "tags": ["ssd"],
        },
    ]


def node_mac(n: int, nic: int) -> str:
    """The generated MAC of NIC ``nic`` of the ``n``-th node."""
    return f"52:54:{(n >> 16) & 0xFF:02x}:{(n >> 8) & 0xFF:02x}:{n & 0xFF:02x}:{nic:02x}"

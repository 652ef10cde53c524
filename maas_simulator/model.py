"""Simulated MAAS state: machines, interfaces, subnets, events, script results, faults.

Time: every duration here is in *MAAS seconds*; ``Clock.scale`` makes them pass faster (scale
60 turns MAAS's 30-minute deploy timeout into 30 real seconds). Machine-driven transitions
(commissioning → testing → Ready, deploying → Deployed, disk erasing → Ready, timeouts) are
scheduled on a heap and applied lazily whenever the simulator is touched, so 10,000 idle
machines cost nothing. Each step runs at the time it was due (events carry that time, follow-up
steps are timed from it), so a clock jump replays a whole chain as it would have happened.

Thread safety: one lock (``Simulator.lock``) around every read and write; requests are short.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import random
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import orjson

from maas_client.status import FAILURE_OF, LABELS, RELEASABLE, NodeStatus
from maas_simulator.network import Interface, Link, Network, Subnet
from maas_simulator.storage import (
    BlockDevice,
    LayoutError,
    LayoutFieldsError,
    Storage,
    new_uuid_factory,
)

S = NodeStatus
NODE_TIMEOUT = 30 * 60  # MAAS config node_timeout default
RELEASE_TIMEOUT = 5 * 60  # hard-coded for RELEASING
API_PREFIX = "/MAAS/api/2.0/"

# Statuses in which a machine has an owner (seeded machines get the first user).
OWNED_STATUSES = {
    S.ALLOCATED,
    S.DEPLOYING,
    S.DEPLOYED,
    S.FAILED_DEPLOYMENT,
    S.RELEASING,
    S.FAILED_RELEASING,
    S.DISK_ERASING,
    S.FAILED_DISK_ERASING,
}

# Statuses in which the AUTO links hold the addresses claimed when the deployment started.
IP_HOLDING_STATUSES = {
    S.DEPLOYING,
    S.DEPLOYED,
    S.FAILED_DEPLOYMENT,
    S.DISK_ERASING,
    S.FAILED_DISK_ERASING,
}

# Leaving these does not update previous_status (pre_save_update_status).
NO_PREVIOUS_STATUS = {
    S.RESCUE_MODE,
    S.ENTERING_RESCUE_MODE,
    S.FAILED_ENTERING_RESCUE_MODE,
    S.EXITING_RESCUE_MODE,
    S.FAILED_EXITING_RESCUE_MODE,
    S.TESTING,
}

LEVELS = {"AUDIT": 0, "DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class Clock:
    """Simulated wall clock: real time * scale, plus explicit jumps (``advance``)."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self._real0 = time.monotonic()
        self._sim0 = time.time()
        self._offset = 0.0

    def now(self) -> float:
        return self._sim0 + (time.monotonic() - self._real0) * self.scale + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds


class ApiError(Exception):
    """An answer MAAS gives for a refused request: status, body and its content type."""

    def __init__(
        self,
        status: int,
        body: Any,
        *,
        json_body: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body
        self.json_body = json_body
        self.headers = headers or {}


def conflict(message: str) -> ApiError:  # NodeStateViolation
    return ApiError(409, message)


def invalid(errors: dict[str, list[str]]) -> ApiError:  # form validation error
    return ApiError(400, errors, json_body=True)


def iso_ms(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")


def event_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%a, %d %b. %Y %H:%M:%S")


def rfc2822(ts: float | None) -> str | None:
    if ts is None:
        return None
    return format_datetime(datetime.fromtimestamp(ts, UTC).replace(tzinfo=None))


@dataclass
class MachineFaults:
    """Per-machine faults. Lists name the operation ordinals that fail (1 = the first)."""

    deploy_datasource_failure: list[int] = field(default_factory=list)
    deploy_curtin_failure: list[int] = field(default_factory=list)
    commission_failure: list[int] = field(default_factory=list)
    erase_failure: list[int] = field(default_factory=list)
    release_stuck: bool = False
    bmc_unreachable: bool = False
    pxe_unlinked: bool = False
    pxe_wrong_subnet: int | None = None  # subnet id the boot interface lands on instead
    enlist_on_power_cycle: bool = False  # an unknown machine appears (NEW) once powered
    node_network_unreachable: bool = False  # URL checks of testing scripts time out (testing.py)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineFaults:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown machine faults: {sorted(unknown)}")
        return cls(**data)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Event:
    id: int
    system_id: str
    hostname: str
    username: str
    level: str
    created: float
    type: str
    description: str
    action: str = ""  # shown as the machine's status_action

    def as_json(self) -> dict[str, Any]:
        return {
            "username": self.username or "unknown",  # Event.owner
            "node": self.system_id,
            "hostname": self.hostname,
            "id": self.id,
            "level": self.level,
            "created": event_time(self.created),
            "type": self.type,
            "description": self.description,
        }

    @property
    def message(self) -> str:
        return f"{self.type} - {self.description}" if self.description else self.type


@dataclass
class ScriptResult:
    id: int
    name: str
    status: int  # SCRIPT_STATUS
    output: bytes
    started: float | None
    ended: float | None
    exit_status: int | None = None


SCRIPT_STATUS = {
    0: "Pending",
    1: "Running",
    2: "Passed",
    3: "Failed",
    4: "Timed out",
    5: "Aborted",
    6: "Degraded",
    9: "Skipped",
}
RESULT_TYPES = {0: "Commissioning", 1: "Installation", 2: "Testing", 3: "Release"}


@dataclass
class ScriptSet:
    id: int
    type: int
    started: float
    results: list[ScriptResult] = field(default_factory=list)
    ended: float | None = None

    @property
    def status(self) -> int:
        statuses = {r.status for r in self.results}
        for candidate in (3, 4, 5, 1, 0):
            if candidate in statuses:
                return candidate
        return 2


@dataclass
class Hardware:
    """What the machine really has; MAAS learns it by commissioning (or enlistment)."""

    cpu_count: int = 128
    memory: int = 2 * 1024 * 1024  # MiB
    disks: list[dict[str, Any]] | None = None  # None: the default GPU server's disks


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
    osystem: str = ""
    distro_series: str = ""
    hwe_kernel: str | None = None
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
class Token:
    consumer_key: str
    token_key: str
    token_secret: str
    name: str = "MAAS consumer"


@dataclass
class User:
    username: str
    is_superuser: bool
    consumer_key: str
    token_key: str
    token_secret: str
    email: str = ""
    tokens: list[Token] = field(default_factory=list)  # minted with create_authorisation_token
    deleted_keys: set[str] = field(default_factory=set)  # token keys deleted (the first one too)
    first_token_name: str = "MAAS consumer"  # noqa: S105 (a consumer name)

    @property
    def api_key(self) -> str:
        return f"{self.consumer_key}:{self.token_key}:{self.token_secret}"

    def all_tokens(self) -> list[Token]:
        """Every live token, the one the user was created with first."""
        first = Token(self.consumer_key, self.token_key, self.token_secret, self.first_token_name)
        return [t for t in (first, *self.tokens) if t.token_key not in self.deleted_keys]


@dataclass
class BootResource:
    id: int
    name: str  # ubuntu/jammy
    architecture: str  # amd64/ga-22.04
    type: str = "Synced"


Step = Callable[["Simulator", Machine], None]


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


def _mac(n: int, nic: int) -> str:
    return f"52:54:{(n >> 16) & 0xFF:02x}:{(n >> 8) & 0xFF:02x}:{n & 0xFF:02x}:{nic:02x}"


class Simulator:
    """The whole simulated region. Public methods take the lock; ``_`` helpers assume it."""

    # MAAS-seconds timelines (docs/maas-api.md §4.4).
    COMMISSION_STEPS = (
        (0, "INFO", "Commissioning", ""),
        (3, "INFO", "Powering on", ""),
        (15, "INFO", "Performing PXE boot", ""),
        (30, "INFO", "Loading ephemeral", ""),
        (50, "INFO", "Gathering information", ""),
    )
    COMMISSION_TESTING_AT = 80
    COMMISSION_READY_AT = 120
    DEPLOY_STEPS = (
        (0, "INFO", "Deploying", ""),
        (3, "INFO", "Powering on", ""),
        (15, "INFO", "Performing PXE boot", ""),
        (30, "INFO", "Loading ephemeral", ""),
        (60, "INFO", "Configuring storage", ""),
        (90, "INFO", "Installing OS", ""),
        (180, "INFO", "Configuring OS", ""),
        (200, "DEBUG", "Installation complete", "Node disabled netboot"),
        (205, "INFO", "Rebooting", ""),
    )
    DEPLOY_INSTALL_LOG_AT = 200
    DEPLOY_FIRST_BOOT_AT = 260
    ERASE_STEPS = (
        (3, "INFO", "Powering on", ""),
        (10, "INFO", "Performing PXE boot", ""),
        (20, "INFO", "Loading ephemeral", ""),
    )
    ERASE_SECONDS = {"quick": 30, "secure": 180, "full": 120}
    RELEASE_POWER_OFF_AT = 10

    def __init__(self, *, scale: float = 1.0, seed: int = 0) -> None:
        self.lock = threading.RLock()
        self.clock = Clock(scale)
        self.rng = random.Random(seed)  # noqa: S311 (reproducible ids, not secrets)
        self.machines: dict[str, Machine] = {}
        self.order: list[str] = []  # machines by creation (MAAS lists by id)
        self.users: dict[str, User] = {}
        self.net = Network()
        self.devices: dict[str, Device] = {}
        self.rack = RackController()
        self.boot_resources: list[BootResource] = []
        self.events: list[Event] = []
        self.events_by_node: dict[str, list[Event]] = {}
        self.allow_duplicate_hostnames = False
        self.config: dict[str, Any] = {
            "default_distro_series": "jammy",
            "default_osystem": "ubuntu",
            "commissioning_distro_series": "jammy",
            "node_timeout": 30,
            "enable_disk_erasing_on_release": False,
            "disk_erase_with_secure_erase": True,
            "disk_erase_with_quick_erase": False,
            "hardware_sync_interval": "15m",
            "maas_name": "maas-sim",
            "default_storage_layout": "flat",
        }
        self._ids = itertools.count(1)
        self._events = itertools.count(1)
        self.new_uuid = new_uuid_factory(self.rng)
        self._heap: list[tuple[float, int, str, int, Step]] = []
        self._step_time: float | None = None
        self._seq = itertools.count()
        self.node_side: Callable[[Simulator, Machine], None] | None = None

    @property
    def subnets(self) -> dict[int, Subnet]:
        return self.net.subnets

    def all_nodes(self) -> list[Node]:
        return [*self.machines.values(), *self.devices.values(), self.rack]

    def node(self, system_id: str) -> Node | None:
        """Any node: a machine, a device or the rack controller."""
        if system_id == self.rack.system_id:
            return self.rack
        return self.machines.get(system_id) or self.devices.get(system_id)

    # -- ids, clock, scheduling -------------------------------------------------------------
    def new_id(self) -> int:
        return next(self._ids)

    def new_system_id(self) -> str:
        alphabet = string.ascii_lowercase + string.digits
        while True:
            sid = "".join(self.rng.choice(alphabet) for _ in range(6))
            if sid not in self.machines:
                return sid

    def now(self) -> float:
        """The simulated time; while a scheduled step runs, the time it was due at."""
        return self._step_time if self._step_time is not None else self.clock.now()

    def schedule(self, m: Machine, delay: float, step: Step) -> None:
        heapq.heappush(
            self._heap, (self.now() + delay, next(self._seq), m.system_id, m.op_id, step)
        )

    def tick(self) -> None:
        """Apply every scheduled machine-driven step that is due, in order.

        Each step runs at the time it was due, so the events it writes carry that time and the
        steps it schedules are timed from it (a clock jump replays a whole chain faithfully).
        """
        now = self.clock.now()
        try:
            while self._heap and self._heap[0][0] <= now:
                due, _, sid, op_id, step = heapq.heappop(self._heap)
                m = self.machines.get(sid)
                if m is not None and m.op_id == op_id:
                    self._step_time = due
                    step(self, m)
        finally:
            self._step_time = None

    def start_op(self, m: Machine, name: str) -> None:
        """A new operation supersedes every step still scheduled for the previous one."""
        m.op_id += 1
        m.op_name = name

    # -- events and status ------------------------------------------------------------------
    def event(
        self,
        m: Machine,
        level: str,
        type_: str,
        description: str = "",
        user: str = "",
        action: str = "",
    ) -> None:
        ev = Event(
            id=next(self._events),
            system_id=m.system_id,
            hostname=m.hostname,
            username=user,
            level=level,
            created=self.now(),
            type=type_,
            description=description,
            action=action,
        )
        self.events.append(ev)
        self.events_by_node.setdefault(m.system_id, []).append(ev)
        if LEVELS[level] >= LEVELS["INFO"]:
            m.last_event = ev
        m.touch(ev.created)

    def request_event(
        self, m: Machine, type_: str, action: str, comment: str, user: User | None
    ) -> None:
        """``Node._register_request_event``: "(user) - comment" for user requests."""
        description = comment
        if user is not None:
            description = f"({user.username}) - {comment}" if comment else f"({user.username})"
        level = "ERROR" if user is None else "DEBUG"
        self.event(m, level, type_, description, user.username if user else "", action=action)

    def set_status(self, m: Machine, new: NodeStatus) -> None:
        """A status change, with the side effects of MAAS's node signals."""
        if new != m.status:
            self.event(
                m, "DEBUG", "Node changed status", f"From '{m.status.label}' to '{new.label}'"
            )
            if m.status not in NO_PREVIOUS_STATUS:
                m.previous_status = m.status
            m.status = new
            if new in (S.NEW, S.READY):
                m.owner = None  # clear_owner_when_status_changes_to_new_or_ready
        m.touch(self.now())

    def node_timeout(self, status: NodeStatus) -> int:
        """Minutes MAAS gives a monitored status (config ``node_timeout``; RELEASING is 5)."""
        if status == S.RELEASING:
            return RELEASE_TIMEOUT // 60
        return int(self.config.get("node_timeout") or NODE_TIMEOUT // 60)

    def mark_failed(self, m: Machine, comment: str, *, script_status: int = 3) -> None:
        """``Node.mark_failed``: pending/running scripts end with ``script_status``."""
        failed = FAILURE_OF.get(m.status)
        if failed is None:
            return  # NEW or already failed: MAAS silently ignores it
        self.request_event(m, "Marking node failed", "mark_failed", comment, None)
        self._end_running_scripts(m, script_status)
        m.error_description = comment
        self.set_status(m, failed)
        self.start_op(m, "failed")

    def _end_running_scripts(self, m: Machine, status: int) -> None:
        now = self.now()
        for ss in m.script_sets:
            for r in ss.results:
                if r.status in (0, 1):  # Pending, Running
                    r.status, r.ended = status, now
            if ss.ended is None and all(r.ended is not None for r in ss.results):
                ss.ended = now
        m.touch(now)

    def schedule_timeout(self, m: Machine, status: NodeStatus) -> None:
        """``status_expires``: the status monitor fails the node once the timeout passes."""
        minutes = self.node_timeout(status)

        def step(sim: Simulator, mm: Machine) -> None:
            if mm.status == status:
                sim.mark_failed(
                    mm,
                    f"Node operation '{status.label}' timed out after {minutes} minutes.",
                    script_status=5,  # Aborted
                )

        self.schedule(m, minutes * 60, step)

    def _steps(
        self, m: Machine, steps: tuple[tuple[int, str, str, str], ...], until: float
    ) -> None:
        def emitter(level: str, type_: str, desc: str) -> Step:
            return lambda sim, mm: sim.event(mm, level, type_, desc)

        for at, level, type_, desc in steps:
            if at <= 0:  # written in the API request itself (e.g. "Deploying")
                self.event(m, level, type_, desc)
            elif at <= until:
                self.schedule(m, at, emitter(level, type_, desc))

    # -- machine creation -------------------------------------------------------------------
    def add_machine(
        self,
        *,
        hostname: str | None = None,
        status: NodeStatus = S.NEW,
        power_parameters: dict[str, Any] | None = None,
        power_type: str = "ipmi",
        mac_addresses: list[str] | None = None,
        interfaces: list[dict[str, Any]] | None = None,
        architecture: str = "amd64/generic",
        faults: MachineFaults | None = None,
        owner: str | None = None,
        system_id: str | None = None,
        hardware: Hardware | None = None,
        discovered: bool = True,
        tags: set[str] | None = None,
        zone: str = "default",
        pool: str = "default",
        agent_name: str = "",
        storage_layout: str | None = None,
    ) -> Machine:
        """Add a machine. ``discovered``: MAAS already knows its hardware (enlisted or seeded);
        False for a machine created through the API, which commissioning discovers."""
        n = self.new_id()
        sid = system_id or self.new_system_id()
        now = self.now()
        m = Machine(
            system_id=sid,
            hostname=hostname or f"node-{sid}",
            architecture=architecture,
            status=status,
            power_type=power_type,
            power_parameters=dict(power_parameters or {}),
            faults=faults or MachineFaults(),
            owner=owner,
            hardware=hardware or Hardware(),
            tags=set(tags or ()),
            zone=zone,
            pool=pool,
            hardware_uuid=f"4c4c4544-{n:04x}-0000-8000-{n:012x}",
            created=now,
            updated=now,
        )
        if m.hardware.disks is None:
            m.hardware.disks = default_disks(n)
        if interfaces is not None:
            self._add_interfaces(m, interfaces)
        elif mac_addresses != []:  # [] = created by BMC address only: NICs found by commissioning
            self._add_interfaces(m, self._default_nics(n, mac_addresses))
        if discovered or status not in (S.NEW, S.COMMISSIONING, S.FAILED_COMMISSIONING):
            self.discover(m)
        if status not in (S.NEW, S.COMMISSIONING, S.FAILED_COMMISSIONING):
            # Seeded past commissioning: it passed once; storage and networking were set up
            # after it.
            self.apply_layout(m, storage_layout or self.config["default_storage_layout"])
            self.reset_networking(m)
            self._script_set(m, 0, passed=True)
        if status in OWNED_STATUSES:
            m.owner = owner or next(iter(self.users), None)
            m.agent_name = agent_name
        if status in (S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT):
            m.osystem, m.distro_series = "ubuntu", self.config["default_distro_series"]
        if status in IP_HOLDING_STATUSES:
            self.claim_auto_ips(m)
        if status == S.DEPLOYED:
            m.power_state, m.netboot = "on", False
        self.machines[sid] = m
        self.order.append(sid)
        return m

    def _default_nics(self, n: int, macs: list[str] | None) -> list[dict[str, Any]]:
        """The boot NIC reaches the lowest-numbered subnet, the second NIC the next one (none:
        no cable); any further NICs have no cable."""
        subnet_ids = sorted(self.subnets)
        specs: list[dict[str, Any]] = []
        for i, mac in enumerate(macs or [_mac(n, 0), _mac(n, 1)]):
            spec: dict[str, Any] = {"name": f"eno{i + 1}", "mac_address": mac}
            if i < len(subnet_ids) and i < 2:
                spec["subnet"] = subnet_ids[i]
            else:
                spec["connected"] = False
            specs.append(spec)
        return specs

    def _add_interfaces(self, node: Node, specs: list[dict[str, Any]]) -> None:
        for spec in specs:
            subnet_id = spec.get("subnet")
            vlan_id = spec.get("vlan")
            if subnet_id is not None:
                if subnet_id not in self.subnets:
                    raise ValueError(f"interface {spec['name']}: unknown subnet {subnet_id}")
                vlan_id = self.subnets[subnet_id].vlan_id
            elif vlan_id is not None and vlan_id not in self.net.vlans:
                raise ValueError(f"interface {spec['name']}: unknown VLAN {vlan_id}")
            node.interfaces.append(
                Interface(
                    id=self.new_id(),
                    name=spec["name"],
                    mac_address=spec["mac_address"].lower(),
                    cable_vlan_id=vlan_id,
                    cable_subnet_id=subnet_id,
                    connected=bool(spec.get("connected", True)),
                    link_connected=bool(spec.get("connected", True)),
                    interface_speed=int(spec.get("speed", 100000)),
                    link_speed=int(spec.get("speed", 100000)),
                )
            )

    def discover(self, m: Machine, *, storage: bool = True) -> None:
        """What commissioning (or enlistment) tells MAAS: CPUs, memory, disks (not with
        ``skip_storage``, whose hook leaves the block devices alone), and the VLAN each
        connected NIC is on (a new fabric for a network MAAS does not know)."""
        m.cpu_count, m.memory = m.hardware.cpu_count, m.hardware.memory
        if storage:
            self._discover_disks(m)
        for iface in m.interfaces:
            iface.link_connected = iface.connected
            if iface.connected and iface.cable_vlan_id is None:
                iface.cable_vlan_id = self.net.new_fabric_with_vlan().id
            if iface.vlan_id is None and iface.connected:
                wrong = m.faults.pxe_wrong_subnet
                if iface is m.boot_interface and wrong in self.subnets:
                    iface.vlan_id = self.subnets[wrong].vlan_id  # cabled into the wrong network
                else:
                    iface.vlan_id = iface.cable_vlan_id
            iface.snapshot()
        m.touch(self.now())

    def _discover_disks(self, m: Machine) -> None:
        """Disks keep their ids across commissionings (MAAS matches them by serial)."""
        known = {d.serial or d.name: d for d in m.storage.physical}
        devices = []
        for spec in m.hardware.disks or []:
            device = known.pop(spec.get("serial") or spec["name"], None)
            if device is None:
                device = BlockDevice(self.new_id(), spec["name"], int(spec["size"]))
            device.name = spec["name"]
            device.size = int(spec["size"])
            device.block_size = int(spec.get("block_size", 512))
            device.model = spec.get("model")
            device.serial = spec.get("serial")
            device.id_path = spec.get("id_path")
            device.firmware_version = spec.get("firmware_version")
            device.numa_node = int(spec.get("numa_node", 0))
            device.tags = sorted(set(device.tags) | set(spec.get("tags") or []))
            devices.append(device)
        if known:  # a disk is gone: its configuration goes with it
            m.storage.clear()
        m.storage.devices = devices + [d for d in m.storage.devices if d.kind == "virtual"]

    def apply_layout(self, m: Machine, name: str, params: dict[str, str] | None = None) -> None:
        """A storage layout; an unusable default layout leaves the storage blank, as MAAS's
        ``set_default_storage_layout`` does when it cannot apply one."""
        try:
            m.storage.apply_layout(name, new_id=self.new_id, new_uuid=self.new_uuid, params=params)
        except (LayoutError, LayoutFieldsError):
            if params is not None:
                raise
            m.storage.clear()
        m.touch(self.now())

    def reset_networking(self, m: Machine) -> None:
        """``set_initial_networking_configuration`` after commissioning: the boot NIC AUTO on
        the subnet it booted from (else AUTO on a subnet of its VLAN, else DHCP), the other
        connected NICs LINK_UP. A machine created by BMC address alone gets its NICs here, as
        commissioning discovers them."""
        if not m.interfaces:
            self._add_interfaces(m, self._default_nics(self.new_id(), None))
            self.discover(m)
        for iface in m.interfaces:
            self.net.clear_links(iface)
        boot = m.boot_interface
        assert boot is not None
        wrong = m.faults.pxe_wrong_subnet
        booted_from = wrong if wrong in self.subnets else boot.cable_subnet_id
        if m.faults.pxe_unlinked:
            self.net.ensure_link_up(boot, self.new_id)
        elif booted_from is not None and boot.vlan_id is not None:
            boot.links = [Link(self.new_id(), "auto", booted_from)]
        elif boot.vlan_id is not None:
            on_vlan = sorted(s.id for s in self.subnets.values() if s.vlan_id == boot.vlan_id)
            mode = "auto" if on_vlan else "dhcp"
            boot.links = [Link(self.new_id(), mode, on_vlan[0] if on_vlan else None)]
        for iface in m.interfaces[1:]:
            if iface.enabled:
                self.net.ensure_link_up(iface, self.new_id)
        m.touch(self.now())

    def clear_networking(self, m: Machine) -> None:
        """``_clear_networking_configuration`` (commissioning start): every link goes."""
        for iface in m.interfaces:
            self.net.clear_links(iface)
        m.touch(self.now())

    def claim_auto_ips(self, m: Machine) -> None:
        """``claim_auto_ips`` when a deployment starts: every AUTO link takes an address."""
        for iface in m.interfaces:
            for link in iface.links:
                subnet = self.subnets.get(link.subnet_id or -1)
                if link.mode == "auto" and not link.ip_address and subnet is not None:
                    link.ip_address = subnet.allocate()
        m.touch(self.now())

    def release_auto_ips(self, m: Machine) -> None:
        """``release_interface_config``: AUTO links give their addresses back."""
        for iface in m.interfaces:
            for link in iface.links:
                if link.mode == "auto":
                    self.net.release_ip(link)
        m.touch(self.now())

    def _script_set(
        self, m: Machine, type_: int, *, passed: bool | None, output: bytes = b""
    ) -> ScriptSet:
        now = self.now()
        names = {
            0: ["00-maas-01-cpuinfo", "00-maas-04-lshw", "50-maas-01-commissioning"],
            1: ["/tmp/install.log"],  # noqa: S108 (the name MAAS gives the curtin log)
            2: ["smartctl-validate"],
            3: ["wipe-disks"],
        }[type_]
        status = 1 if passed is None else (2 if passed else 3)
        ss = ScriptSet(id=self.new_id(), type=type_, started=now)
        for name in names:
            ss.results.append(
                ScriptResult(
                    id=self.new_id(),
                    name=name,
                    status=status,
                    output=output or f"{name}: ok\n".encode(),
                    started=now,
                    ended=None if passed is None else now,
                    exit_status=None if passed is None else (0 if passed else 1),
                )
            )
        m.script_sets.append(ss)
        return ss

    def _finish_script_set(self, m: Machine, type_: int, *, passed: bool, output: bytes) -> None:
        for ss in reversed(m.script_sets):
            if ss.type == type_:
                ss.ended = self.now()
                for r in ss.results:
                    r.status, r.ended, r.output = (2 if passed else 3), self.now(), output
                    r.exit_status = 0 if passed else 1
                return

    # -- operations (called by the API with the lock held) ----------------------------------
    def commission(self, m: Machine, user: User, params: dict[str, Any]) -> None:
        if m.status not in {S.NEW, S.FAILED_COMMISSIONING, S.READY, S.BROKEN} or m.locked:
            raise invalid(
                {
                    "__all__": [
                        "Commission is not available because of the current state of the node."
                    ]
                }
            )
        if m.power_type == "":
            raise ApiError(
                500, "Unconfigured power type. Please configure the power type and try again."
            )
        ordinal = m.next_count("commission")
        self.start_op(m, "commission")
        m.owner = user.username
        m.error_description = ""
        self.request_event(m, "User starting node commissioning", "start commissioning", "", user)
        # start_commissioning: the configuration is wiped unless it is to be kept.
        if not params.get("skip_storage"):
            m.storage.clear()
        if not params.get("skip_networking"):
            self.clear_networking(m)
        self.set_status(m, S.COMMISSIONING)
        self._script_set(m, 0, passed=None)
        self.schedule_timeout(m, S.COMMISSIONING)
        if m.faults.bmc_unreachable:
            self.schedule(m, 3, lambda sim, mm: sim._power_failure(mm, "on"))
            return
        if self._boots_elsewhere(m):
            return
        self._steps(m, self.COMMISSION_STEPS, until=1e9)
        if ordinal in m.faults.commission_failure:

            def fail(sim: Simulator, mm: Machine) -> None:
                sim.event(
                    mm,
                    "ERROR",
                    "Node commissioning failure",
                    "'cloudinit' running modules for final",
                )
                sim._finish_script_set(
                    mm, 0, passed=False, output=b"50-maas-01-commissioning: lshw exited 1\n"
                )
                sim.mark_failed(
                    mm,
                    "Commissioning failed, cloud-init reported a failure "
                    "(refer to the event log for more information)",
                )
                mm.power_state = "off"

            self.schedule(m, self.COMMISSION_TESTING_AT - 10, fail)
            return
        run_tests = (params.get("testing_scripts") or "").strip().lower() != "none"

        def processed(sim: Simulator, mm: Machine) -> None:
            # The commissioning output is processed: hardware, default layout, networking.
            sim.discover(mm, storage=not params.get("skip_storage"))
            if not params.get("skip_storage"):
                sim.apply_layout(mm, sim.config["default_storage_layout"])
            if not params.get("skip_networking"):
                sim.reset_networking(mm)

        def ready(sim: Simulator, mm: Machine) -> None:
            if run_tests:
                sim._finish_script_set(mm, 2, passed=True, output=b"smartctl-validate: PASSED\n")
            else:
                sim._finish_script_set(mm, 0, passed=True, output=b"commissioning ok\n")
                processed(sim, mm)
            mm.owner = None
            mm.power_state = "off"
            sim.set_status(mm, S.READY)
            sim.event(mm, "INFO", "Ready", "")

        if not run_tests:  # testing_scripts=none: straight to Ready, no Testing phase
            self.schedule(m, self.COMMISSION_TESTING_AT, ready)
            return

        def testing(sim: Simulator, mm: Machine) -> None:
            sim._finish_script_set(mm, 0, passed=True, output=b"commissioning ok\n")
            processed(sim, mm)
            sim.set_status(mm, S.TESTING)
            sim.event(mm, "INFO", "Running test", "smartctl-validate on sda")
            sim._script_set(mm, 2, passed=None)
            sim.schedule_timeout(mm, S.TESTING)

        self.schedule(m, self.COMMISSION_TESTING_AT, testing)
        self.schedule(m, self.COMMISSION_READY_AT, ready)

    def _commissioning_passed(self, m: Machine) -> bool:
        sets = [s for s in m.script_sets if s.type == 0]
        return bool(sets) and sets[-1].status == 2

    def _power_on(self, m: Machine) -> None:
        """MAAS powers the machine on (or cycles it) for an ephemeral boot."""
        m.power_state = "on"
        if m.faults.enlist_on_power_cycle:
            # The BMC answers for another box: that one PXE boots from MACs MAAS does not know
            # and enlists itself as a NEW machine (with the same BMC address).
            m.faults.enlist_on_power_cycle = False
            stranger = self.add_machine(
                power_type=m.power_type, power_parameters=dict(m.power_parameters)
            )
            self.event(stranger, "INFO", "New", "")

    def _boots_elsewhere(self, m: Machine) -> bool:
        """Power the machine on for commissioning. With ``enlist_on_power_cycle`` the box that
        boots enlists itself as another machine instead: this record's commissioning never
        hears back (MAAS's node timeout fails it)."""
        elsewhere = m.faults.enlist_on_power_cycle
        self._power_on(m)
        return elsewhere

    def _power_failure(self, m: Machine, change: str) -> None:
        """What the rack reports when the BMC cannot be reached (``power_change_failure``)."""
        message = (
            f"Power {change} for the node failed: Connection timed out while performing power "
            "action.  Check BMC configuration and connectivity and try again."
        )
        m.power_state = "error"
        if m.status == S.DEPLOYING:
            self.release_auto_ips(m)  # the claim is undone when the power-on fails
        self.mark_failed(m, message)
        self.event(m, "ERROR", f"Failed to power {change} node", message)

    def acquire(self, m: Machine, user: User, agent_name: str, comment: str) -> None:
        """``Node.acquire``: Allocated to the caller, with the agent name it gave."""
        self.request_event(m, "User acquiring node", "acquire", comment, user)
        self.set_status(m, S.ALLOCATED)
        m.owner = user.username
        m.agent_name = agent_name

    def deploy(self, m: Machine, user: User, params: dict[str, Any]) -> None:
        if m.status == S.READY:
            if m.owner is not None and m.owner != user.username:
                raise conflict("Can't allocate a machine belonging to another user.")
            self.acquire(m, user, params.get("agent_name") or "", params.get("comment") or "")
        elif m.status == S.ALLOCATED and m.owner != user.username and not user.is_superuser:
            raise ApiError(403, "")  # no edit permission on someone else's machine
        if m.status != S.ALLOCATED:  # DEPLOYING not in NODE_TRANSITIONS[status]
            raise conflict(f"Can't deploy a machine that is in the '{m.status.label}' state")
        ordinal = m.next_count("deploy")
        self.start_op(m, "deploy")
        m.osystem = "ubuntu"
        m.distro_series = params["distro_series"]
        m.hwe_kernel = params.get("hwe_kernel") or None
        m.user_data = params.get("user_data")
        m.enable_hw_sync = bool(params.get("enable_hw_sync"))
        m.sync_interval = 900 if m.enable_hw_sync else None
        m.error_description = ""
        self.request_event(m, "User starting deployment", "start", "", user)
        self.set_status(m, S.DEPLOYING)
        self._script_set(m, 1, passed=None)
        self.schedule_timeout(m, S.DEPLOYING)
        # The AUTO addresses are claimed after the commit, a moment after MAAS answers.
        self.schedule(m, 0, lambda sim, mm: sim.claim_auto_ips(mm))
        if m.faults.bmc_unreachable:
            self.schedule(m, 3, lambda sim, mm: sim._power_failure(mm, "on"))
            return
        self._power_on(m)
        if ordinal in m.faults.deploy_curtin_failure:
            self._steps(m, self.DEPLOY_STEPS, until=90)

            def curtin_fail(sim: Simulator, mm: Machine) -> None:
                sim.event(mm, "ERROR", "Node installation failure", "'curtin' command install")
                sim._finish_script_set(
                    mm,
                    1,
                    passed=False,
                    output=b"curtin: Installation failed with exception: Unexpected error while "
                    b"running command.\nCommand: ['sgdisk', '--zap-all', '/dev/sda']\n",
                )
                sim.mark_failed(
                    mm, "Installation failed (refer to the installation log for more information)."
                )

            self.schedule(m, 120, curtin_fail)
            return
        self._steps(m, self.DEPLOY_STEPS, until=1e9)

        def install_log(sim: Simulator, mm: Machine) -> None:
            mm.netboot = False  # curtin's netboot_off ("Installation complete")
            sim._finish_script_set(mm, 1, passed=True, output=b"curtin: Installation finished.\n")
            sim.event(
                mm,
                "DEBUG",
                "Script result",
                "/tmp/install.log changed status from 'Running' to 'Passed'",  # noqa: S108
            )

        self.schedule(m, self.DEPLOY_INSTALL_LOG_AT, install_log)
        if ordinal in m.faults.deploy_datasource_failure:
            # The installed OS never reaches the MAAS datasource: no user-data request, so MAAS
            # never marks it Deployed; the node timeout fires 30 minutes after deploy started.
            self.schedule(
                m,
                self.DEPLOY_FIRST_BOOT_AT,
                lambda sim, mm: sim.event(
                    mm,
                    "DEBUG",
                    "Node installation",
                    "'cloudinit' searching for network data from DataSourceMAAS",
                ),
            )
            return

        def first_boot(sim: Simulator, mm: Machine) -> None:
            # cloud-init of the installed OS asks for user-data: MAAS ends the deployment.
            sim.set_status(mm, S.DEPLOYED)
            if mm.enable_hw_sync:
                mm.last_sync = sim.now()
            sim.event(
                mm,
                "INFO",
                "Image Deployed",
                f"deployed {mm.osystem}/{mm.distro_series}/{mm.architecture}",
            )
            sim.event(mm, "INFO", "Deployed", "")
            if sim.node_side is not None:
                sim.node_side(sim, mm)  # the node side (enrollment call) plugs in here

        self.schedule(m, self.DEPLOY_FIRST_BOOT_AT, first_boot)

    def release(self, m: Machine, user: User, params: dict[str, Any]) -> None:
        if m.status in (S.RELEASING, S.READY):
            return  # a redundant retry: the postcondition already holds

        if m.status not in RELEASABLE:
            raise conflict(f"Machine cannot be released in its current state ('{m.status.label}').")
        erase = params.get("erase")
        if erase is None:  # not sent: the region's default (an explicit false wins)
            erase = self.config["enable_disk_erasing_on_release"]
        ordinal = m.next_count("release")
        self.start_op(m, "release")
        comment = params.get("comment") or ""
        if not erase:
            self.request_event(m, "User releasing node", "release", comment, user)
            self._release(m)
            return
        # Only the wipe-disks release script: MAAS keeps the old "Disk erasing" statuses. The
        # machine keeps its owner and OS until the wipe has finished and release() runs.
        if params.get("secure_erase"):
            mode = "secure"
        elif params.get("quick_erase"):
            mode = "quick"
        else:
            mode = "full"
        self.request_event(m, "User erasing disk", "start disk erasing", comment, user)
        self.set_status(m, S.DISK_ERASING)
        self._script_set(m, 3, passed=None)
        self.schedule_timeout(m, S.DISK_ERASING)
        m.power_state = "on"
        self._steps(m, self.ERASE_STEPS, until=1e9)
        if m.faults.release_stuck:
            return  # the ephemeral environment never reports back
        if ordinal in m.faults.erase_failure:

            def erase_fail(sim: Simulator, mm: Machine) -> None:
                sim._finish_script_set(
                    mm,
                    3,
                    passed=False,
                    output=b"wipe-disks: /dev/sda: secure erase failed: Input/output error\n",
                )
                sim.mark_failed(mm, "Failed to erase disks.")
                mm.power_state = "off"

            self.schedule(m, self.ERASE_SECONDS[mode], erase_fail)
            return

        def erased(sim: Simulator, mm: Machine) -> None:
            sim._finish_script_set(mm, 3, passed=True, output=b"wipe-disks: done\n")
            sim.event(mm, "INFO", "Disks erased", "")
            sim._release(mm)

        self.schedule(m, self.ERASE_SECONDS[mode], erased)

    def _release(self, m: Machine) -> None:
        """``Node._release``: RELEASING, clear the deployment, power off, then finalise."""
        self.set_status(m, S.RELEASING)
        m.osystem = m.distro_series = ""
        m.hwe_kernel = None
        m.enable_hw_sync, m.last_sync, m.sync_interval = False, None, None
        m.user_data = None
        m.netboot = True
        m.agent_name = ""
        self.release_auto_ips(m)
        self.event(m, "INFO", "Releasing", "")
        if m.faults.release_stuck:
            self.schedule_timeout(m, S.RELEASING)  # power-off is never observed
            return
        if m.power_state == "off" or m.power_type == "manual":
            self._finalize_release(m)
            return
        self.event(m, "INFO", "Powering off", "")
        self.schedule_timeout(m, S.RELEASING)

        def powered_off(sim: Simulator, mm: Machine) -> None:
            mm.power_state = "off"
            sim._finalize_release(mm)

        self.schedule(m, self.RELEASE_POWER_OFF_AT, powered_off)

    def _finalize_release(self, m: Machine) -> None:
        """READY, or NEW if the machine never commissioned successfully; owner cleared."""
        self.set_status(m, S.READY if self._commissioning_passed(m) else S.NEW)
        m.owner = None
        m.owner_data = {}
        self.event(m, "INFO", "Released", "")

    ABORTS = {  # request event, its action, status event
        S.COMMISSIONING: (
            "User aborting node commissioning",
            "abort commissioning",
            "Aborted commissioning",
        ),
        S.DEPLOYING: ("User aborting deployment", "abort deploying", "Aborted deployment"),
        S.DISK_ERASING: ("User aborting disk erase", "abort disk erasing", "Aborted disk erasing"),
        S.TESTING: ("User aborting node testing", "abort testing", "Aborted testing"),
    }

    def abort(self, m: Machine, user: User, comment: str) -> None:
        if m.status not in self.ABORTS:
            raise conflict(
                f"Cannot abort in current state: node {m.system_id} is in state {m.status.label}."
            )
        target = {
            S.COMMISSIONING: S.NEW,
            S.DEPLOYING: S.ALLOCATED,
            S.DISK_ERASING: S.FAILED_DISK_ERASING,
            # testing right after commissioning: straight to Ready
            S.TESTING: S.READY if m.previous_status == S.COMMISSIONING else m.previous_status,
        }[m.status]
        request_event, action, status_event = self.ABORTS[m.status]
        if m.status == S.COMMISSIONING:
            m.owner = None
        self.start_op(m, "abort")
        self.request_event(m, request_event, action, comment, user)
        self.event(m, "INFO", status_event, "")
        self._end_running_scripts(m, 5)  # Aborted
        if m.power_state == "on":
            self.event(m, "INFO", "Powering off", "")
        m.power_state = "off"
        # MAAS applies the new status once the power-off went out, a moment after it answers;
        # the simulator applies it at once.
        self.set_status(m, target)

    def mark_broken(self, m: Machine, user: User, comment: str) -> None:
        if m.owner != user.username:
            raise ApiError(403, "")

        self.start_op(m, "mark_broken")
        self.request_event(m, "User marking node broken", "mark broken", comment, user)
        if m.status in RELEASABLE:  # release first (RELEASING, OS cleared, power off)
            self.set_status(m, S.RELEASING)
            m.osystem = m.distro_series = ""
            m.agent_name = ""
            self.release_auto_ips(m)
            m.hwe_kernel = None
            m.enable_hw_sync, m.last_sync, m.sync_interval = False, None, None
            m.netboot = True
            self.event(m, "INFO", "Releasing", "")
            if m.power_state == "on":
                self.event(m, "INFO", "Powering off", "")
                m.power_state = "off"
        self.set_status(m, S.BROKEN)
        m.owner = None
        m.error_description = comment

    def mark_fixed(self, m: Machine, user: User, comment: str) -> None:
        if m.status != S.BROKEN:
            raise conflict("Can't mark a non-broken node as 'Ready'.")
        self.start_op(m, "mark_fixed")
        self.request_event(m, "User marking node fixed", "mark fixed", comment, user)
        self.set_status(m, S.DEPLOYED if m.previous_status == S.DEPLOYED else S.READY)
        m.error_description = ""
        m.osystem = m.distro_series = ""
        m.hwe_kernel = None

    def lock_machine(self, m: Machine, user: User, comment: str) -> None:
        self.request_event(m, "User locking node", "lock", comment, user)
        if m.status not in (S.DEPLOYED, S.DEPLOYING):
            raise conflict("Can't lock, node is not deployed or deploying")
        m.locked = True
        m.touch(self.now())

    def unlock_machine(self, m: Machine, user: User, comment: str) -> None:
        self.request_event(m, "User unlocking node", "unlock", comment, user)
        m.locked = False
        m.touch(self.now())

    def power(self, m: Machine, user: User, on: bool, comment: str = "") -> None:
        """power_on / power_off: MAAS answers at once; the BMC is driven after the commit."""
        if on and m.owner is None:
            raise conflict("Can't start node: it hasn't been allocated.")
        change = "on" if on else "off"
        self.request_event(
            m,
            "User powering up node" if on else "User powering down node",
            "start" if on else "stop",
            comment,
            user,
        )
        self.event(m, "INFO", "Powering on" if on else "Powering off", "")
        if m.faults.bmc_unreachable:
            self.schedule(m, 3, lambda sim, mm: sim._power_failure(mm, change))
            return
        if on:
            self._power_on(m)
        else:
            m.power_state = "off"

    def query_power(self, m: Machine) -> str:
        if m.faults.bmc_unreachable:
            message = (
                "Connection timed out while performing power action.  Check BMC configuration "
                "and connectivity and try again."
            )
            m.power_state = "error"
            self.event(m, "WARNING", "Failed to query node's BMC", message)
            raise ApiError(503, message)
        return m.power_state

    # -- serialisation -----------------------------------------------------------------------
    def interface_json(self, node: Node, iface: Interface) -> dict[str, Any]:
        return self.net.interface_json(node.system_id, iface)

    def machine_json(self, m: Machine) -> bytes:
        """The machine as MAAS shows it, cached until the machine changes."""
        if m._json is None:
            m._json = orjson.dumps(self._machine_dict(m))
        return m._json

    def _machine_dict(self, m: Machine) -> dict[str, Any]:
        ifaces = [self.net.interface_json(m.system_id, i) for i in m.interfaces]
        ips = [link.ip_address for i in m.interfaces for link in i.links if link.ip_address]
        next_sync = m.last_sync + m.sync_interval if m.last_sync and m.sync_interval else None
        last = m.last_event
        status_name = LABELS[m.status]
        data: dict[str, Any] = {
            "system_id": m.system_id,
            "hostname": m.hostname,
            "fqdn": f"{m.hostname}.maas",
            "description": "",
            "hardware_uuid": m.hardware_uuid,
            "domain": self.net.domain_json(self.net.domains[0]),
            "owner": m.owner,
            "owner_data": dict(m.owner_data),
            "workload_annotations": dict(m.owner_data),
            "locked": m.locked,
            "architecture": m.architecture,
            "min_hwe_kernel": "",
            "hwe_kernel": m.hwe_kernel,
            "osystem": m.osystem,
            "distro_series": m.distro_series,
            "ephemeral_deploy": False,
            "cpu_count": m.cpu_count,
            "cpu_speed": 2400,
            "memory": m.memory,
            "swap_size": None,
            "status": int(m.status),
            "status_name": status_name,
            "status_message": last.message if last else None,
            "status_action": last.action if last else None,
            "error_description": m.error_description,
            "netboot": m.netboot,
            "power_type": m.power_type,
            "power_state": m.power_state,
            "tag_names": sorted(m.tags),
            "address_ttl": None,
            "ip_addresses": ips,
            "interface_set": ifaces,
            "boot_interface": ifaces[0] if ifaces else None,
            "zone": self.zone_json(m.zone),
            "pool": self.net.pool_json(self.net.pool_named(m.pool) or self.net.pools[0]),
            "disable_ipv4": False,
            **m.storage.machine_fields(m.system_id),
            "raids": [],
            "cache_sets": [],
            "bcaches": [],
            "special_filesystems": [],
            "default_gateways": self.net.default_gateways(
                m.interfaces, m.boot_interface.id if m.boot_interface else None
            ),
            "node_type": 0,
            "node_type_name": "Machine",
            "parent": None,
            "current_commissioning_result_id": self._current_set_id(m, 0),
            "current_testing_result_id": self._current_set_id(m, 2),
            "current_installation_result_id": self._current_set_id(m, 1),
            "hardware_info": {
                "system_vendor": "Supermicro",
                "system_product": "SYS-821GE-TNHR",
                "system_family": "Unknown",
                "system_version": "Unknown",
                "system_sku": "Unknown",
                "system_serial": m.hardware_uuid[-12:],
                "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
                "mainboard_vendor": "Supermicro",
                "mainboard_product": "X13DEG-OAD",
                "mainboard_serial": "Unknown",
                "mainboard_version": "Unknown",
                "mainboard_firmware_vendor": "American Megatrends International, LLC.",
                "mainboard_firmware_date": "Unknown",
                "mainboard_firmware_version": "2.1",
                "chassis_vendor": "Supermicro",
                "chassis_type": "Rack Mount Chassis",
                "chassis_serial": "Unknown",
                "chassis_version": "Unknown",
            },
            "numanode_set": [
                {
                    "index": 0,
                    "cores": list(range(m.cpu_count // 2)),
                    "memory": m.memory // 2,
                    "hugepages_set": [],
                },
                {
                    "index": 1,
                    "cores": list(range(m.cpu_count // 2, m.cpu_count)),
                    "memory": m.memory // 2,
                    "hugepages_set": [],
                },
            ],
            "bios_boot_method": "uefi",
            "last_sync": iso_ms(m.last_sync),
            "next_sync": iso_ms(next_sync),
            "sync_interval": m.sync_interval,
            "enable_hw_sync": m.enable_hw_sync,
            "pod": None,
            "virtualmachine_id": None,
            "resource_uri": f"{API_PREFIX}machines/{m.system_id}/",
        }
        for prefix in (
            "commissioning",
            "testing",
            "cpu_test",
            "memory_test",
            "network_test",
            "storage_test",
            "other_test",
            "interface_test",
        ):
            type_ = 0 if prefix == "commissioning" else 2
            sets = [s for s in m.script_sets if s.type == type_]
            status = sets[-1].status if sets else -1
            data[f"{prefix}_status"] = status
            data[f"{prefix}_status_name"] = SCRIPT_STATUS.get(status, "Unknown")
        return data

    def zone_json(self, name: str) -> dict[str, Any]:
        return self.net.zone_json(self.net.zone_named(name) or self.net.zones[1])

    def _current_set_id(self, m: Machine, type_: int) -> int | None:
        sets = [s for s in m.script_sets if s.type == type_]
        return sets[-1].id if sets else None

    def script_set_json(self, m: Node, ss: ScriptSet, include_output: bool) -> dict[str, Any]:
        def runtime(r: ScriptResult) -> str:
            if r.started is None or r.ended is None:
                return ""
            seconds = int(r.ended - r.started)
            return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"

        results = []
        for r in ss.results:
            item: dict[str, Any] = {
                "id": r.id,
                "created": rfc2822(ss.started),
                "updated": rfc2822(r.ended or ss.started),
                "name": r.name,
                "status": r.status,
                "status_name": SCRIPT_STATUS.get(r.status, "Unknown"),
                "exit_status": r.exit_status,
                "started": rfc2822(r.started),
                "ended": rfc2822(r.ended),
                "runtime": runtime(r),
                "starttime": r.started,
                "endtime": r.ended,
                "estimated_runtime": "0:00:10",
                "parameters": {},
                "script_id": r.id,
                "script_revision_id": r.id,
                "suppressed": False,
            }
            if include_output:
                encoded = base64.b64encode(r.output).decode()
                item.update({"output": encoded, "stdout": encoded, "stderr": "", "result": ""})
            results.append(item)
        return {
            "id": ss.id,
            "system_id": m.system_id,
            "type": ss.type,
            "type_name": RESULT_TYPES[ss.type],
            "last_ping": rfc2822(ss.ended or ss.started),
            "status": ss.status,
            "status_name": SCRIPT_STATUS.get(ss.status, "Unknown"),
            "started": rfc2822(ss.started),
            "ended": rfc2822(ss.ended),
            "runtime": "",
            "results": results,
            "suppressed": False,
            "resource_uri": f"{API_PREFIX}nodes/{m.system_id}/results/{ss.id}/",
        }

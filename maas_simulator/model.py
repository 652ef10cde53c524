"""The simulated region's state: machines, devices, the rack controller, users, events, the
network and boot images; ids, the clock and its scheduled steps; status changes and failures;
adding machines and what commissioning discovers of them (docs/simulator.md).

The lifecycle operations (commission, deploy, release, …) are in ``lifecycle.py``, the JSON the
API answers with in ``render.py``. Each scheduled step runs at the time it was due (events carry
that time, follow-up steps are timed from it), so a clock jump replays a whole chain as it would
have happened.

Thread safety: one lock (``Simulator.lock``) around every read and write; requests are short.
"""

from __future__ import annotations

import itertools
import random
import string
import threading
from collections.abc import Callable
from typing import Any

from maas_client.status import FAILURE_OF, NodeStatus
from maas_simulator.clock import Clock, Scheduler
from maas_simulator.faults import MachineFaults
from maas_simulator.hardware import NicSpec, NodeDevice
from maas_simulator.interfaces import (
    Interface,
    Link,
    clear_links,
    ensure_link_up,
    release_ip,
    remove_interface,
)
from maas_simulator.inventory import Change, read_hardware
from maas_simulator.inventory import node_devices as make_node_devices
from maas_simulator.network import Network, Subnet
from maas_simulator.nodes import (
    RUNNING_OR_PENDING,
    SCRIPT_STATUS,
    SKIPPED,
    BootResource,
    Device,
    Hardware,
    Machine,
    Node,
    RackController,
    ScriptResult,
    ScriptSet,
    default_disks,
    node_mac,
)
from maas_simulator.outputs import commissioning_output
from maas_simulator.scripts import COMMISSIONING, TESTING, Catalogue, Script
from maas_simulator.scriptsets import ParameterErrors, clean_old, new_results, select
from maas_simulator.storage import (
    BlockDevice,
    LayoutError,
    LayoutFieldsError,
    MiB,
    new_uuid_factory,
)
from maas_simulator.users import LEVELS, Event, SSHKey, User

S = NodeStatus
NODE_TIMEOUT = 30 * 60  # MAAS config node_timeout default
RELEASE_TIMEOUT = 5 * 60  # hard-coded for RELEASING

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

# ALLOCATED_NODE_STATUSES: the storage shows the acquired filesystems (Storage.fs). MAAS's
# list has Testing and Failed testing in it too.
ALLOCATED_STATUSES = {
    S.ALLOCATED,
    S.DEPLOYING,
    S.DEPLOYED,
    S.FAILED_DEPLOYMENT,
    S.RELEASING,
    S.FAILED_RELEASING,
    S.DISK_ERASING,
    S.FAILED_DISK_ERASING,
    S.RESCUE_MODE,
    S.ENTERING_RESCUE_MODE,
    S.FAILED_ENTERING_RESCUE_MODE,
    S.EXITING_RESCUE_MODE,
    S.FAILED_EXITING_RESCUE_MODE,
    S.TESTING,
    S.FAILED_TESTING,
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

Step = Callable[["Simulator", Machine], None]


class Simulator:
    """The whole simulated region. Public methods take the lock; ``_`` helpers assume it."""

    def __init__(self, *, scale: float = 1.0, seed: int = 0) -> None:
        self.lock = threading.RLock()
        self.clock = Clock(scale)
        self.rng = random.Random(seed)  # noqa: S311 (reproducible ids, not secrets)
        self.machines: dict[str, Machine] = {}
        self.order: list[str] = []  # machines by creation (MAAS lists by id)
        self.users: dict[str, User] = {}
        self.ssh_keys: dict[int, SSHKey] = {}  # account/prefs/sshkeys/, from the scenario
        self.net = Network()
        self.devices: dict[str, Device] = {}
        self.rack = RackController()
        self.boot_resources: list[BootResource] = []
        self.events: list[Event] = []
        self.events_by_node: dict[str, list[Event]] = {}
        self.allow_duplicate_hostnames = False
        # False: a region without a rack controller (scenario ``rack_controller: false``): no
        # power action reaches a BMC (lifecycle.no_rack_for)
        self.rack_controller = True
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
            # MAAS 3.5's defaults (recorded against MAAS 3.5.10's get_config)
            "default_min_hwe_kernel": "",
            "enable_third_party_drivers": True,
            "max_node_installation_results": 3,
            "max_node_release_results": 3,
            "max_node_commissioning_results": 10,
            "max_node_testing_results": 10,
            "ntp_servers": "ntp.ubuntu.com",
            "http_proxy": None,
            "kernel_opts": None,
            "enable_analytics": True,
            "network_discovery": "enabled",
            "completed_intro": False,
            "boot_images_auto_import": True,
            "upstream_dns": None,
            "release_notifications": True,
            "curtin_verbose": True,
            "enlist_commissioning": True,
            # what 30-maas-01-bmc-config's parameters are filled from (recorded)
            "maas_auto_ipmi_user": "maas",
            "maas_auto_ipmi_k_g_bmc_key": "",
            "maas_auto_ipmi_cipher_suite_id": "3",
            "maas_auto_ipmi_user_privilege_level": "ADMIN",
        }
        self._ids = itertools.count(1)
        self._device_ids = itertools.count(1)  # node devices: a table of their own in MAAS
        self._events = itertools.count(1)
        self.new_uuid = new_uuid_factory(self.rng)
        self._scheduler: Scheduler[Step] = Scheduler()
        self.scripts = Catalogue(created=self.clock.now())
        self._step_time: float | None = None
        self.node_side: Callable[[Simulator, Machine], None] | None = None
        # System ids this region must never hand out: ones a control plane's nodes still hold
        # from an earlier run of the simulator (``simulate_maas --reserve-system-ids``).
        self.reserved_system_ids: set[str] = set()

    @property
    def subnets(self) -> dict[int, Subnet]:
        return self.net.subnets

    def site_changed(self) -> None:
        """A VLAN or subnet changed: the JSON built from it (subnets, interfaces, every
        machine's) is stale."""
        self.net.changed()
        now = self.now()
        for m in self.machines.values():
            m.touch(now)

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

    def new_device_id(self) -> int:
        return next(self._device_ids)

    def node_devices(self, m: Machine) -> list[NodeDevice]:
        """MAAS's node devices of a machine (made at their first use after discovery)."""
        return make_node_devices(m, self.new_device_id)

    def new_system_id(self) -> str:
        """Six random characters no node of this region has, and none reserved."""
        alphabet = string.ascii_lowercase + string.digits
        while True:
            sid = "".join(self.rng.choice(alphabet) for _ in range(6))
            if self.node(sid) is None and sid not in self.reserved_system_ids:
                return sid

    def now(self) -> float:
        """The simulated time; while a scheduled step runs, the time it was due at."""
        return self._step_time if self._step_time is not None else self.clock.now()

    def schedule(self, m: Machine, delay: float, step: Step) -> None:
        self._scheduler.push(self.now() + delay, m.system_id, m.op_id, step)

    def tick(self) -> None:
        """Apply every scheduled machine-driven step that is due, in order.

        Each step runs at the time it was due, so the events it writes carry that time and the
        steps it schedules are timed from it (a clock jump replays a whole chain faithfully).
        """
        now = self.clock.now()
        try:
            while (item := self._scheduler.pop_due(now)) is not None:
                due, sid, op_id, step = item
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
            m.storage.allocated = new in ALLOCATED_STATUSES
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
        self.end_running_scripts(m, script_status)
        m.error_description = comment
        self.set_status(m, failed)
        self.start_op(m, "failed")

    def end_running_scripts(self, m: Machine, status: int) -> None:
        """The commissioning, testing and installation runs' unfinished results (MAAS leaves a
        release run's alone): a queryset update of the status alone, so they keep no end time
        (recorded: an aborted test's ``endtime`` is empty)."""
        now = self.now()
        for ss in m.script_sets:
            if ss.type == 3:
                continue
            for r in ss.results:
                if r.status in (0, 1):  # Pending, Running
                    r.status, r.updated = status, now
            if ss.ended is None and all(r.ended is not None for r in ss.results):
                ss.ended = now
        m.touch(now)

    def set_result(
        self,
        m: Machine,
        ss: ScriptSet,
        r: ScriptResult,
        status: int,
        *,
        output: bytes | None = None,
        exit_status: int | None = None,
    ) -> None:
        """A script result changes status, with the events MAAS's signal writes: ``Running
        test`` (a test starting), ``Script`` (``<name> on <device> failed``, ``timed out``,
        ``aborted``), else a DEBUG ``Script result`` (``… changed status from 'A' to 'B'``)."""
        old, now = r.status, self.now()
        if status in (1, SKIPPED) and r.started is None:
            r.started = now  # a skipped script starts and ends at once (recorded bmc-config)
        if status not in RUNNING_OR_PENDING and r.ended is None:
            r.ended = now
        r.status, r.updated = status, now
        if output is not None:
            r.output, r.lazy = output, None
        if status not in RUNNING_OR_PENDING:
            r.exit_status = exit_status
        if ss.type == 2 and old == 0 and status in (1, 7, 10):
            self.event(m, "INFO", "Running test", r.title)
        elif status in (3, 4, 5, 8, 11):
            self.event(m, "INFO", "Script", f"{r.title} {SCRIPT_STATUS[status].lower()}")
        elif old != status:
            self.event(
                m,
                "DEBUG",
                "Script result",
                f"{r.title} changed status from '{SCRIPT_STATUS[old]}' to "
                f"'{SCRIPT_STATUS[status]}'",
            )
        if ss.ended is None and all(x.ended is not None for x in ss.results):
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

    def timeline(
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
            self.add_interfaces(m, interfaces)
        elif mac_addresses != []:  # [] = created by BMC address only: NICs found by commissioning
            self.add_interfaces(m, self._default_nics(n, mac_addresses))
        if discovered or status not in (S.NEW, S.COMMISSIONING, S.FAILED_COMMISSIONING):
            self.discover(m)
        else:  # MAAS knows the MACs it was given, nothing of the NICs behind them: it names
            # them eth0, eth1, … until commissioning reads the names the machine's OS gives them
            for i, iface in enumerate(m.interfaces):
                m.hardware.nics[iface.mac_address].name = iface.name
                iface.name = f"eth{i}"
                iface.vendor = iface.product = iface.firmware_version = None
                iface.interface_speed = iface.link_speed = 0
        if status not in (S.NEW, S.COMMISSIONING, S.FAILED_COMMISSIONING):
            # Seeded past commissioning: it passed once; storage and networking were set up
            # after it.
            self.apply_layout(m, storage_layout or self.config["default_storage_layout"])
            self.reset_networking(m)
            self.script_set(m, 0, passed=True)
            self.testing_set(m, ["commissioning"], passed=True)  # commissioning's tests
        m.storage.allocated = status in ALLOCATED_STATUSES
        if status in OWNED_STATUSES:
            m.owner = owner or next(iter(self.users), None)
            m.agent_name = agent_name
            m.storage.acquire()  # seeded as if it had been allocated
        if status in (S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT):
            m.osystem, m.distro_series = "ubuntu", self.config["default_distro_series"]
            # the deployment's installation run (curtin's log) is the current one
            passed = {S.DEPLOYING: None, S.DEPLOYED: True}.get(status, False)
            log = b"curtin: Installation finished.\n" if passed else b"curtin: failed.\n"
            m.current_installation = self.script_set(m, 1, passed=passed, output=log).id
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
        for i, mac in enumerate(macs or [node_mac(n, 0), node_mac(n, 1)]):
            spec: dict[str, Any] = {"name": f"eno{i + 1}", "mac_address": mac}
            if i < len(subnet_ids) and i < 2:
                spec["subnet"] = subnet_ids[i]
            else:
                spec["connected"] = False
            specs.append(spec)
        return specs

    def add_interfaces(self, node: Node, specs: list[dict[str, Any]]) -> None:
        for spec in specs:
            subnet_id = spec.get("subnet")
            vlan_id = spec.get("vlan")
            if subnet_id is not None:
                if subnet_id not in self.subnets:
                    raise ValueError(f"interface {spec['name']}: unknown subnet {subnet_id}")
                vlan_id = self.subnets[subnet_id].vlan_id
            elif vlan_id is not None and vlan_id not in self.net.vlans:
                raise ValueError(f"interface {spec['name']}: unknown VLAN {vlan_id}")
            nic = nic_spec(spec)
            connected = bool(spec.get("connected", True))
            iface = Interface(
                id=self.new_id(),
                name=spec["name"],
                mac_address=spec["mac_address"].lower(),
                cable_vlan_id=vlan_id,
                cable_subnet_id=subnet_id,
                connected=connected,
                link_connected=connected,
                interface_speed=nic.rated,
                link_speed=nic.speed if connected else 0,
                numa_node=nic.numa_node,
                sriov_max_vf=nic.sriov_max_vf,
                vendor=nic.vendor,
                product=nic.product,
                firmware_version=nic.firmware_version,
            )
            node.interfaces.append(iface)
            if isinstance(node, Machine):
                node.hardware.nics[iface.mac_address] = nic

    def discover(
        self, m: Machine, *, storage: bool = True, networking: bool = True
    ) -> list[Change]:
        """What commissioning (or enlistment) tells MAAS: CPUs, memory, disks (not with
        ``skip_storage``, whose hook leaves the block devices alone), NUMA nodes,
        ``hardware_info``, the NICs' names and attributes and the VLAN each connected NIC is on
        (a new fabric for a network MAAS does not know; not with ``skip_networking``, whose
        hook leaves the interfaces alone), and the node devices (returns what changed among
        them)."""
        m.cpu_count, m.memory = m.hardware.cpu_count, m.hardware.memory
        m.bios_boot_method = m.hardware.bios_boot_method
        m.storage.uefi = m.bios_boot_method == "uefi"
        if storage:
            self._discover_disks(m)
        changes = read_hardware(m, self.new_device_id, networking=networking)
        if not networking:
            m.touch(self.now())
            return changes
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
        return changes

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
            device.id_path = spec.get("id_path") or id_path(spec)
            device.firmware_version = spec.get("firmware_version")
            device.numa_node = int(spec.get("numa_node", 0))
            device.tags = sorted(set(device.tags) | set(spec.get("tags") or []))
            amd64_bios = m.architecture.startswith("amd64") and not m.storage.uefi
            device.bios_grub = MiB if amd64_bios else 0
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
            self.add_interfaces(m, self._default_nics(self.new_id(), None))
            self.discover(m)
        # update_node_interfaces: what commissioning did not see (bonds, bridges, VLAN
        # interfaces built through the API) is deleted.
        for built in [i for i in m.interfaces if i.type != "physical"]:
            if built in m.interfaces:
                remove_interface(self.net, m.interfaces, built)
        for iface in m.interfaces:
            clear_links(self.net, iface)
        boot = m.boot_interface
        assert boot is not None
        wrong = m.faults.pxe_wrong_subnet
        booted_from = wrong if wrong in self.subnets else boot.cable_subnet_id
        if m.faults.pxe_unlinked:
            ensure_link_up(boot, self.new_id)
        elif booted_from is not None and boot.vlan_id is not None:
            boot.links = [Link(self.new_id(), "auto", booted_from)]
        elif boot.vlan_id is not None:
            on_vlan = sorted(s.id for s in self.subnets.values() if s.vlan_id == boot.vlan_id)
            mode = "auto" if on_vlan else "dhcp"
            boot.links = [Link(self.new_id(), mode, on_vlan[0] if on_vlan else None)]
        for iface in m.interfaces[1:]:
            if iface.enabled:
                ensure_link_up(iface, self.new_id)
        m.touch(self.now())

    def clear_networking(self, m: Machine) -> None:
        """``_clear_networking_configuration`` (commissioning start): every link goes."""
        for iface in m.interfaces:
            clear_links(self.net, iface)
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
                    release_ip(self.net, link)
        m.touch(self.now())

    def script_set(
        self, m: Machine, type_: int, *, passed: bool | None, output: bytes = b""
    ) -> ScriptSet:
        """A commissioning run (``commissioning_set``) or an installation: curtin's log, stored
        by name only."""
        if type_ == 0:
            return self.commissioning_set(m, passed=passed)
        now = self.now()
        names = ["/tmp/install.log"]  # noqa: S108 (the name MAAS gives the curtin log)
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

    def commissioning_set(self, m: Machine, *, passed: bool | None) -> ScriptSet:
        """A commissioning run: one result of each of MAAS 3.5's commissioning scripts, with
        its parameters as MAAS fills them from its settings; Pending, or finished (a machine
        seeded past commissioning), each output in its script's real format, made when first
        read."""
        now = self.now()
        ss = ScriptSet(id=self.new_id(), type=0, started=now)
        for script in self.scripts.of_type(COMMISSIONING):
            params = {
                name: {**param, "value": self.config[name]}
                for name, param in script.parameters.items()
                if self.config.get(name)
            }
            ss.results.append(
                ScriptResult(
                    id=self.new_id(),
                    name=script.name,
                    status=0,
                    output=b"",
                    started=None,
                    ended=None,
                    script=script,
                    parameters=params,
                    created=now,
                    updated=now,
                )
            )
        m.script_sets.append(ss)
        clean_old(m, ss)
        if passed is not None:
            self.finish_commissioning(m, passed=passed, events=False)
        return ss

    def current_commissioning(self, m: Machine) -> ScriptSet | None:
        return next((ss for ss in reversed(m.script_sets) if ss.type == 0), None)

    def run_commissioning(self, m: Machine) -> None:
        """The node starts the commissioning scripts (those not skipped)."""
        ss = self.current_commissioning(m)
        if ss is None:
            return
        for r in ss.results:
            if r.status == 0:
                self.set_result(m, ss, r, 1)

    def finish_commissioning(
        self, m: Machine, *, passed: bool, output: bytes = b"", events: bool = True
    ) -> None:
        """The commissioning scripts report: each Passed with what it printed (made when first
        read), or each Failed with ``output``; a skipped one stays Skipped."""
        ss = self.current_commissioning(m)
        if ss is None:
            return
        now = self.now()
        for r in ss.results:
            if r.status == SKIPPED:
                continue
            if events:
                self.set_result(m, ss, r, 1 if r.status == 0 else r.status)
                self.set_result(
                    m, ss, r, 2 if passed else 3, output=output, exit_status=0 if passed else 1
                )
            else:
                r.status, r.started, r.ended, r.updated = (2 if passed else 3), now, now, now
                r.exit_status = 0 if passed else 1
            if passed:
                r.lazy = self._commissioning_output(m, r.name)
        ss.ended = now

    def _commissioning_output(self, m: Machine, name: str) -> Callable[[], bytes]:
        return lambda: commissioning_output(m, name, self.node_devices(m))

    def skip_commissioning_script(self, m: Machine, name: str, output: str) -> None:
        ss = self.current_commissioning(m)
        r = next((r for r in ss.results if r.name == name), None) if ss else None
        if ss is not None and r is not None:
            self.set_result(m, ss, r, SKIPPED, output=output.encode(), exit_status=0)

    def testing_set(
        self, m: Machine, names: list[str], *, passed: bool, keep: bool = True
    ) -> ScriptSet:
        """A testing script set of the scripts ``names`` select (a script whose parameters do
        not fit the machine is left out): Pending, or already Passed (the tests of a machine
        seeded past commissioning)."""
        now = self.now()
        results = []
        if any(s.for_hardware for s in self.scripts.of_type(TESTING)):
            self.node_devices(m)  # for_hardware matches them
        for script in select(self.scripts, m, names, TESTING):
            try:
                results += new_results(m, script, {}, self.new_id, now)
            except ParameterErrors:
                continue
        if passed:
            for r in results:
                r.status, r.started, r.ended, r.exit_status = 2, now, now, 0
                r.output = f"{r.title}: PASSED\n".encode()
        ss = ScriptSet(id=self.new_id(), type=2, started=now, results=results)
        ss.ended = now if passed else None
        if results and keep:  # MAAS keeps no empty set
            m.script_sets.append(ss)
            clean_old(m, ss)
        return ss

    def regenerate_testing(self, m: Machine, ss: ScriptSet, names: list[str]) -> ScriptSet:
        """``ScriptSet.regenerate``: a testing run made before the hardware was known gets its
        results again for the disks and interfaces commissioning found (new results, the same
        run); a run the machine no longer has (a later run replaced it) is made anew."""
        if ss not in m.script_sets:
            return self.testing_set(m, names, passed=False)
        ss.results = self.testing_set(m, names, passed=False, keep=False).results
        if not ss.results:
            m.script_sets.remove(ss)
        return ss

    def scripts_from_scenario(self, specs: list[dict[str, Any]]) -> list[Script]:
        """Testing scripts uploaded as a scenario's ``scripts:`` uploads them."""
        with self.lock:
            return [self.scripts.add_testing(spec, self.now()) for spec in specs]

    def finish_script_set(self, m: Machine, type_: int, *, passed: bool, output: bytes) -> None:
        for ss in reversed(m.script_sets):
            if ss.type == type_:
                ss.ended = self.now()
                for r in ss.results:
                    r.status, r.ended, r.output = (2 if passed else 3), self.now(), output
                    r.exit_status = 0 if passed else 1
                return


def nic_spec(spec: dict[str, Any]) -> NicSpec:
    """A NIC's hardware from its scenario spec (docs/simulator.md, "Hardware")."""
    nic = NicSpec()
    for key in ("speed", "interface_speed", "numa_node", "sriov_max_vf"):
        if spec.get(key) is not None:
            setattr(nic, key, int(spec[key]))
    for key in ("vendor", "product", "firmware_version", "pci_address"):
        if spec.get(key) is not None:
            setattr(nic, key, str(spec[key]))
    return nic


def id_path(spec: dict[str, Any]) -> str:
    """``/dev/disk/by-id/…`` from the model and serial, ``/dev/<name>`` without a serial."""
    if not spec.get("serial"):
        return f"/dev/{spec['name']}"
    bus = "nvme" if str(spec["name"]).startswith("nvme") else "ata"
    model = "_".join(str(spec.get("model") or "").split())
    return f"/dev/disk/by-id/{bus}-{model}_{spec['serial']}"

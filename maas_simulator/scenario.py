"""Scenario files (YAML or JSON): users, the network (fabrics, spaces, VLANs, subnets, static
routes), domains, zones, pools, tags, boot resources, machines (with their disks, NICs and tags),
devices and faults (docs/simulator.md, "Scenario files")."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import yaml

from maas_client.status import NodeStatus
from maas_simulator.errors import ApiError
from maas_simulator.faults import MachineFaults, RequestFault
from maas_simulator.hardware import HARDWARE_INFO_KEYS, GpuSpec, HardwareInfo
from maas_simulator.interface_forms import create_bond
from maas_simulator.interfaces import Link
from maas_simulator.model import IP_HOLDING_STATUSES, Simulator, nic_spec
from maas_simulator.network import Domain, IPRange, Pool, Space, StaticRoute, Subnet, Tag, Zone
from maas_simulator.nodes import BootResource, Device, Hardware, Machine, default_disks
from maas_simulator.site_forms import ip_range_form
from maas_simulator.storage import LAYOUTS
from maas_simulator.users import SSHKey, User

DEFAULT_SUBNETS: list[dict[str, Any]] = [
    {
        "id": 1,
        "name": "pxe",
        "cidr": "10.20.0.0/16",
        "vlan_id": 5001,
        "fabric_id": 1,
        "gateway_ip": "10.20.0.1",
    },
    {
        "id": 2,
        "name": "storage",
        "cidr": "10.30.0.0/24",
        "vlan_id": 5002,
        "fabric_id": 2,
        "gateway_ip": None,
    },
]
# The default site's PXE subnet serves DHCP, so it has the dynamic range MAAS requires for it
DEFAULT_IP_RANGES: list[dict[str, Any]] = [
    {"type": "dynamic", "start_ip": "10.20.200.1", "end_ip": "10.20.200.254", "comment": "PXE"}
]
DEFAULT_BOOT_RESOURCES = [
    {"name": "ubuntu/jammy", "architecture": "amd64/ga-22.04"},
    {"name": "ubuntu/noble", "architecture": "amd64/ga-24.04"},
    {"name": "ubuntu/jammy", "architecture": "arm64/ga-22.04"},
]
MACHINE_FIELDS = {
    "hostname",
    "status",
    "power_type",
    "power_address",
    "power_parameters",
    "architecture",
    "mac_addresses",
    "interfaces",
    "faults",
    "system_id",
    "cpu_count",
    "memory",
    "disks",
    "tags",
    "zone",
    "pool",
    "owner",
    "agent_name",
    "storage_layout",
    "bonds",
    "gpus",
    "bmc_vga",
    "nvswitches",
    "numa_nodes",
    "hardware_info",
}
INTERFACE_FIELDS = {
    "name",
    "mac_address",
    "subnet",
    "vlan",
    "connected",
    "speed",
    "interface_speed",
    "vendor",
    "product",
    "firmware_version",
    "numa_node",
    "sriov_max_vf",
    "pci_address",
}
GPU_FIELDS = {"count", "vendor_id", "product_id", "vendor_name", "product_name", "numa_nodes"}
HEX4 = re.compile(r"^[0-9a-fA-F]{4}$")
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
BOND_FIELDS = {
    "name",
    "parents",
    "mac_address",
    "mtu",
    "bond_mode",
    "bond_miimon",
    "bond_downdelay",
    "bond_updelay",
    "bond_lacp_rate",
    "bond_xmit_hash_policy",
    "subnet",
}
VLAN_FIELDS = {
    "id",
    "vid",
    "name",
    "fabric_id",
    "mtu",
    "dhcp_on",
    "space",
    "description",
    "primary_rack",
    "secondary_rack",
    "relay_vlan",
}
IP_RANGE_FIELDS = {"type", "start_ip", "end_ip", "subnet", "comment", "user"}
DISK_FIELDS = {
    "name",
    "size",
    "block_size",
    "model",
    "serial",
    "id_path",
    "firmware_version",
    "tags",
    "numa_node",
}


def read_file(path: str | Path) -> dict[str, Any]:
    text = Path(path).read_text()
    data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"scenario {path} must be a mapping")
    return data


def _check_keys(spec: Any, known: set[str], what: str) -> None:
    if not isinstance(spec, dict):
        raise ValueError(f"each {what} must be a mapping, not {spec!r}")
    unknown = set(spec) - known
    if unknown:
        raise ValueError(f"unknown {what} fields: {sorted(unknown)}")


def _status(name: str) -> NodeStatus:
    try:
        return NodeStatus[str(name).upper()]
    except KeyError as exc:
        raise ValueError(f"unknown machine status {name!r}") from exc


def _disks(specs: list[dict[str, Any]], hostname: str) -> list[dict[str, Any]]:
    names = set()
    for spec in specs:
        _check_keys(spec, DISK_FIELDS, "disk")
        if "name" not in spec or "size" not in spec:
            raise ValueError(f"machine {hostname!r}: each disk needs a name and a size")
        if spec["name"] in names:
            raise ValueError(f"machine {hostname!r}: two disks named {spec['name']!r}")
        names.add(spec["name"])
        if int(spec["size"]) <= 0:
            raise ValueError(f"machine {hostname!r}: disk {spec['name']!r} has no size")
    return [dict(s) for s in specs]


def _check_nic(spec: dict[str, Any], hostname: str, numa: int) -> None:
    where = f"machine {hostname!r}: interface {spec.get('name')!r}"
    for key in ("speed", "interface_speed", "sriov_max_vf"):
        if key in spec and (not isinstance(spec[key], int) or spec[key] < 0):
            raise ValueError(f"{where}: {key} must be a whole number (Mbit/s, VFs)")
    if not 0 <= int(spec.get("numa_node", 0)) < numa:
        raise ValueError(f"{where}: numa_node must be below numa_nodes ({numa})")
    if "pci_address" in spec and not BDF.match(str(spec["pci_address"])):
        raise ValueError(f"{where}: pci_address must look like 0000:31:00.0")


def _hardware(spec: dict[str, Any], hostname: str) -> Hardware:
    """The machine's hardware: CPUs, memory, disks, GPUs, NUMA nodes, SMBIOS facts."""
    numa = spec.get("numa_nodes", 2)
    if not isinstance(numa, int) or numa < 1:
        raise ValueError(f"machine {hostname!r}: numa_nodes must be 1 or more")
    gpus = GpuSpec()
    if "gpus" in spec:
        _check_keys(spec["gpus"], GPU_FIELDS, "gpus")
        for key, value in spec["gpus"].items():
            setattr(gpus, key, value)
        if not isinstance(gpus.count, int) or gpus.count < 0:
            raise ValueError(f"machine {hostname!r}: gpus.count must be 0 or more")
        for key in ("vendor_id", "product_id"):
            if not HEX4.match(str(getattr(gpus, key))):
                raise ValueError(f"machine {hostname!r}: gpus.{key} must be 4 hex digits")
        if gpus.numa_nodes is not None and (
            len(gpus.numa_nodes) != gpus.count
            or not all(isinstance(n, int) and 0 <= n < numa for n in gpus.numa_nodes)
        ):
            raise ValueError(
                f"machine {hostname!r}: gpus.numa_nodes must give each of the {gpus.count} "
                f"GPUs a NUMA node below {numa}"
            )
    info = dict(spec.get("hardware_info") or {})
    unknown = set(info) - set(HARDWARE_INFO_KEYS)
    if unknown:
        raise ValueError(f"machine {hostname!r}: unknown hardware_info keys {sorted(unknown)}")
    nvswitches = spec.get("nvswitches")
    if nvswitches is not None and (not isinstance(nvswitches, int) or nvswitches < 0):
        raise ValueError(f"machine {hostname!r}: nvswitches must be 0 or more")
    for disk in spec.get("disks") or []:
        if not 0 <= int(disk.get("numa_node", 0)) < numa:
            raise ValueError(f"machine {hostname!r}: disk numa_node must be below {numa}")
    return Hardware(
        cpu_count=int(spec.get("cpu_count", 128)),
        memory=int(spec.get("memory", 2 * 1024 * 1024)),
        disks=_disks(spec["disks"], hostname) if "disks" in spec else None,
        gpus=gpus,
        bmc_vga=bool(spec.get("bmc_vga", True)),
        nvswitches=nvswitches,
        numa_nodes=numa,
        info=HardwareInfo({k: str(v) for k, v in info.items()}),
        bios_boot_method=spec.get("bios_boot_method", "uefi"),
    )


def add_machines(sim: Simulator, specs: list[dict[str, Any]]) -> list[str]:
    """Add machines from scenario entries; returns their system ids."""
    added = []
    taken = {m.hostname for m in sim.machines.values()}
    for spec in specs:
        _check_keys(spec, MACHINE_FIELDS, "machine")
        spec = dict(spec)
        hostname = spec.get("hostname")
        if hostname and not sim.allow_duplicate_hostnames and hostname in taken:
            raise ValueError(
                f"duplicate hostname {hostname!r} (set config.allow_duplicate_hostnames)"
            )
        numa = int(spec.get("numa_nodes", 2))
        for iface in spec.get("interfaces") or []:
            _check_keys(iface, INTERFACE_FIELDS, "interface")
            _check_nic(iface, str(hostname), numa)
        tags = set(spec.get("tags") or [])
        unknown_tags = tags - set(sim.net.tags)
        if unknown_tags:
            raise ValueError(f"machine {hostname!r}: unknown tags {sorted(unknown_tags)}")
        zone, pool = spec.get("zone", "default"), spec.get("pool", "default")
        if sim.net.zone_named(zone) is None:
            raise ValueError(f"machine {hostname!r}: unknown zone {zone!r}")
        if sim.net.pool_named(pool) is None:
            raise ValueError(f"machine {hostname!r}: unknown pool {pool!r}")
        owner = spec.get("owner")
        if owner is not None and owner not in sim.users:
            raise ValueError(f"machine {hostname!r}: unknown owner {owner!r}")
        layout = spec.get("storage_layout")
        if layout is not None and layout not in ("flat", "lvm", "blank"):
            raise ValueError(
                f"machine {hostname!r}: storage_layout must be flat, lvm or blank "
                f"(the simulated ones of {sorted(LAYOUTS)})"
            )
        power = dict(spec.get("power_parameters") or {})
        if "power_address" in spec:
            power.setdefault("power_address", spec["power_address"])
            power.setdefault("power_driver", "LAN_2_0")
        hardware = _hardware(spec, str(hostname))
        faults = MachineFaults.from_dict(spec.get("faults") or {})
        names = [i["name"] for i in spec.get("interfaces") or []] or [
            f"eno{n + 1}" for n in range(len(spec.get("mac_addresses") or [1, 2]))
        ]
        unknown_nics = set(faults.nic_slow) - set(names)
        if unknown_nics:
            raise ValueError(f"machine {hostname!r}: nic_slow names no NIC {sorted(unknown_nics)}")
        m = sim.add_machine(
            hostname=hostname,
            status=_status(spec.get("status", "new")),
            power_type=spec.get("power_type", "ipmi"),
            power_parameters=power,
            mac_addresses=spec.get("mac_addresses"),
            interfaces=spec.get("interfaces"),
            architecture=spec.get("architecture", "amd64/generic"),
            faults=faults,
            system_id=spec.get("system_id"),
            hardware=hardware,
            tags=tags,
            zone=zone,
            pool=pool,
            owner=owner,
            agent_name=str(spec.get("agent_name", "")),
            storage_layout=layout,
        )
        for bond in spec.get("bonds") or []:
            _add_bond(sim, m, bond)
        taken.add(m.hostname)
        added.append(m.system_id)
    return added


HARDWARE_FIELDS = {
    "bios_boot_method",
    "cpu_count",
    "memory",
    "numa_nodes",
    "gpus",
    "bmc_vga",
    "nvswitches",
    "hardware_info",
    "disks",
    "interfaces",
}


def set_hardware(sim: Simulator, m: Machine, spec: dict[str, Any]) -> None:
    """What the box behind a machine really has (the scenario's hardware keys; ``interfaces``
    give NIC hardware by ``mac_address``, ``name`` included: the name its OS reports). MAAS
    learns it at the next commissioning, as it learns a real box's (the control endpoint's
    ``machines/{sid}/hardware``; the corpus replay plays the recorded node's facts with it)."""
    _check_keys(spec, HARDWARE_FIELDS, "hardware")
    numa = int(spec.get("numa_nodes", m.hardware.numa_nodes))
    nics = dict(m.hardware.nics)
    by_mac = {i.mac_address: i for i in m.interfaces if i.type == "physical"}
    for iface in spec.get("interfaces") or []:
        _check_keys(iface, INTERFACE_FIELDS, "interface")
        mac = str(iface.get("mac_address", "")).lower()
        if mac not in by_mac:
            raise ValueError(f"machine {m.hostname!r} has no NIC {mac!r}")
        _check_nic({**iface, "name": iface.get("name", by_mac[mac].name)}, m.hostname, numa)
        nics[mac] = nic_spec(iface)
        nics[mac].name = iface.get("name")
    hardware = _hardware({k: v for k, v in spec.items() if k != "interfaces"}, m.hostname)
    hardware.nics = nics
    if hardware.disks is None:
        hardware.disks = m.hardware.disks or default_disks(sim.order.index(m.system_id) + 1)
    m.hardware = hardware


def _add_bond(sim: Simulator, m: Machine, spec: dict[str, Any]) -> None:
    """A bond built as ``op=create_bond`` builds it (MAAS's rules apply); ``subnet`` gives it
    the AUTO link the boot NIC had (with its address when the machine holds its addresses)."""
    _check_keys(spec, BOND_FIELDS, "bond")
    by_name = {i.name: i for i in m.interfaces}
    unknown = [p for p in spec.get("parents") or [] if p not in by_name]
    if unknown:
        raise ValueError(f"machine {m.hostname!r}: bond {spec.get('name')!r}: no NIC {unknown}")
    data = {k: str(v) for k, v in spec.items() if k not in ("parents", "subnet")}
    refs = [str(by_name[p].id) for p in spec.get("parents") or []]
    try:
        bond = create_bond(sim, m, data, refs)
    except ApiError as exc:
        raise ValueError(f"machine {m.hostname!r}: bond {spec.get('name')!r}: {exc.body}") from exc
    subnet = spec.get("subnet")
    if subnet is not None:
        if subnet not in sim.subnets or sim.subnets[subnet].vlan_id != bond.vlan_id:
            raise ValueError(
                f"machine {m.hostname!r}: bond {bond.name!r}: subnet {subnet} is not on its VLAN"
            )
        bond.links = [Link(sim.new_id(), "auto", subnet)]
        if m.status in IP_HOLDING_STATUSES:
            sim.claim_auto_ips(m)


def generate(
    sim: Simulator,
    *,
    count: int,
    status: str = "ready",
    prefix: str = "gen",
    ipmi_network: str = "10.200.0.0/16",
) -> None:
    hosts = ipaddress.ip_network(ipmi_network).hosts()
    add_machines(
        sim,
        [
            {"hostname": f"{prefix}{i:05d}", "status": status, "power_address": str(next(hosts))}
            for i in range(count)
        ],
    )


def load_network(sim: Simulator, data: dict[str, Any]) -> None:
    """Spaces, fabrics, VLANs, subnets and routes. A subnet may name a ``vlan_id`` that is not
    listed under ``vlans``: an untagged VLAN of that id is created on ``fabric_id`` (a new
    fabric if that is not listed either), as the short form of earlier scenarios."""
    net = sim.net
    for spec in data.get("spaces") or []:
        _check_keys(spec, {"id", "name", "description"}, "space")
        net.spaces[int(spec["id"])] = Space(
            int(spec["id"]), spec["name"], spec.get("description", "")
        )
    for spec in data.get("fabrics") or []:
        _check_keys(spec, {"id", "name", "class_type", "description"}, "fabric")
        net.add_fabric(**spec)
    for spec in data.get("vlans") or []:
        _check_keys(spec, VLAN_FIELDS, "VLAN")
        if not 0 <= int(spec.get("vid", 0)) <= 4094:
            raise ValueError(f"VLAN {spec.get('id')}: vid must be 0-4094")
        for rack in ("primary_rack", "secondary_rack"):
            if spec.get(rack) not in (None, sim.rack.system_id):
                raise ValueError(f"VLAN {spec.get('id')}: {rack} must be {sim.rack.system_id!r}")
        net.add_vlan(**spec)
    for vlan in net.vlans.values():
        if vlan.relay_vlan is not None and (
            vlan.relay_vlan not in net.vlans or vlan.relay_vlan == vlan.id or vlan.dhcp_on
        ):
            raise ValueError(
                f"VLAN {vlan.id}: relay_vlan must be another VLAN, and DHCP off on this one"
            )
    subnet_specs: list[dict[str, Any]] = data.get("subnets") or DEFAULT_SUBNETS
    for spec in subnet_specs:
        _check_keys(
            spec,
            {
                "id",
                "name",
                "cidr",
                "vlan_id",
                "fabric_id",
                "gateway_ip",
                "dns_servers",
                "managed",
                "description",
            },
            "subnet",
        )
        spec = dict(spec)
        fabric_id = spec.pop("fabric_id", None)
        vlan_id = spec.get("vlan_id")
        if vlan_id is None:
            raise ValueError(f"subnet {spec.get('cidr')}: vlan_id is required")
        if vlan_id not in net.vlans:
            fabric_id = fabric_id if fabric_id is not None else max([0, *net.fabrics]) + 1
            if fabric_id not in net.fabrics:
                net.add_fabric(fabric_id)
            net.add_vlan(vlan_id, fabric_id=fabric_id)
        elif fabric_id is not None and net.vlans[vlan_id].fabric_id != fabric_id:
            raise ValueError(
                f"subnet {spec.get('cidr')}: VLAN {vlan_id} is not on fabric {fabric_id}"
            )
        net.add_subnet(Subnet(**spec))
    for i, spec in enumerate(data.get("static_routes") or [], start=1):
        _check_keys(spec, {"id", "source", "destination", "gateway_ip", "metric"}, "static route")
        route = StaticRoute(
            int(spec.get("id", i)),
            int(spec["source"]),
            int(spec["destination"]),
            str(spec["gateway_ip"]),
            int(spec.get("metric", 0)),
        )
        for end in (route.source, route.destination):
            if end not in net.subnets:
                raise ValueError(f"static route {route.id}: unknown subnet {end}")
        if not net.subnets[route.source].contains(route.gateway_ip):
            raise ValueError(
                f"static route {route.id}: gateway {route.gateway_ip} is not on its source subnet"
            )
        net.add_route(route)
    declared_dhcp = {
        int(spec["id"]) for spec in data.get("vlans") or [] if spec.get("dhcp_on") is True
    }
    ranges = data.get("ip_ranges")
    if ranges is None and not data.get("subnets"):
        ranges = DEFAULT_IP_RANGES
    for spec in ranges or []:
        _check_keys(spec, IP_RANGE_FIELDS, "IP range")
        if spec.get("user") is not None and spec["user"] not in sim.users:
            raise ValueError(f"IP range {spec.get('start_ip')}: unknown user {spec['user']!r}")
        fields = {k: str(v) for k, v in spec.items() if k != "user"}
        try:
            new = ip_range_form(sim, fields, None, spec.get("user"))
        except ApiError as exc:
            raise ValueError(f"IP range {spec.get('start_ip')}: {exc.body}") from exc
        net.add_range(IPRange(max([0, *net.ranges]) + 1, **new))
    # MAAS serves DHCP on a VLAN only with a dynamic range on one of its subnets (VLANForm's
    # clean_dhcp_on): a VLAN declared with DHCP and no range is refused; by default it has none
    for vlan in net.vlans.values():
        dynamic = any(
            r.type == "dynamic" and net.subnets[r.subnet_id].vlan_id == vlan.id
            for r in net.ranges.values()
            if r.subnet_id in net.subnets
        )
        if vlan.dhcp_on and not dynamic:
            if vlan.id in declared_dhcp:
                raise ValueError(
                    f"VLAN {vlan.id}: dhcp can only be turned on when a dynamic IP range is "
                    "defined (add a dynamic ip_range on one of its subnets)"
                )
            vlan.dhcp_on = False
    for i, spec in enumerate(data.get("domains") or [], start=1):
        _check_keys(spec, {"name", "ttl", "authoritative"}, "domain")
        net.domains[i] = Domain(
            i, spec["name"], spec.get("ttl"), bool(spec.get("authoritative", True))
        )
    for i, spec in enumerate(data.get("zones") or [], start=2):
        _check_keys(spec, {"name", "description"}, "zone")
        net.zones[i] = Zone(i, spec["name"], spec.get("description", ""))
    for i, spec in enumerate(data.get("pools") or [], start=1):
        _check_keys(spec, {"name", "description"}, "pool")
        net.pools[i] = Pool(i, spec["name"], spec.get("description", ""))
    for spec in data.get("tags") or []:
        _check_keys(spec, {"name", "comment", "definition", "kernel_opts"}, "tag")
        net.tags[spec["name"]] = Tag(**spec)
    setup_rack(sim)


def setup_rack(sim: Simulator) -> None:
    """The rack controller: one NIC per VLAN that has subnets, with a static address on each
    (none on a region without one: no VLAN has a primary rack then)."""
    rack = sim.rack
    rack.interfaces = []
    if not sim.rack_controller:
        for vlan in sim.net.vlans.values():
            vlan.primary_rack = vlan.secondary_rack = None
        return
    for n, vlan in enumerate(sorted(sim.net.vlans.values(), key=lambda v: v.id)):
        subnets = [s for s in sim.subnets.values() if s.vlan_id == vlan.id]
        if not subnets:
            continue
        sim.add_interfaces(
            rack,
            [{"name": f"eth{n}", "mac_address": f"52:54:00:ff:00:{n:02x}", "vlan": vlan.id}],
        )
        iface = rack.interfaces[-1]
        iface.vlan_id = vlan.id
        iface.vendor, iface.product, iface.firmware_version = "Intel Corporation", "I350", None
        for s in subnets:
            iface.links.append(Link(sim.new_id(), "static", s.id, s.allocate()))


def add_devices(sim: Simulator, specs: list[dict[str, Any]]) -> None:
    for spec in specs:
        _check_keys(
            spec,
            {"hostname", "mac_addresses", "ip_address", "subnet", "tags", "system_id", "owner"},
            "device",
        )
        sid = spec.get("system_id") or sim.new_system_id()
        device = Device(
            sid, spec["hostname"], owner=spec.get("owner"), tags=set(spec.get("tags") or [])
        )
        subnet_id = spec.get("subnet")
        if subnet_id is not None and subnet_id not in sim.subnets:
            raise ValueError(f"device {spec['hostname']!r}: unknown subnet {subnet_id}")
        sim.add_interfaces(
            device,
            [
                {
                    "name": f"eth{i}",
                    "mac_address": mac,
                    **({"subnet": subnet_id} if subnet_id and i == 0 else {}),
                }
                for i, mac in enumerate(spec.get("mac_addresses") or [])
            ],
        )
        for iface in device.interfaces:
            iface.vlan_id = iface.cable_vlan_id
            iface.vendor = iface.product = iface.firmware_version = None
        if subnet_id is not None and device.interfaces:
            subnet = sim.subnets[subnet_id]
            ip = spec.get("ip_address")
            if ip is not None and (not subnet.contains(ip) or subnet.is_taken(ip)):
                raise ValueError(f"device {spec['hostname']!r}: {ip} is not free on {subnet.cidr}")
            if ip is not None:
                subnet.take(ip)
            device.interfaces[0].links = [
                Link(sim.new_id(), "static", subnet_id, ip or subnet.allocate())
            ]
        sim.devices[sid] = device


def load(sim: Simulator, data: dict[str, Any], *, api_key: str | None = None) -> list[RequestFault]:
    """Populate ``sim`` from scenario data; returns the request faults it names."""
    known = {
        "users",
        "fabrics",
        "spaces",
        "vlans",
        "subnets",
        "static_routes",
        "ip_ranges",
        "domains",
        "zones",
        "pools",
        "tags",
        "boot_resources",
        "machines",
        "devices",
        "generate",
        "request_faults",
        "config",
        "scripts",
        "rack_controller",
    }
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown scenario keys: {sorted(unknown)}")
    users = data.get("users") or []
    if api_key:
        users = [{"username": "admin", "is_superuser": True, "api_key": api_key}, *users]
    for u in users:
        _check_keys(u, {"username", "is_superuser", "api_key", "email", "ssh_keys"}, "user")
        parts = str(u["api_key"]).split(":")
        if len(parts) != 3:
            raise ValueError(f"api_key of {u['username']!r} must be consumer:token:secret")
        ck, tk, ts = parts
        sim.users[u["username"]] = User(
            u["username"], bool(u.get("is_superuser")), ck, tk, ts, email=u.get("email", "")
        )
        for key in u.get("ssh_keys") or []:
            n = len(sim.ssh_keys) + 1
            sim.ssh_keys[n] = SSHKey(n, u["username"], str(key))
    rack = data.get("rack_controller", True)
    if not isinstance(rack, bool):
        raise ValueError("rack_controller must be true or false")
    sim.rack_controller = rack
    load_network(sim, data)
    for i, b in enumerate(data.get("boot_resources") or DEFAULT_BOOT_RESOURCES, start=1):
        _check_keys(b, {"name", "architecture", "type"}, "boot resource")
        sim.boot_resources.append(BootResource(id=i, **b))
    config = dict(data.get("config") or {})
    sim.allow_duplicate_hostnames = bool(config.pop("allow_duplicate_hostnames", False))
    _check_keys(config, set(sim.config), "config")
    if config.get("default_storage_layout", "flat") not in ("flat", "lvm", "blank"):
        raise ValueError("config.default_storage_layout must be flat, lvm or blank")
    sim.config.update(config)
    for spec in data.get("scripts") or []:
        _check_keys(spec, set(spec) if isinstance(spec, dict) else set(), "script")
        sim.scripts_from_scenario([spec])
    add_machines(sim, data.get("machines") or [])
    add_devices(sim, data.get("devices") or [])
    if data.get("generate"):
        _check_keys(data["generate"], {"count", "status", "prefix", "ipmi_network"}, "generate")
        generate(sim, **data["generate"])
    return [RequestFault.from_dict(f) for f in data.get("request_faults") or []]

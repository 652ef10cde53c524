"""Node filters: ``GET machines/`` (MAAS's ``ReadNodesForm``) and ``POST machines/?op=allocate``
(``AcquireNodeForm``), with MAAS 3.5's field names, error texts and the ``describe_constraints``
text of the allocation 409 (``node_constraint_filter_forms.py``).

Every filter is applied in Python over the simulator's machines; the form errors are collected
per field as MAAS's form does and answered with a 400 JSON body.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from maas_client.status import NodeStatus
from maas_simulator.errors import invalid
from maas_simulator.interfaces import Interface
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine

S = NodeStatus
IGNORED_FIELDS = {
    "comment",
    "bridge_all",
    "bridge_type",
    "bridge_stp",
    "bridge_fd",
    "dry_run",
    "verbose",
    "op",
    "agent_name",
}
# FilterNodeForm's fields: those MAAS shows as lists in describe_constraints, and the others.
MULTI_FIELDS = {
    "arch",
    "not_arch",
    "tags",
    "not_tags",
    "fabrics",
    "not_fabrics",
    "fabric_classes",
    "not_fabric_classes",
    "subnets",
    "not_subnets",
    "link_speed",
    "vlans",
    "not_vlans",
    "zone",
    "not_in_zone",
    "system_id",
    "pool",
    "not_in_pool",
    "cpu_count",
    "cpu_speed",
    "mem",
    "pod",
    "not_pod",
    "pod_type",
    "not_pod_type",
    "owner",
    "not_owner",
    "power_state",
    "not_power_state",
    "deployment_target",
    "not_deployment_target",
}
SINGLE_FIELDS = {"storage", "interfaces", "devices"}
READ_FIELDS = {
    "id",
    "not_id",
    "hostname",
    "not_hostname",
    "mac_address",
    "domain",
    "not_domain",
    "agent_name",
    "not_agent_name",
    "status",
    "not_status",
    "simple_status",
    "not_simple_status",
}
ACQUIRE_FIELDS = {"name"}
NUMBER_ERRORS = {
    "cpu_count": "Invalid CPU count: number required.",
    "cpu_speed": "Invalid CPU speed: number required.",
    "mem": "Invalid memory: number of MiB required.",
    "link_speed": "Invalid link speed: number required.",
}
SIMPLE_STATUS = {
    "allocated": {S.ALLOCATED},
    "broken": {S.BROKEN},
    "commissioning": {S.COMMISSIONING},
    "deployed": {S.DEPLOYED},
    "deploying": {S.DEPLOYING},
    "failed": {
        S.FAILED_COMMISSIONING,
        S.FAILED_DEPLOYMENT,
        S.FAILED_DISK_ERASING,
        S.FAILED_ENTERING_RESCUE_MODE,
        S.FAILED_EXITING_RESCUE_MODE,
        S.FAILED_RELEASING,
        S.FAILED_TESTING,
    },
    "new": {S.NEW},
    "ready": {S.READY},
    "releasing": {S.DISK_ERASING, S.RELEASING},
    "rescue_mode": {S.ENTERING_RESCUE_MODE, S.EXITING_RESCUE_MODE, S.RESCUE_MODE},
    "testing": {S.TESTING},
}
SIMPLE_STATUS["other"] = set(S) - set().union(*SIMPLE_STATUS.values())
POWER_STATES = ("on", "off", "unknown", "error")
STORAGE_GROUP = re.compile(
    r"(?:(?P<label>[a-zA-Z0-9]+)\:)?(?P<size>[0-9.]+)(?:\((?P<tags>[^)]+)\))?"
)
LABEL = re.compile(r"[a-zA-Z0-9]+[a-zA-Z0-9_-]*$")
INTERFACE_KEYS = {
    "id",
    "not_id",
    "fabric",
    "not_fabric",
    "fabric_class",
    "not_fabric_class",
    "ip",
    "not_ip",
    "mode",
    "name",
    "not_name",
    "hostname",
    "not_hostname",
    "subnet",
    "not_subnet",
    "space",
    "not_space",
    "subnet_cidr",
    "not_subnet_cidr",
    "type",
    "vlan",
    "not_vlan",
    "vid",
    "not_vid",
    "tag",
    "not_tag",
    "link_speed",
}
DEVICE_KEYS = {"vendor_id", "product_id", "vendor_name", "product_name", "commissioning_driver"}


def choice_error(value: str) -> str:
    return f"Select a valid choice. {value} is not one of the available choices."


@dataclass
class Filter:
    """A cleaned filter form: ``cleaned`` holds what describe_constraints shows."""

    sim: Simulator
    data: dict[str, list[str]]
    acquire: bool
    cleaned: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    storage: list[tuple[str, int, list[str] | None]] | None = None
    interfaces: dict[str, dict[str, list[str]]] | None = None
    _tests: list[tuple[Callable[[Machine, Any], bool], Any]] | None = None

    # -- cleaning ---------------------------------------------------------------------------
    def clean(self) -> Filter:
        fields = MULTI_FIELDS | SINGLE_FIELDS | (ACQUIRE_FIELDS if self.acquire else READ_FIELDS)
        for name in self.data:
            if name not in fields and name not in IGNORED_FIELDS:
                self.error(name, "No such constraint.")
        for name in sorted(fields & set(self.data)):
            values = [v for v in self.data[name]]
            cleaner = getattr(self, f"_clean_{name}", None)
            if cleaner is not None:
                cleaned = cleaner(name, values)
            elif name in NUMBER_ERRORS:
                cleaned = self._numbers(name, values)
            elif name in SINGLE_FIELDS:
                cleaned = values[-1] if values else None
            else:
                cleaned = [v for v in values]
            if name not in self.errors:
                self.cleaned[name] = cleaned
        if self.errors:
            raise invalid(self.errors)
        return self

    def error(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    def _numbers(self, name: str, values: list[str]) -> list[float] | None:
        try:
            return [float(v) for v in values]
        except ValueError:
            self.error(name, NUMBER_ERRORS[name])
            return None

    def _clean_arch(self, name: str, values: list[str]) -> list[str] | None:
        usable = usable_architectures(self.sim)
        arches: list[str] = []
        for value in values:
            if value in usable:
                arches.append(value)
            elif value in {a.split("/")[0] for a in usable}:
                arches.extend(sorted(a for a in usable if a.split("/")[0] == value))
            else:
                self.error(name, "Architecture not recognised.")
                return None
        return arches

    _clean_not_arch = _clean_arch

    def _clean_tags(self, name: str, values: list[str]) -> list[str] | None:
        names = {t for v in values for t in re.findall(r"[^\s,]+", v)}
        if not names:
            return None
        unknown = sorted(names - set(self.sim.net.tags))
        if unknown:
            self.error(name, "No such tag(s): {}.".format(", ".join(f"'{t}'" for t in unknown)))
            return None
        return sorted(names)

    def _named(self, what: str, known: set[str], name: str, values: list[str]) -> list[str]:
        missing = sorted(set(values) - known)
        if missing:
            self.error(name, f"No such {what}(s): {', '.join(missing)}.")
        return values

    def _clean_zone(self, name: str, values: list[str]) -> list[str]:
        return self._named("zone", {z.name for z in self.sim.net.zones.values()}, name, values)

    _clean_not_in_zone = _clean_zone

    def _clean_pool(self, name: str, values: list[str]) -> list[str]:
        return self._named("pool", {p.name for p in self.sim.net.pools.values()}, name, values)

    _clean_not_in_pool = _clean_pool

    def _clean_subnets(self, name: str, values: list[str]) -> list[int] | None:
        found = {s.id for v in values for s in self.sim.net.subnets_by_specifier(v)}
        if values and not found:
            self.error(name, "No matching subnets found.")
        return sorted(found)

    _clean_not_subnets = _clean_subnets

    def _clean_vlans(self, name: str, values: list[str]) -> list[int] | None:
        found = {v.id for spec in values for v in vlans_by_specifier(self.sim, spec)}
        if values and not found:
            self.error(name, "No matching VLANs found.")
        return sorted(found)

    _clean_not_vlans = _clean_vlans

    def _clean_owner(self, name: str, values: list[str]) -> list[str]:
        missing = sorted(set(values) - set(self.sim.users))
        if missing:
            self.error(name, f"No such owner: '{missing[0]}'.")
        return values

    _clean_not_owner = _clean_owner

    def _choices(self, name: str, values: list[str], choices: Iterable[str]) -> list[str]:
        cleaned = [v.removeprefix("=") for v in values]
        allowed = set(choices)
        for v in cleaned:
            if v not in allowed:
                self.error(name, choice_error(v))
        return cleaned

    def _clean_power_state(self, name: str, values: list[str]) -> list[str]:
        return self._choices(name, values, POWER_STATES)

    _clean_not_power_state = _clean_power_state

    def _clean_status(self, name: str, values: list[str]) -> list[str]:
        return self._choices(name, values, (s.name.lower() for s in S))

    _clean_not_status = _clean_status

    def _clean_simple_status(self, name: str, values: list[str]) -> list[str]:
        return self._choices(name, values, SIMPLE_STATUS)

    _clean_not_simple_status = _clean_simple_status

    def _clean_deployment_target(self, name: str, values: list[str]) -> list[bool]:
        return [v == "memory" for v in self._choices(name, values, ("memory", "disk"))]

    _clean_not_deployment_target = _clean_deployment_target

    def _clean_mac_address(self, name: str, values: list[str]) -> list[str]:
        mac = re.compile(
            r"^([0-9a-fA-F]{1,2}:){5}[0-9a-fA-F]{1,2}$|^([0-9a-fA-F]{1,2}-){5}[0-9a-fA-F]{1,2}$"
        )
        for v in values:
            if not mac.match(v):
                self.error(name, f"'{v}' is not a valid MAC address.")
        # valid in either form, but matched as written: the dashed form finds nothing
        # (recorded against MAAS 3.5.10, listings.jsonl step 40)
        return list(values)

    def _clean_storage(self, name: str, values: list[str]) -> str | None:
        value = values[-1] if values else ""
        if not value:
            return None
        groups = [m.groupdict() for m in STORAGE_GROUP.finditer(value)]
        rendered = ",".join(
            (f"{g['label']}:" if g["label"] else "")
            + g["size"]
            + (f"({g['tags']})" if g["tags"] else "")
            for g in groups
        )
        if not groups or rendered != value:
            self.error(name, f'Malformed storage constraint, "{value}".')
            return None
        try:
            parsed = [
                (
                    g["label"] or "",
                    int(float(g["size"]) * 1000**3),
                    g["tags"].split(",") if g["tags"] else None,
                )
                for g in groups
            ]
        except ValueError:
            self.error(name, f'Malformed storage constraint, "{value}".')
            return None
        head, tail = parsed[:1], parsed[1:]
        tail.sort(key=lambda c: 0 if c[2] is None else len(c[2]), reverse=True)
        self.storage = head + tail
        return value

    def _clean_interfaces(self, name: str, values: list[str]) -> str | None:
        value = values[-1] if values else ""
        if len(value.strip()) == 0:
            return None
        try:
            self.interfaces = parse_label_map(value)
        except ValueError as exc:
            self.error(name, str(exc))
            return None
        for constraints in self.interfaces.values():
            for key in constraints:
                if key not in INTERFACE_KEYS:
                    self.error(name, f"Unknown interfaces constraint: '{key}")
                    return None
        return value

    def _clean_devices(self, name: str, values: list[str]) -> str | None:
        value = values[-1] if values else ""
        if not value:
            return None
        for item in value.split(","):
            key = item.split("=", 1)[0]
            if key not in DEVICE_KEYS or "=" not in item:
                self.error(name, f"Unknown devices constraint: '{key}")
                return None
        return value

    # -- describing -------------------------------------------------------------------------
    def describe(self) -> str:
        """``describe_constraints``: ``name=value`` for each set field, sorted by name."""
        parts = []
        for name in sorted(self.cleaned):
            value = self.cleaned[name]
            if value is None or value == "" or value == []:
                continue
            if name in SINGLE_FIELDS:
                parts.append(f"{name}={value}")
            else:
                parts.append(f"{name}={','.join(str(v) for v in value)}")
        return " ".join(parts)

    # -- matching ---------------------------------------------------------------------------
    def matches(self, m: Machine) -> bool:
        if self._tests is None:
            tests = self._tests_by_name()
            self._tests = [
                (tests[name], value)
                for name, value in self.cleaned.items()
                if value not in (None, "", []) and name in tests
            ]
        return all(test(m, value) for test, value in self._tests)

    def _tests_by_name(self) -> dict[str, Callable[[Machine, Any], bool]]:
        sim = self.sim

        def fabrics(m: Machine) -> set[str]:
            return {
                sim.net.fabrics[sim.net.vlans[i.vlan_id].fabric_id].name
                for i in m.interfaces
                if i.vlan_id is not None
            }

        def fabric_classes(m: Machine) -> set[str | None]:
            return {
                sim.net.fabrics[sim.net.vlans[i.vlan_id].fabric_id].class_type
                for i in m.interfaces
                if i.vlan_id is not None
            }

        def linked(m: Machine) -> set[int]:
            return {lk.subnet_id for i in m.interfaces for lk in i.links if lk.subnet_id}

        def macs(m: Machine) -> set[str]:
            return {i.mac_address for i in m.interfaces}

        tests: dict[str, Callable[[Machine, Any], bool]] = {
            "arch": lambda m, v: m.architecture in v,
            "not_arch": lambda m, v: m.architecture not in v,
            "tags": lambda m, v: set(v) <= m.tags,
            "not_tags": lambda m, v: not set(v) & m.tags,
            "fabrics": lambda m, v: bool(fabrics(m) & set(v)),
            "not_fabrics": lambda m, v: not fabrics(m) & set(v),
            "fabric_classes": lambda m, v: bool(fabric_classes(m) & set(v)),
            "not_fabric_classes": lambda m, v: not fabric_classes(m) & set(v),
            "subnets": lambda m, v: set(v) <= linked(m),
            "not_subnets": lambda m, v: not linked(m) & set(v),
            "vlans": lambda m, v: bool({i.vlan_id for i in m.interfaces} & set(v)),
            "not_vlans": lambda m, v: not {i.vlan_id for i in m.interfaces} & set(v),
            "link_speed": lambda m, v: any(i.link_speed >= min(v) for i in m.interfaces),
            "zone": lambda m, v: m.zone in v,
            "not_in_zone": lambda m, v: m.zone not in v,
            "pool": lambda m, v: m.pool in v,
            "not_in_pool": lambda m, v: m.pool not in v,
            "system_id": lambda m, v: m.system_id in v,
            "cpu_count": lambda m, v: m.cpu_count >= min(v),
            "cpu_speed": lambda m, v: min(v) <= 2400,
            "mem": lambda m, v: m.memory >= min(v),
            "pod": lambda m, v: False,  # no machine is in a pod (VM hosts are not simulated)
            "pod_type": lambda m, v: False,
            "owner": lambda m, v: m.owner in v,
            "not_owner": lambda m, v: m.owner not in v,
            "power_state": lambda m, v: m.power_state in v,
            "not_power_state": lambda m, v: m.power_state not in v,
            "deployment_target": lambda m, v: False in v,
            "not_deployment_target": lambda m, v: False not in v,
            "name": lambda m, v: any(_name_matches(m, n) for n in v),
            "id": lambda m, v: m.system_id in v,
            "not_id": lambda m, v: m.system_id not in v,
            "hostname": lambda m, v: m.hostname in v,
            "not_hostname": lambda m, v: m.hostname not in v,
            "mac_address": lambda m, v: bool(macs(m) & set(v)),
            "domain": lambda m, v: "maas" in v,
            "not_domain": lambda m, v: "maas" not in v,
            "agent_name": lambda m, v: m.agent_name in v,
            "not_agent_name": lambda m, v: m.agent_name not in v,
            "status": lambda m, v: m.status.name.lower() in v,
            "not_status": lambda m, v: m.status.name.lower() not in v,
            "simple_status": lambda m, v: any(m.status in SIMPLE_STATUS[s] for s in v),
            "not_simple_status": lambda m, v: not any(m.status in SIMPLE_STATUS[s] for s in v),
            "storage": lambda m, v: self.storage_match(m) is not None,
            "interfaces": lambda m, v: self.interface_match(m) is not None,
            "devices": lambda m, v: False,  # no PCI/USB devices are simulated
        }
        return tests

    def storage_match(self, m: Machine) -> dict[Any, str] | None:
        """``nodes_by_storage`` for one machine: device key -> constraint label, or None."""
        if self.storage is None:
            return {}
        matched: dict[Any, str] = {}
        storage = m.storage
        for position, (label, size, tags) in enumerate(self.storage):
            found: Any = None
            if position == 0:
                # The root device: the one holding "/", directly or in one of its partitions.
                for d in storage.devices:
                    parts = d.partitions or []
                    root_part = next(
                        (p for p in parts if p.filesystem and p.filesystem.mount_point == "/"),
                        None,
                    )
                    on_device = d.filesystem is not None and d.filesystem.mount_point == "/"
                    if tags and "partition" in tags:
                        wanted = [t for t in tags if t != "partition"]
                        if (
                            root_part
                            and root_part.size >= size
                            and set(wanted) <= set(root_part.tags)
                        ):
                            found = f"partition:{root_part.id}"
                    elif (
                        (on_device or root_part)
                        and d.size >= size
                        and set(tags or []) <= set(d.tags)
                    ):
                        found = d.id
                    if found is not None:
                        break
            elif tags and "partition" in tags:
                wanted = [t for t in tags if t != "partition"]
                free = sorted(
                    (
                        p
                        for d in storage.devices
                        for p in d.partitions or []
                        if p.filesystem is None
                        and p.size >= size
                        and set(wanted) <= set(p.tags)
                        and f"partition:{p.id}" not in matched
                    ),
                    key=lambda p: p.size,
                )
                found = f"partition:{free[0].id}" if free else None
            else:
                free_devices = sorted(
                    (
                        d
                        for d in storage.devices
                        if d.filesystem is None
                        and d.partitions is None
                        and d.size >= size
                        and set(tags or []) <= set(d.tags)
                        and d.id not in matched
                    ),
                    key=lambda d: d.size,
                )
                found = free_devices[0].id if free_devices else None
            if found is None:
                return None
            matched[found] = label
        return matched

    def interface_match(self, m: Machine) -> dict[str, list[int]] | None:
        """``nodes_by_interface`` for one machine: label -> matching interface ids, or None."""
        if self.interfaces is None:
            return {}
        result = {}
        for label, constraints in self.interfaces.items():
            ids = [i.id for i in m.interfaces if self._iface_ok(m, i, constraints)]
            if not ids:
                return None
            result[label] = ids
        return result

    def _iface_ok(self, m: Machine, iface: Interface, constraints: dict[str, list[str]]) -> bool:
        net = self.sim.net
        vlan = net.vlans.get(iface.vlan_id) if iface.vlan_id is not None else None
        fabric = net.fabrics[vlan.fabric_id] if vlan else None
        subnets = [net.subnets[lk.subnet_id] for lk in iface.links if lk.subnet_id in net.subnets]
        ips = {lk.ip_address for lk in iface.links if lk.ip_address}
        facts: dict[str, Callable[[str], bool]] = {
            "id": lambda v: v == str(iface.id),
            "name": lambda v: v == iface.name,
            "hostname": lambda v: v == m.hostname,
            "type": lambda v: v == "physical",
            "tag": lambda v: v in iface.tags,
            "fabric": lambda v: fabric is not None and v in (fabric.name, str(fabric.id)),
            "fabric_class": lambda v: fabric is not None and v == fabric.class_type,
            "vlan": lambda v: vlan is not None and v.removeprefix("id:") == str(vlan.id),
            "vid": lambda v: vlan is not None and v == str(vlan.vid),
            "space": lambda v: vlan is not None and v == (vlan.space or "undefined"),
            "subnet": lambda v: any(
                s.id in {x.id for x in net.subnets_by_specifier(v)} for s in subnets
            ),
            "subnet_cidr": lambda v: any(s.cidr == v for s in subnets),
            "ip": lambda v: v in ips,
            "mode": lambda v: (
                v == "unconfigured" and all(lk.mode == "link_up" for lk in iface.links)
            ),
            "link_speed": lambda v: iface.link_speed >= _number(v),
        }
        for key, values in constraints.items():
            negate = key.startswith("not_")
            test = facts[key.removeprefix("not_")]
            hit = any(test(v) for v in values)
            if hit == negate:
                return False
        return True


def _number(value: str) -> float:
    """A number from a constraint value; what is not one matches nothing (infinity)."""
    try:
        return float(value)
    except ValueError:
        return float("inf")


def parse_label_map(value: str) -> dict[str, dict[str, list[str]]]:
    """``parse_labeled_constraint_map``: ``label:key=value[,key=value][;label2:...]``."""
    if len(value) <= 1:
        return {}
    result: dict[str, dict[str, list[str]]] = {}
    for constraint in value.split(";"):
        tokens = constraint.split(":", 1)
        if len(tokens) != 2:
            raise ValueError(
                f"Malformed constraint: '{constraint}' (required format: "
                "'<label>:<key>=<value>[,<key2>=<value2>[,...]]')"
            )
        label = tokens[0]
        if not LABEL.match(label):
            raise ValueError(
                f"Invalid label name: '{label}' (Must begin with an alphanumeric character, and "
                "include only alphanumeric characters, dashes, and underscores.)"
            )
        if label in result:
            raise ValueError(f"Constraint label defined more than once: '{label}'")
        pairs: dict[str, list[str]] = {}
        for kvp in tokens[1].split(","):
            kv = kvp.split("=", 1)
            if len(kv) != 2:
                raise ValueError(f"Malformed key/value pair in constraint: '{kvp}'")
            pairs.setdefault(kv[0], []).append(kv[1])
        result[label] = pairs
    return result


def _name_matches(m: Machine, name: str) -> bool:
    host, _, domain = name.partition(".")
    return host == m.hostname and (not domain or domain == "maas")


def usable_architectures(sim: Simulator) -> list[str]:
    """The architectures of the synced boot images, as MAAS offers them."""
    arches = sorted({b.architecture.split("/")[0] for b in sim.boot_resources})
    subarches = sorted({b.architecture.split("/")[1] for b in sim.boot_resources})
    return [f"{a}/generic" for a in arches] + [
        f"{a}/{s}"
        for a in arches
        for s in subarches
        if any(b.architecture == f"{a}/{s}" for b in sim.boot_resources)
    ]


def vlans_by_specifier(sim: Simulator, spec: str) -> list[Any]:
    """``VLAN.objects.filter_by_specifiers``: an id, or ``vid:``, ``name:``, ``fabric:``,
    ``space:``."""
    kind, sep, value = spec.partition(":")
    if not sep:
        kind, value = "id", spec
    found = []
    for v in sim.net.vlans.values():
        fabric = sim.net.fabrics[v.fabric_id]
        if (
            (kind == "id" and value == str(v.id))
            or (kind == "vid" and value == str(v.vid))
            or (kind == "name" and value == v.name)
            or (kind == "fabric" and value in (fabric.name, str(fabric.id)))
            or (kind == "space" and value == (v.space or "undefined"))
        ):
            found.append(v)
    return found


def is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True

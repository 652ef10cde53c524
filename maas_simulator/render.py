"""The JSON the simulated API answers with for nodes, events and script results: machines (full
and as an anonymous caller sees them), devices, the rack controller, users, events, script sets
and the legacy ``commissioning-results/`` entries (docs/maas-api.md §3.1, §6, §7, §10).

The simulator's state knows nothing of these shapes; handlers render it here. Site objects
(fabrics, VLANs, subnets, …) and storage are rendered by ``network.py`` and ``storage.py``.
A machine's JSON is cached on the machine until it changes (``Machine.touch``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import orjson

from maas_client.status import LABELS
from maas_simulator.hardware import UNKNOWN_HARDWARE_INFO
from maas_simulator.interfaces import Interface, default_gateways, interface_json
from maas_simulator.model import Simulator
from maas_simulator.network import API_PREFIX
from maas_simulator.nodes import (
    RESULT_TYPES,
    SCRIPT_STATUS,
    Device,
    Machine,
    Node,
    ScriptResult,
    ScriptSet,
)
from maas_simulator.users import Event, User


def iso_ms(ts: float | None) -> str | None:
    """Model datetimes: ISO-8601, naive, milliseconds (docs/maas-api.md §2)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")


def event_time(ts: float) -> str:
    """Events' ``created``: ``%a, %d %b. %Y %H:%M:%S`` (docs/maas-api.md §6)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%a, %d %b. %Y %H:%M:%S")


def rfc2822(ts: float | None) -> str | None:
    """Script results' dates (docs/maas-api.md §7)."""
    if ts is None:
        return None
    return format_datetime(datetime.fromtimestamp(ts, UTC).replace(tzinfo=None))


# -- machines -------------------------------------------------------------------------------------


def machine_json(sim: Simulator, m: Machine) -> bytes:
    """The machine as MAAS shows it, cached until the machine changes."""
    if m._json is None:
        m._json = orjson.dumps(machine_dict(sim, m))
    return m._json


def machine_dict(sim: Simulator, m: Machine) -> dict[str, Any]:
    """``DISPLAYED_MACHINE_FIELDS`` (docs/maas-api.md §3.1)."""
    ifaces = [interface_json(sim.net, m.system_id, i, m.interfaces) for i in m.interfaces]
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
        "domain": sim.net.domain_json(sim.net.domains[0]),
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
        "zone": zone_json(sim, m.zone),
        "pool": sim.net.pool_json(sim.net.pool_named(m.pool) or sim.net.pools[0]),
        "disable_ipv4": False,
        **m.storage.machine_fields(m.system_id),
        "raids": [],
        "cache_sets": [],
        "bcaches": [],
        "special_filesystems": [],
        "default_gateways": default_gateways(
            sim.net, m.interfaces, m.boot_interface.id if m.boot_interface else None
        ),
        "node_type": 0,
        "node_type_name": "Machine",
        "parent": None,
        "current_commissioning_result_id": current_set_id(m, 0),
        "current_testing_result_id": current_set_id(m, 2),
        "current_installation_result_id": current_set_id(m, 1),
        "hardware_info": m.hardware_info or dict(UNKNOWN_HARDWARE_INFO),
        "numanode_set": numanode_set(m),
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


def numanode_set(m: Machine) -> list[dict[str, Any]]:
    """The NUMA nodes commissioning recorded, CPUs and memory split between them (node 0 only,
    empty, before); hugepages only come from a deployed machine's data."""
    count = max(m.numa_nodes, 1)
    nodes = []
    for i in range(count):
        cores = range(i * m.cpu_count // count, (i + 1) * m.cpu_count // count)
        memory = m.memory // count + (m.memory % count if i == count - 1 else 0)
        nodes.append({"index": i, "cores": list(cores), "memory": memory, "hugepages_set": []})
    return nodes


def zone_json(sim: Simulator, name: str) -> dict[str, Any]:
    return sim.net.zone_json(sim.net.zone_named(name) or sim.net.zones[1])


def node_interface_json(sim: Simulator, node: Node, iface: Interface) -> dict[str, Any]:
    return interface_json(sim.net, node.system_id, iface, node.interfaces)


def current_set_id(m: Machine, type_: int) -> int | None:
    sets = [s for s in m.script_sets if s.type == type_]
    return sets[-1].id if sets else None


ANON_FIELDS = (
    "system_id",
    "hostname",
    "domain",
    "fqdn",
    "architecture",
    "status",
    "power_type",
    "power_state",
    "zone",
    "status_action",
    "status_message",
    "status_name",
    "node_type",
)


def anon_machine_json(sim: Simulator, m: Machine) -> bytes:
    """``DISPLAYED_ANON_MACHINE_FIELDS``: what an anonymous caller is shown of a machine."""
    full = json.loads(machine_json(sim, m))
    return json.dumps(
        {k: full[k] for k in ANON_FIELDS} | {"resource_uri": full["resource_uri"]}
    ).encode()


# -- devices and the rack controller --------------------------------------------------------------


def node_addresses(node: Node) -> list[str]:
    return [lk.ip_address for i in node.interfaces for lk in i.links if lk.ip_address]


def device_json(sim: Simulator, d: Device) -> dict[str, Any]:
    return {
        "system_id": d.system_id,
        "hostname": d.hostname,
        "description": d.description,
        "domain": sim.net.domain_json(sim.net.domains[0]),
        "fqdn": f"{d.hostname}.maas",
        "owner": d.owner,
        "owner_data": {},
        "parent": None,
        "tag_names": sorted(d.tags),
        "address_ttl": None,
        "ip_addresses": node_addresses(d),
        "interface_set": [node_interface_json(sim, d, i) for i in d.interfaces],
        "zone": zone_json(sim, d.zone),
        "node_type": 1,
        "node_type_name": "Device",
        "workload_annotations": {},
        "resource_uri": f"/MAAS/api/2.0/devices/{d.system_id}/",
    }


def rack_json(sim: Simulator) -> dict[str, Any]:
    rack = sim.rack
    services = [
        {"name": n, "status": "running", "status_info": ""}
        for n in (
            "http",
            "dhcpd",
            "dhcpd6",
            "ntp_rack",
            "dns_rack",
            "proxy_rack",
            "rackd",
            "syslog_rack",
            "tftp",
        )
    ]
    services[2]["status"] = "off"  # no IPv6 DHCP
    return {
        "system_id": rack.system_id,
        "hostname": rack.hostname,
        "description": "",
        "hardware_uuid": None,
        "domain": sim.net.domain_json(sim.net.domains[0]),
        "fqdn": f"{rack.hostname}.maas",
        "architecture": "amd64/generic",
        "cpu_count": 16,
        "cpu_speed": 2900,
        "memory": 65536,
        "swap_size": None,
        "osystem": "ubuntu",
        "distro_series": "jammy",
        "power_type": "",
        "power_state": "unknown",
        "ip_addresses": node_addresses(rack),
        "interface_set": [node_interface_json(sim, rack, i) for i in rack.interfaces],
        "zone": zone_json(sim, "default"),
        "status_action": "",
        "node_type": 2,
        "node_type_name": "Rack controller",
        "version": "3.5.10",
        "service_set": services,
        "tag_names": [],
        "current_commissioning_result_id": None,
        "current_testing_result_id": None,
        "current_installation_result_id": None,
        "resource_uri": f"/MAAS/api/2.0/rackcontrollers/{rack.system_id}/",
    }


# -- users, events, script results ----------------------------------------------------------------


def user_json(u: User) -> dict[str, Any]:
    return {
        "username": u.username,
        "email": u.email or f"{u.username}@example.test",
        "is_local": True,
        "is_superuser": u.is_superuser,
        "resource_uri": f"{API_PREFIX}users/{u.username}/",
    }


def event_json(ev: Event, wall: Callable[[float], float]) -> dict[str, Any]:
    """An event as MAAS shows it, stamped in real time (``Clock.wall``)."""
    return {
        "username": ev.username or "unknown",  # Event.owner
        "node": ev.system_id,
        "hostname": ev.hostname,
        "id": ev.id,
        "level": ev.level,
        "created": event_time(wall(ev.created)),
        "type": ev.type,
        "description": ev.description,
    }


def script_set_json(m: Node, ss: ScriptSet, include_output: bool) -> dict[str, Any]:
    """A script set of ``nodes/{id}/results/`` (docs/maas-api.md §7): RFC-2822 dates."""

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


def legacy_result_json(sid: str, type_: int, ss: ScriptSet, r: ScriptResult) -> dict[str, Any]:
    """An entry of the legacy ``commissioning-results/`` list (docs/maas-api.md §7)."""
    return {
        "created": iso_ms(ss.started),
        "updated": iso_ms(r.ended or ss.started),
        "id": r.id,
        "name": r.name,
        "script_result": r.exit_status,
        "result_type": type_,
        "node": {"system_id": sid},
        "data": base64.b64encode(r.output).decode(),
        "resource_uri": f"{API_PREFIX}commissioning-scripts/",
    }

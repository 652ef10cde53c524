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
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import orjson

from maas_client.status import LABELS
from maas_simulator.hardware import (
    CPU,
    HARDWARE_TYPES,
    MEMORY,
    NETWORK,
    NODE,
    STORAGE,
    UNKNOWN_HARDWARE_INFO,
)
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
    overall_status,
)
from maas_simulator.scripts import PARALLEL_NAMES, SCRIPT_TYPE_NAMES, Script, duration
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
        # a manual power driver can neither act nor query: MAAS never learns a state
        "power_state": "unknown" if m.power_type == "manual" else m.power_state,
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
        "current_installation_result_id": m.current_installation,
        "hardware_info": m.hardware_info or dict(UNKNOWN_HARDWARE_INFO),
        "numanode_set": numanode_set(m),
        "bios_boot_method": m.bios_boot_method,
        "last_sync": iso_ms(m.last_sync),
        "next_sync": iso_ms(next_sync),
        "sync_interval": m.sync_interval,
        "enable_hw_sync": m.enable_hw_sync,
        "pod": None,
        "virtualmachine_id": None,
        "resource_uri": f"{API_PREFIX}machines/{m.system_id}/",
    }
    data.update(status_fields(m))
    return data


STATUS_FIELDS = {  # machine field → the hardware type of the testing scripts it covers
    "cpu_test": CPU,
    "memory_test": MEMORY,
    "network_test": NETWORK,
    "storage_test": STORAGE,
    "other_test": NODE,
    "interface_test": NETWORK,
}


def status_fields(m: Machine) -> dict[str, Any]:
    """``commissioning_status``, ``testing_status`` and the per-type test statuses as MAAS
    computes them: from the latest result of each script on each device over every run
    (``get_latest_script_results``), aborted ones left out, suppressed ones not counted; -1
    ("Unknown") when none is left. GPU tests count only in ``testing_status``."""
    latest: dict[tuple[str, int | None, int | None], tuple[int, ScriptResult]] = {}
    for ss in m.script_sets:
        if ss.type == 1:
            continue
        for r in ss.results:
            key = r.device_key
            if key not in latest or r.id > latest[key][1].id:
                latest[key] = (ss.type, r)
    kept = [(t, r) for t, r in latest.values() if r.status != 5]
    groups: dict[str, list[ScriptResult]] = {
        "commissioning": [r for t, r in kept if t == 0],
        "testing": [r for t, r in kept if t == 2],
    }
    for prefix, kind in STATUS_FIELDS.items():
        groups[prefix] = [
            r for r in groups["testing"] if r.script and r.script.hardware_type == kind
        ]
    data: dict[str, Any] = {}
    for prefix, results in groups.items():
        status = (
            -1 if not results else overall_status([r.status for r in results if not r.suppressed])
        )
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


def hms(seconds: float) -> str:
    """A ``timedelta`` less its microseconds, as ``str`` shows it (``0:03:12``)."""
    return str(timedelta(seconds=int(seconds)))


def estimated_runtime(m: Node, r: ScriptResult) -> str:
    """``ScriptResult.estimated_runtime``: its runtime once ended; else the average of the
    earlier passed runs of the script (on that device); else the script's timeout; else
    ``Unknown``."""
    if r.started is not None and r.ended is not None:
        return hms(r.ended - r.started)
    runtime: float | None = None
    for ss in m.script_sets:
        for old in ss.results:
            if (
                old is r
                or old.name != r.name
                or old.status != 2
                or old.disk not in (r.disk, None)
                or old.started is None
                or old.ended is None
            ):
                continue
            spent = old.ended - old.started
            runtime = spent if runtime is None else (runtime + spent) / 2
    if runtime is not None:
        return hms(runtime)
    if r.script is not None and r.script.timeout:
        return duration(r.script.timeout)
    return "Unknown"


def result_parameters(r: ScriptResult) -> dict[str, Any]:
    """A result's ``parameters``; a password's value is shown as ``REDACTED``."""
    shown = {}
    for name, param in r.parameters.items():
        if param.get("type") == "password" and "value" in param:
            param = {**param, "value": "REDACTED"}
        shown[name] = param
    return shown


def filter_results(
    ss: ScriptSet, filters: list[str] | None, hardware_type: int | None
) -> list[ScriptResult]:
    """``filter_script_results``: results named, tagged (their script's tags) or numbered in
    ``filters`` (one listed once per filter that keeps it, as MAAS does), of scripts of
    ``hardware_type``; sorted by name, then disk, then interface."""
    if filters is None:
        kept = list(ss.results)
    else:
        kept = [
            r
            for r in ss.results
            for f in filters
            if f == r.name
            or (r.script is not None and f in r.script.tags)
            or (f.isdigit() and int(f) == r.id)
        ]
    if hardware_type is not None:
        kept = [r for r in kept if r.script is not None and r.script.hardware_type == hardware_type]
    return sorted(
        kept,
        key=lambda r: (
            r.name,
            r.disk[1] if r.disk else "",
            r.interface[1] if r.interface else "",
        ),
    )


def script_set_json(
    m: Node,
    ss: ScriptSet,
    include_output: bool,
    filters: list[str] | None = None,
    hardware_type: int | None = None,
) -> dict[str, Any]:
    """A script set of ``nodes/{id}/results/`` (maas-hardware.md §4): RFC 2822 dates, no
    set-level ``suppressed`` (piston drops it: the model has none)."""
    results = []
    for r in filter_results(ss, filters, hardware_type):
        created = r.created if r.created is not None else ss.started
        item: dict[str, Any] = {
            "id": r.id,
            "created": rfc2822(created),
            "updated": rfc2822(r.updated or r.ended or created),
            "name": r.name,
            "status": r.status,
            "status_name": SCRIPT_STATUS.get(r.status, "Unknown"),
            "exit_status": r.exit_status,
            "started": rfc2822(r.started),
            "ended": rfc2822(r.ended),
            "runtime": hms(r.ended - r.started) if r.started and r.ended else "",
            "starttime": r.started if r.started is not None else "",
            "endtime": r.ended if r.ended is not None else "",
            "estimated_runtime": estimated_runtime(m, r),
            "parameters": result_parameters(r),
            "script_id": r.script.id if r.script else None,
            "script_revision_id": r.script.revision_id if r.script else None,
            "suppressed": r.suppressed,
        }
        if include_output:
            stdout = r.out() if r.stdout is None else r.stdout
            item.update(
                {
                    "output": base64.b64encode(r.out()).decode(),
                    "stdout": base64.b64encode(stdout).decode(),
                    "stderr": base64.b64encode(r.stderr).decode(),
                    "result": base64.b64encode(r.result).decode(),
                }
            )
        results.append(item)
    started, ended = ss.first_started, ss.last_ended
    pings = [t for r in ss.results for t in (r.started, r.ended) if t is not None]
    status = ss.status
    return {
        "id": ss.id,
        "system_id": m.system_id,
        "type": ss.type,
        "type_name": RESULT_TYPES[ss.type],
        "last_ping": rfc2822(max(pings)) if pings else None,
        "status": status,
        "status_name": SCRIPT_STATUS.get(status, "Unknown"),
        "started": rfc2822(started),
        "ended": rfc2822(ended),
        "runtime": hms(ended - started) if started is not None and ended is not None else "",
        "results": results,
        "resource_uri": f"{API_PREFIX}nodes/{m.system_id}/results/{ss.id}/",
    }


def script_json(script: Script, include_script: bool) -> dict[str, Any]:
    """``NodeScriptHandler.fields`` (maas-hardware.md §2): the timeout as ``str(timedelta)``,
    one ``history`` entry (with the base64 script when asked); no trailing slash on its URI."""
    history: dict[str, Any] = {
        "id": script.revision_id,
        "comment": script.comment,
        "created": rfc2822(script.created),
    }
    if include_script:
        history["data"] = base64.b64encode(script.body().encode()).decode()
    return {
        "id": script.id,
        "name": script.name,
        "title": script.title,
        "description": script.description,
        "tags": list(script.tags),
        "type": script.type,
        "type_name": SCRIPT_TYPE_NAMES[script.type],
        "hardware_type": script.hardware_type,
        "hardware_type_name": HARDWARE_TYPES[script.hardware_type][0],
        "parallel": script.parallel,
        "parallel_name": PARALLEL_NAMES[script.parallel],
        "results": script.results,
        "parameters": script.parameters,
        "packages": script.packages,
        "timeout": duration(script.timeout),
        "destructive": script.destructive,
        "for_hardware": list(script.for_hardware),
        "may_reboot": script.may_reboot,
        "recommission": script.recommission,
        "history": [history],
        "default": script.default,
        "apply_configured_networking": script.apply_configured_networking,
        "resource_uri": f"{API_PREFIX}scripts/{script.name}",
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
        "data": base64.b64encode(r.out()).decode(),
        "resource_uri": f"{API_PREFIX}commissioning-scripts/",
    }

"""Scenario files (YAML or JSON): users, subnets, boot resources, machines, faults."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import yaml

from maas_domain.maas.status import NodeStatus
from maas_domain.simulator.model import BootResource, MachineFaults, Simulator, Subnet, User
from maas_domain.simulator.server import RequestFault

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
DEFAULT_BOOT_RESOURCES = [
    {"name": "ubuntu/jammy", "architecture": "amd64/ga-22.04"},
    {"name": "ubuntu/noble", "architecture": "amd64/ga-24.04"},
    {"name": "ubuntu/jammy", "architecture": "arm64/ga-22.04"},
]


def read_file(path: str | Path) -> dict[str, Any]:
    text = Path(path).read_text()
    data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"scenario {path} must be a mapping")
    return data


def _check_keys(spec: dict[str, Any], known: set[str], what: str) -> None:
    unknown = set(spec) - known
    if unknown:
        raise ValueError(f"unknown {what} fields: {sorted(unknown)}")


def _status(name: str) -> NodeStatus:
    try:
        return NodeStatus[name.upper()]
    except KeyError as exc:
        raise ValueError(f"unknown machine status {name!r}") from exc


def add_machines(sim: Simulator, specs: list[dict[str, Any]]) -> list[str]:
    """Add machines from scenario entries; returns their system ids."""
    added = []
    taken = {m.hostname for m in sim.machines.values()}
    for spec in specs:
        spec = dict(spec)
        hostname = spec.get("hostname")
        if hostname and not sim.allow_duplicate_hostnames and hostname in taken:
            raise ValueError(
                f"duplicate hostname {hostname!r} (set config.allow_duplicate_hostnames)"
            )
        power = dict(spec.pop("power_parameters", {}))
        if "power_address" in spec:
            power.setdefault("power_address", spec.pop("power_address"))
            power.setdefault("power_driver", "LAN_2_0")
        m = sim.add_machine(
            hostname=spec.pop("hostname", None),
            status=_status(spec.pop("status", "new")),
            power_type=spec.pop("power_type", "ipmi"),
            power_parameters=power,
            mac_addresses=spec.pop("mac_addresses", None),
            interfaces=spec.pop("interfaces", None),
            architecture=spec.pop("architecture", "amd64/generic"),
            faults=MachineFaults.from_dict(spec.pop("faults", {})),
            system_id=spec.pop("system_id", None),
        )
        if spec:
            raise ValueError(f"unknown machine fields: {sorted(spec)}")
        taken.add(m.hostname)
        added.append(m.system_id)
    return added


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


def load(sim: Simulator, data: dict[str, Any], *, api_key: str | None = None) -> list[RequestFault]:
    """Populate ``sim`` from scenario data; returns the request faults it names."""
    known = {
        "users",
        "subnets",
        "boot_resources",
        "machines",
        "generate",
        "request_faults",
        "config",
    }
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown scenario keys: {sorted(unknown)}")
    users = data.get("users") or []
    if api_key:
        users = [{"username": "admin", "is_superuser": True, "api_key": api_key}, *users]
    for u in users:
        _check_keys(u, {"username", "is_superuser", "api_key", "email"}, "user")
        parts = str(u["api_key"]).split(":")
        if len(parts) != 3:
            raise ValueError(f"api_key of {u['username']!r} must be consumer:token:secret")
        ck, tk, ts = parts
        sim.users[u["username"]] = User(
            u["username"], bool(u.get("is_superuser")), ck, tk, ts, email=u.get("email", "")
        )
    subnet_specs: list[dict[str, Any]] = data.get("subnets") or DEFAULT_SUBNETS
    for spec in subnet_specs:
        _check_keys(spec, {"id", "name", "cidr", "vlan_id", "fabric_id", "gateway_ip"}, "subnet")
        subnet = Subnet(**spec)
        sim.subnets[subnet.id] = subnet
    for i, b in enumerate(data.get("boot_resources") or DEFAULT_BOOT_RESOURCES, start=1):
        _check_keys(b, {"name", "architecture", "type"}, "boot resource")
        sim.boot_resources.append(BootResource(id=i, **b))
    config = dict(data.get("config") or {})
    sim.allow_duplicate_hostnames = bool(config.pop("allow_duplicate_hostnames", False))
    _check_keys(config, set(sim.config), "config")
    sim.config.update(config)
    add_machines(sim, data.get("machines") or [])
    if data.get("generate"):
        _check_keys(data["generate"], {"count", "status", "prefix", "ipmi_network"}, "generate")
        generate(sim, **data["generate"])
    return [RequestFault.from_dict(f) for f in data.get("request_faults") or []]

"""Typed answers from MAAS. Each ``from_json`` reads exactly the fields the product uses."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from maas_client.status import NodeStatus


def _iso(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Version:
    version: str
    subversion: str
    capabilities: tuple[str, ...]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Version:
        return cls(d.get("version", ""), d.get("subversion", ""), tuple(d.get("capabilities", ())))


@dataclass(frozen=True)
class User:
    username: str
    email: str
    is_superuser: bool

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> User:
        return cls(d["username"], d.get("email", ""), bool(d.get("is_superuser")))


@dataclass(frozen=True)
class Subnet:
    id: int
    name: str
    cidr: str
    vlan_id: int | None
    gateway_ip: str | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Subnet:
        vlan = d.get("vlan") or {}
        return cls(d["id"], d.get("name", ""), d["cidr"], vlan.get("id"), d.get("gateway_ip"))

    def to_json(self) -> dict[str, Any]:
        """What ``from_json`` reads back (``Machine.to_json``)."""
        vlan = {"id": self.vlan_id} if self.vlan_id is not None else None
        return {
            "id": self.id,
            "name": self.name,
            "cidr": self.cidr,
            "vlan": vlan,
            "gateway_ip": self.gateway_ip,
        }


@dataclass(frozen=True)
class Link:
    id: int
    mode: str
    subnet: Subnet | None
    ip_address: str | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Link:
        subnet = Subnet.from_json(d["subnet"]) if d.get("subnet") else None
        return cls(d["id"], d.get("mode", ""), subnet, d.get("ip_address"))

    def to_json(self) -> dict[str, Any]:
        subnet = self.subnet.to_json() if self.subnet is not None else None
        return {"id": self.id, "mode": self.mode, "subnet": subnet, "ip_address": self.ip_address}


@dataclass(frozen=True)
class Interface:
    id: int
    name: str
    mac_address: str
    enabled: bool
    links: tuple[Link, ...]
    vlan_id: int | None
    fabric_id: int | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Interface:
        vlan = d.get("vlan") or {}
        return cls(
            id=d["id"],
            name=d["name"],
            mac_address=d.get("mac_address", ""),
            enabled=bool(d.get("enabled", True)),
            links=tuple(Link.from_json(link) for link in d.get("links") or []),
            vlan_id=vlan.get("id"),
            fabric_id=vlan.get("fabric_id"),
        )

    def to_json(self) -> dict[str, Any]:
        vlan = (
            {"id": self.vlan_id, "fabric_id": self.fabric_id}
            if self.vlan_id is not None or self.fabric_id is not None
            else None
        )
        return {
            "id": self.id,
            "name": self.name,
            "mac_address": self.mac_address,
            "enabled": self.enabled,
            "links": [link.to_json() for link in self.links],
            "vlan": vlan,
        }


def _iso_out(value: datetime | None) -> str | None:
    """The inverse of ``_iso``: MAAS's naive UTC timestamps."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() if value else None


@dataclass(frozen=True)
class Machine:
    system_id: str
    hostname: str
    status: NodeStatus
    status_name: str
    status_message: str
    error_description: str
    power_state: str
    power_type: str
    architecture: str
    osystem: str
    distro_series: str
    owner: str | None
    interfaces: tuple[Interface, ...]
    boot_interface_id: int | None
    ip_addresses: tuple[str, ...]
    enable_hw_sync: bool
    last_sync: datetime | None
    next_sync: datetime | None
    sync_interval: int | None
    hardware_uuid: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Machine:
        boot = d.get("boot_interface") or {}
        return cls(
            system_id=d["system_id"],
            hostname=d["hostname"],
            status=NodeStatus(d["status"]),
            status_name=d.get("status_name", ""),
            status_message=d.get("status_message") or "",
            error_description=d.get("error_description") or "",
            power_state=d.get("power_state", "unknown"),
            power_type=d.get("power_type", ""),
            architecture=d.get("architecture", ""),
            osystem=d.get("osystem") or "",
            distro_series=d.get("distro_series") or "",
            owner=d.get("owner"),
            interfaces=tuple(Interface.from_json(i) for i in d.get("interface_set") or []),
            boot_interface_id=boot.get("id"),
            ip_addresses=tuple(d.get("ip_addresses") or ()),
            enable_hw_sync=bool(d.get("enable_hw_sync")),
            last_sync=_iso(d.get("last_sync")),
            next_sync=_iso(d.get("next_sync")),
            sync_interval=d.get("sync_interval"),
            hardware_uuid=d.get("hardware_uuid") or "",
        )

    def to_json(self) -> dict[str, Any]:
        """The machine as MAAS's JSON, reduced to the fields ``from_json`` reads: ``from_json``
        of it is an equal ``Machine``. What the site poll hands a woken stage
        (workflows/scheduling.py): only these fields travel, never anything else of MAAS's
        answer (power parameters are a separate MAAS operation and are never read here)."""
        boot = {"id": self.boot_interface_id} if self.boot_interface_id is not None else None
        return {
            "system_id": self.system_id,
            "hostname": self.hostname,
            "status": int(self.status),
            "status_name": self.status_name,
            "status_message": self.status_message,
            "error_description": self.error_description,
            "power_state": self.power_state,
            "power_type": self.power_type,
            "architecture": self.architecture,
            "osystem": self.osystem,
            "distro_series": self.distro_series,
            "owner": self.owner,
            "interface_set": [i.to_json() for i in self.interfaces],
            "boot_interface": boot,
            "ip_addresses": list(self.ip_addresses),
            "enable_hw_sync": self.enable_hw_sync,
            "last_sync": _iso_out(self.last_sync),
            "next_sync": _iso_out(self.next_sync),
            "sync_interval": self.sync_interval,
            "hardware_uuid": self.hardware_uuid,
        }

    @property
    def boot_interface(self) -> Interface | None:
        return next((i for i in self.interfaces if i.id == self.boot_interface_id), None)


class MachineSummary(NamedTuple):
    """A machine as reconciliation sees it (``MaasClient.machine_summaries``): cheap to build in
    bulk. ``owner`` is "" for an unowned machine."""

    system_id: str
    hostname: str
    status: int
    status_name: str
    power_state: str
    owner: str
    # hardware sync (reconciliation/hardware.py): on, the last report as MAAS shows it (ISO,
    # region time; "" never), its interval in seconds
    enable_hw_sync: bool = False
    last_sync: str = ""
    sync_interval: int | None = None


@dataclass(frozen=True)
class Event:
    id: int
    system_id: str
    hostname: str
    level: str
    created: datetime
    type: str
    description: str
    username: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        created = datetime.strptime(d["created"], "%a, %d %b. %Y %H:%M:%S").replace(tzinfo=UTC)
        return cls(
            id=d["id"],
            system_id=d.get("node", ""),
            hostname=d.get("hostname", ""),
            level=d.get("level", "INFO"),
            created=created,
            type=d.get("type", ""),
            description=d.get("description", ""),
            username=d.get("username", ""),
        )

    @property
    def message(self) -> str:
        return f"{self.type} - {self.description}" if self.description else self.type


@dataclass(frozen=True)
class EventPage:
    events: tuple[Event, ...]  # newest first, as MAAS returns them
    newest_id: int | None
    oldest_id: int | None


@dataclass(frozen=True)
class ScriptResult:
    id: int
    name: str
    status_name: str
    exit_status: int | None
    output: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScriptResult:
        raw = d.get("output") or ""
        output = base64.b64decode(raw).decode("utf-8", "replace") if raw else ""
        return cls(d["id"], d["name"], d.get("status_name", ""), d.get("exit_status"), output)


@dataclass(frozen=True)
class ScriptSet:
    id: int
    type_name: str
    status_name: str
    results: tuple[ScriptResult, ...]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScriptSet:
        return cls(
            d["id"],
            d.get("type_name", ""),
            d.get("status_name", ""),
            tuple(ScriptResult.from_json(r) for r in d.get("results") or []),
        )


@dataclass(frozen=True)
class BootResource:
    id: int
    name: str
    architecture: str
    type: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BootResource:
        return cls(d["id"], d["name"], d["architecture"], d.get("type", ""))

    @property
    def series(self) -> str:
        return self.name.split("/")[-1]

    @property
    def arch(self) -> str:
        return self.architecture.split("/")[0]

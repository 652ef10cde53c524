"""The simulated site network: fabrics, VLANs, spaces, subnets (and their address books),
static routes, domains, zones, pools and tags, and their JSON (docs/simulator.md,
"Networking"). Node interfaces and links are in ``interfaces.py``.

MAAS 3.5's shapes: a VLAN belongs to a fabric and optionally a space; a subnet to a VLAN.

The site objects (fabrics, VLANs, spaces, subnets) are fixed once a scenario is loaded, so their
JSON is built once and shared by every interface that shows them.
"""

from __future__ import annotations

import heapq
import ipaddress
from collections import Counter
from dataclasses import dataclass
from typing import Any

API_PREFIX = "/MAAS/api/2.0/"
SUBNET_SPECIFIERS = {"id", "cidr", "name", "ip", "fabric", "space", "vid", "vlan"}
UNDEFINED_SPACE_DESCRIPTION = (
    "Backward compatibility object to ensure objects not associated with a space can be found."
)


@dataclass
class Fabric:
    id: int
    name: str
    class_type: str | None = None
    description: str = ""


@dataclass
class Space:
    id: int
    name: str
    description: str = ""


@dataclass
class Vlan:
    id: int
    fabric_id: int
    vid: int = 0
    # "": a scenario VLAN, named after its vid; None: created through the API without a name.
    # The fabric's default VLAN (its first) always shows as "untagged" (VLAN.get_name).
    name: str | None = ""
    mtu: int = 1500
    dhcp_on: bool = True
    space: str | None = None  # space name; None shows as "undefined"
    primary_rack: str | None = "rack01"
    secondary_rack: str | None = None
    relay_vlan: int | None = None  # the VLAN whose DHCP this one relays to
    description: str = ""

    def __post_init__(self) -> None:
        if self.name == "":
            self.name = "untagged" if self.vid == 0 else str(self.vid)


@dataclass
class IPRange:
    """A reserved or dynamic range of a subnet: never handed out by MAAS's allocator."""

    id: int
    subnet_id: int
    type: str  # "dynamic" | "reserved"
    start_ip: str
    end_ip: str
    comment: str = ""
    user: str | None = None  # username of its owner

    @property
    def lo(self) -> int:
        return int(ipaddress.ip_address(self.start_ip))

    @property
    def hi(self) -> int:
        return int(ipaddress.ip_address(self.end_ip))


class Subnet:
    """A subnet and its address book (which addresses are taken)."""

    def __init__(
        self,
        id: int,
        name: str,
        cidr: str,
        vlan_id: int,
        gateway_ip: str | None = None,
        dns_servers: list[str] | None = None,
        managed: bool = True,
        description: str = "",
    ) -> None:
        self.id = id
        self.name = name
        self.cidr = str(ipaddress.ip_network(cidr))
        self.network = ipaddress.ip_network(cidr)
        self.vlan_id = vlan_id
        self.gateway_ip = gateway_ip
        self.dns_servers = list(dns_servers or [])
        self.managed = managed
        self.description = description
        if gateway_ip is not None and ipaddress.ip_address(gateway_ip) not in self.network:
            raise ValueError(f"gateway_ip {gateway_ip} is not in subnet {cidr}")
        self._taken: set[int] = set()
        self._next = int(self.network.network_address) + 1
        self._freed: list[int] = []
        if gateway_ip:
            self._taken.add(int(ipaddress.ip_address(gateway_ip)))
        self.ranges: list[IPRange] = []  # kept by Network.add_range / remove_range
        # get_ipranges_in_use: the subnet's DNS servers and the gateways of routes from it are
        # never handed out either.
        self.dns_addresses = {
            int(ipaddress.ip_address(ip)) for ip in self.dns_servers if self.contains(ip)
        }
        self.route_gateways: Counter[int] = Counter()

    def contains(self, ip: str) -> bool:
        return ipaddress.ip_address(ip) in self.network

    def statistics(self) -> dict[str, Any]:
        """``op=statistics`` (``get_iprange_usage``): the usable addresses (not the network or
        broadcast address of an IPv4 subnet), the unavailable ones (taken, the gateway, DNS
        servers, route gateways, reserved and dynamic ranges) and the largest free stretch."""
        first = int(self.network.network_address) + (1 if self.network.version == 4 else 0)
        last = int(self.network.broadcast_address) - (1 if self.network.version == 4 else 0)
        total = max(last - first + 1, 0)
        blocked = {n for n in self._taken | self.dns_addresses if first <= n <= last}
        blocked |= {n for n, count in self.route_gateways.items() if count}
        stretches = [(max(r.lo, first), min(r.hi, last)) for r in self.ranges]
        spans = sorted([(n, n) for n in blocked] + [s for s in stretches if s[0] <= s[1]])
        unavailable, largest, cursor = 0, 0, first
        for lo, hi in spans:
            if hi < cursor:
                continue
            largest = max(largest, lo - cursor)
            unavailable += hi - max(lo, cursor) + 1
            cursor = hi + 1
        largest = max(largest, last - cursor + 1)
        usage = unavailable / total if total else 0.0
        return {
            "num_available": total - unavailable,
            "largest_available": largest,
            "num_unavailable": unavailable,
            "total_addresses": total,
            "usage": usage,
            "usage_string": f"{usage:.0%}",
            "available_string": f"{1 - usage:.0%}",
            "first_address": str(ipaddress.ip_address(first)),
            "last_address": str(ipaddress.ip_address(last)),
            "ip_version": self.network.version,
        }

    def is_taken(self, ip: str) -> bool:
        return int(ipaddress.ip_address(ip)) in self._taken

    def take(self, ip: str) -> None:
        self._taken.add(int(ipaddress.ip_address(ip)))

    def range_at(self, n: int, kind: str | None = None) -> IPRange | None:
        """The range (of ``kind`` if given) holding address ``n``."""
        return next((r for r in self.ranges if r.lo <= n <= r.hi and kind in (None, r.type)), None)

    def _free(self, n: int) -> bool:
        return (
            n not in self._taken
            and n not in self.dns_addresses
            and not self.route_gateways[n]
            and self.range_at(n) is None
        )

    def allocate(self) -> str | None:
        """The lowest free address (freed ones first) outside the reserved and dynamic ranges;
        None when the subnet is exhausted."""
        last = int(self.network.broadcast_address) - (1 if self.network.version == 4 else 0)
        while self._freed:
            n = heapq.heappop(self._freed)
            if self._free(n):
                self._taken.add(n)
                return str(ipaddress.ip_address(n))
        while self._next <= last:
            n = self._next
            blocked = self.range_at(n)
            self._next = blocked.hi + 1 if blocked is not None else n + 1
            if blocked is None and self._free(n):
                self._taken.add(n)
                return str(ipaddress.ip_address(n))
        return None

    def release(self, ip: str) -> None:
        n = int(ipaddress.ip_address(ip))
        if n in self._taken:
            self._taken.discard(n)
            heapq.heappush(self._freed, n)

    def reconsider(self, lo: int, hi: int) -> None:
        """Addresses ``lo``-``hi`` may be free again (a range or a route went away)."""
        if hi - lo < 256:
            for n in range(lo, hi + 1):
                heapq.heappush(self._freed, n)
        else:
            self._next = min(self._next, lo)

    def in_use(self, kind: str, exclude: IPRange | None = None) -> list[tuple[int, int]]:
        """``get_ipranges_in_use``: what a new range of ``kind`` may not overlap. A reserved
        range may hold allocated addresses but no other range; a dynamic range neither."""
        used = [(r.lo, r.hi) for r in self.ranges if r is not exclude]
        if kind == "dynamic":
            singles = self._taken | self.dns_addresses | set(+self.route_gateways)
            used += [(n, n) for n in singles]
        return sorted(used)

    def unused(self, kind: str, exclude: IPRange | None = None) -> list[tuple[int, int]]:
        """``get_ipranges_not_in_use``: the free stretches of the subnet for a range."""
        first = int(self.network.network_address) + 1
        last = int(self.network.broadcast_address) - (1 if self.network.version == 4 else 0)
        free, at = [], first
        for lo, hi in self.in_use(kind, exclude):
            if lo > at:
                free.append((at, min(lo - 1, last)))
            at = max(at, hi + 1)
        if at <= last:
            free.append((at, last))
        return free


@dataclass
class StaticRoute:
    id: int
    source: int  # subnet id
    destination: int  # subnet id
    gateway_ip: str
    metric: int = 0


@dataclass
class Domain:
    id: int
    name: str
    ttl: int | None = None
    authoritative: bool = True


@dataclass
class DnsResource:
    """A DNS resource (``dnsresources/``): a name in a domain with the addresses it answers."""

    id: int
    name: str
    domain: str
    address_ttl: int | None
    ip_addresses: list[str]
    user: str | None  # who reserved the addresses (the caller that made the record)
    created: float = 0.0


@dataclass
class Zone:
    id: int
    name: str
    description: str = ""


@dataclass
class Pool:
    id: int
    name: str
    description: str = ""


@dataclass
class Tag:
    name: str
    comment: str = ""
    definition: str = ""
    kernel_opts: str = ""


class Network:
    """Fabrics, VLANs, spaces, subnets, routes, domains, zones, pools and tags of one region."""

    def __init__(self) -> None:
        self.fabrics: dict[int, Fabric] = {}
        self.vlans: dict[int, Vlan] = {}
        self.spaces: dict[int, Space] = {}
        self.subnets: dict[int, Subnet] = {}
        self.routes: dict[int, StaticRoute] = {}
        self.ranges: dict[int, IPRange] = {}
        self.domains: dict[int, Domain] = {0: Domain(0, "maas")}
        self.dns_resources: dict[int, DnsResource] = {}
        self.zones: dict[int, Zone] = {1: Zone(1, "default")}
        self.pools: dict[int, Pool] = {0: Pool(0, "default", "Default pool")}
        self.tags: dict[str, Tag] = {}
        self._vlan_json: dict[int, dict[str, Any]] = {}
        self._subnet_json: dict[int, dict[str, Any]] = {}
        self._next_fabric = 1
        self._next_vlan = 5001

    # -- building ---------------------------------------------------------------------------
    def add_fabric(self, id: int | None = None, name: str = "", **kw: Any) -> Fabric:
        fid = id if id is not None else max([self._next_fabric - 1, *self.fabrics]) + 1
        if fid in self.fabrics:
            raise ValueError(f"duplicate fabric id {fid}")
        fabric = Fabric(fid, name or f"fabric-{fid}", **kw)
        self.fabrics[fid] = fabric
        self._next_fabric = max(self._next_fabric, fid + 1)
        return fabric

    def add_vlan(self, id: int | None = None, **kw: Any) -> Vlan:
        vid_ = id if id is not None else max([self._next_vlan - 1, *self.vlans]) + 1
        if vid_ in self.vlans:
            raise ValueError(f"duplicate VLAN id {vid_}")
        vlan = Vlan(vid_, **kw)
        if vlan.fabric_id not in self.fabrics:
            raise ValueError(f"VLAN {vid_}: unknown fabric {vlan.fabric_id}")
        if vlan.space is not None and vlan.space not in {s.name for s in self.spaces.values()}:
            raise ValueError(f"VLAN {vid_}: unknown space {vlan.space!r}")
        if any(v.fabric_id == vlan.fabric_id and v.vid == vlan.vid for v in self.vlans.values()):
            raise ValueError(f"VLAN {vid_}: fabric {vlan.fabric_id} already has vid {vlan.vid}")
        self.vlans[vid_] = vlan
        self._next_vlan = max(self._next_vlan, vid_ + 1)
        self._vlan_json.clear()
        self._subnet_json.clear()
        return vlan

    def new_fabric_with_vlan(self) -> Vlan:
        """MAAS's answer to a connected NIC on a network it knows nothing about."""
        return self.add_vlan(fabric_id=self.add_fabric().id)

    def add_subnet(self, subnet: Subnet) -> None:
        if subnet.id in self.subnets:
            raise ValueError(f"duplicate subnet id {subnet.id}")
        if subnet.vlan_id not in self.vlans:
            raise ValueError(f"subnet {subnet.cidr}: unknown VLAN {subnet.vlan_id}")
        for other in self.subnets.values():
            if other.network.overlaps(subnet.network):
                raise ValueError(f"subnet {subnet.cidr} overlaps {other.cidr}")
        self.subnets[subnet.id] = subnet
        self._subnet_json.clear()

    def default_vlan(self, fabric_id: int) -> Vlan | None:
        """``Fabric.get_default_vlan``: the fabric's first VLAN."""
        return min(
            (v for v in self.vlans.values() if v.fabric_id == fabric_id),
            key=lambda v: v.id,
            default=None,
        )

    def vlan_name(self, vlan: Vlan) -> str | None:
        """``VLAN.get_name``: "untagged" for the fabric's default VLAN, else its name."""
        return "untagged" if self.default_vlan(vlan.fabric_id) is vlan else vlan.name

    def changed(self) -> None:
        """A VLAN or subnet changed: the JSON built from it is stale."""
        self._vlan_json.clear()
        self._subnet_json.clear()

    def add_route(self, route: StaticRoute) -> None:
        self.routes[route.id] = route
        self.subnets[route.source].route_gateways[int(ipaddress.ip_address(route.gateway_ip))] += 1

    def remove_route(self, route: StaticRoute) -> None:
        del self.routes[route.id]
        source = self.subnets.get(route.source)
        if source is not None:
            n = int(ipaddress.ip_address(route.gateway_ip))
            source.route_gateways[n] -= 1
            source.reconsider(n, n)

    def add_range(self, iprange: IPRange) -> None:
        self.ranges[iprange.id] = iprange
        self.subnets[iprange.subnet_id].ranges.append(iprange)

    def remove_range(self, iprange: IPRange) -> None:
        del self.ranges[iprange.id]
        subnet = self.subnets[iprange.subnet_id]
        subnet.ranges.remove(iprange)
        subnet.reconsider(iprange.lo, iprange.hi)

    def has_dynamic_range(self, vlan_id: int) -> bool:
        return any(
            r.type == "dynamic" and self.subnets[r.subnet_id].vlan_id == vlan_id
            for r in self.ranges.values()
        )

    def best_subnet_for_ip(self, ip: str) -> Subnet | None:
        """``get_best_subnet_for_ip``: the most specific subnet holding the address."""
        holding = [s for s in self.subnets.values() if _is_ip(ip) and s.contains(ip)]
        return max(holding, key=lambda s: s.network.prefixlen, default=None)

    # -- lookups ----------------------------------------------------------------------------
    def subnets_by_specifier(self, spec: str) -> list[Subnet]:
        """``Subnet.objects.filter_by_specifiers`` for one specifier: ``id:``, ``cidr:``,
        ``name:``, ``ip:``, ``fabric:``, ``space:``, ``vid:``, ``vlan:``, or a bare value (an
        id if it is a number, a CIDR if it parses as one, else a name)."""
        kind, sep, value = spec.partition(":")
        if not sep or kind not in SUBNET_SPECIFIERS:
            kind, value = "", spec
        found = []
        for s in sorted(self.subnets.values(), key=lambda s: s.id):
            vlan = self.vlans[s.vlan_id]
            fabric = self.fabrics[vlan.fabric_id]
            if kind == "":
                if value.isdigit():
                    hit = s.id == int(value)
                elif _as_network(value) is not None:
                    hit = _as_network(value) == s.network
                else:
                    hit = value == s.name
            elif kind == "id":
                hit = value.isdigit() and s.id == int(value)
            elif kind == "cidr":
                hit = _as_network(value) == s.network
            elif kind == "name":
                hit = value == s.name
            elif kind == "ip":
                hit = _is_ip(value) and s.contains(value)
            elif kind == "fabric":
                hit = value in (str(fabric.id), fabric.name)
            elif kind == "space":
                hit = (vlan.space or "undefined") == value or any(
                    sp.name == vlan.space and str(sp.id) == value for sp in self.spaces.values()
                )
            elif kind == "vid":
                hit = value.isdigit() and vlan.vid == int(value)
            else:  # vlan
                hit = value == str(vlan.id)
            if hit:
                found.append(s)
        return found

    def subnet_by_ref(self, ref: str, within: set[int] | None = None) -> Subnet | None:
        """One subnet by id or specifier, among ``within`` (ids) if given."""
        for s in self.subnets_by_specifier(ref):
            if within is None or s.id in within:
                return s
        return None

    def space_of_subnet(self, subnet: Subnet) -> str | None:
        return self.vlans[subnet.vlan_id].space

    # -- JSON -------------------------------------------------------------------------------
    def vlan_json(self, vlan_id: int) -> dict[str, Any]:
        """``DISPLAYED_VLAN_FIELDS``; ``relay_vlan`` is the relayed-to VLAN, nested."""
        cached = self._vlan_json.get(vlan_id)
        if cached is None:
            v = self.vlans[vlan_id]
            relay = v.relay_vlan
            cached = {
                "id": v.id,
                "name": self.vlan_name(v),
                "vid": v.vid,
                "fabric": self.fabrics[v.fabric_id].name,
                "fabric_id": v.fabric_id,
                "mtu": v.mtu,
                "primary_rack": v.primary_rack,
                "secondary_rack": v.secondary_rack,
                "dhcp_on": v.dhcp_on,
                "external_dhcp": None,
                "relay_vlan": self.vlan_json(relay) if relay in self.vlans else None,
                "space": v.space or "undefined",
                "resource_uri": f"{API_PREFIX}vlans/{v.id}/",
            }
            self._vlan_json[vlan_id] = cached
        return cached

    def subnet_json(self, subnet_id: int) -> dict[str, Any]:
        cached = self._subnet_json.get(subnet_id)
        if cached is None:
            s = self.subnets[subnet_id]
            cached = {
                "id": s.id,
                "name": s.name,
                "description": s.description,
                "vlan": self.vlan_json(s.vlan_id),
                "space": self.vlans[s.vlan_id].space or "undefined",
                "cidr": s.cidr,
                "gateway_ip": s.gateway_ip,
                "dns_servers": list(s.dns_servers),
                "rdns_mode": 2,
                "active_discovery": False,
                "allow_dns": True,
                "allow_proxy": True,
                "managed": s.managed,
                "disabled_boot_architectures": [],
                "resource_uri": f"{API_PREFIX}subnets/{s.id}/",
            }
            self._subnet_json[subnet_id] = cached
        return cached

    def fabric_json(self, fabric: Fabric) -> dict[str, Any]:
        return {
            "id": fabric.id,
            "name": fabric.name,
            "class_type": fabric.class_type,
            "vlans": [
                self.vlan_json(v.id)
                for v in sorted(self.vlans.values(), key=lambda v: v.id)
                if v.fabric_id == fabric.id
            ],
            "resource_uri": f"{API_PREFIX}fabrics/{fabric.id}/",
        }

    def space_json(self, space: Space | None) -> dict[str, Any]:
        """A space; ``None`` is MAAS's "undefined" space (VLANs in no space)."""
        name = space.name if space else None
        vlans = sorted((v for v in self.vlans.values() if v.space == name), key=lambda v: v.id)
        vlan_ids = {v.id for v in vlans}
        return {
            "resource_uri": f"{API_PREFIX}spaces/{space.id if space else 'undefined'}/",
            "id": space.id if space else -1,
            "name": name or "undefined",
            "vlans": [self.vlan_json(v.id) for v in vlans],
            "subnets": [
                self.subnet_json(s.id)
                for s in sorted(self.subnets.values(), key=lambda s: s.id)
                if s.vlan_id in vlan_ids
            ],
            "description": space.description if space else UNDEFINED_SPACE_DESCRIPTION,
        }

    def has_undefined_space(self) -> bool:
        return any(v.space is None for v in self.vlans.values())

    def route_json(self, route: StaticRoute) -> dict[str, Any]:
        return {
            "id": route.id,
            "source": self.subnet_json(route.source),
            "destination": self.subnet_json(route.destination),
            "gateway_ip": route.gateway_ip,
            "metric": route.metric,
            "resource_uri": f"{API_PREFIX}static-routes/{route.id}/",
        }

    def range_json(self, r: IPRange, user: dict[str, Any] | None) -> dict[str, Any]:
        """``DISPLAYED_IPRANGE_FIELDS``: ``user`` is the owner's user object (or null)."""
        return {
            "id": r.id,
            "type": r.type,
            "start_ip": r.start_ip,
            "end_ip": r.end_ip,
            "comment": r.comment,
            "user": user,
            "subnet": self.subnet_json(r.subnet_id),
            "resource_uri": f"{API_PREFIX}ipranges/{r.id}/",
        }

    def domain_json(self, domain: Domain, records: int = 0) -> dict[str, Any]:
        return {
            "authoritative": domain.authoritative,
            "ttl": domain.ttl,
            "id": domain.id,
            "name": domain.name,
            "is_default": domain.id == 0,
            "resource_record_count": records,
            "resource_uri": f"{API_PREFIX}domains/{domain.id}/",
        }

    def zone_json(self, zone: Zone) -> dict[str, Any]:
        return {
            "name": zone.name,
            "description": zone.description,
            "id": zone.id,
            "resource_uri": f"{API_PREFIX}zones/{zone.name}/",
        }

    def pool_json(self, pool: Pool) -> dict[str, Any]:
        return {
            "name": pool.name,
            "description": pool.description,
            "id": pool.id,
            "resource_uri": f"{API_PREFIX}resourcepool/{pool.id}/",
        }

    def zone_named(self, name: str) -> Zone | None:
        return next((z for z in self.zones.values() if z.name == name), None)

    def pool_named(self, name: str) -> Pool | None:
        return next((p for p in self.pools.values() if p.name == name), None)


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _as_network(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None


def human_bytes(n: float) -> str:
    """``human_readable_bytes``: SI units, one decimal."""
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"):
        if abs(n) < 1000.0 or unit == "YB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000.0
    raise AssertionError("unreachable")

"""Site network handlers: fabrics, VLANs, spaces, subnets, static routes, domains, zones,
resource pools, devices and the rack controller (MAAS 3.5's ``api/fabrics.py``, ``vlans.py``,
``subnets.py``, ``staticroutes.py`` and the other site handlers). Node interfaces are in
``api_interfaces``."""

from __future__ import annotations

import ipaddress
from typing import Any

from maas_client.status import NodeStatus
from maas_simulator.errors import ApiError, invalid
from maas_simulator.interfaces import clear_links, remove_interface
from maas_simulator.model import Simulator
from maas_simulator.network import (
    API_PREFIX,
    DnsResource,
    Fabric,
    IPRange,
    StaticRoute,
    Subnet,
    Vlan,
)
from maas_simulator.render import device_json, event_time, iso_ms, rack_json, user_json
from maas_simulator.site_forms import ip_range_form, static_route_form, vlan_form
from maas_simulator.wire import (
    Request,
    Response,
    deleted,
    form_data,
    hostname_problem,
    require,
    string_bool,
    whole_number,
)

S = NodeStatus


# -- fabrics, VLANs, spaces, subnets, routes ----------------------------------------------------


def fabrics(sim: Simulator, req: Request) -> Any:
    return [sim.net.fabric_json(f) for f in sorted(sim.net.fabrics.values(), key=lambda f: f.id)]


def _admin(req: Request) -> None:
    """``NodePermission.admin`` on a site object: PermissionDenied(), a 403 with no body."""
    assert req.user is not None
    if not req.user.is_superuser:
        raise ApiError(403, "")


def _fabric(sim: Simulator, ref: str) -> Fabric:
    fabric = next(
        (f for f in sim.net.fabrics.values() if ref in (str(f.id), f.name, f"name:{f.name}")),
        None,
    )
    if fabric is None:
        raise ApiError(404, "No Fabric matches the given query.")
    return fabric


def fabric_read(sim: Simulator, req: Request) -> Any:
    return sim.net.fabric_json(_fabric(sim, req.params["id"]))


def fabric_vlans(sim: Simulator, req: Request) -> Any:
    fabric = _fabric(sim, req.params["fabric_id"])
    return [
        sim.net.vlan_json(v.id)
        for v in sorted(sim.net.vlans.values(), key=lambda v: v.vid)
        if v.fabric_id == fabric.id
    ]


def _vlan(sim: Simulator, req: Request) -> Vlan:
    """``vlans/{id}/`` by VLAN id, ``fabrics/{fabric_id}/vlans/{vid}/`` by fabric and VID
    ("untagged" is 0; anything else not a number is a name)."""
    if "vlan_id" in req.params:
        ref = req.params["vlan_id"]
        vlan = sim.net.vlans.get(int(ref)) if ref.isdigit() else None
    else:
        fabric = _fabric(sim, req.params["fabric_id"])
        ref = "0" if req.params["vid"] == "untagged" else req.params["vid"]
        vlan = next(
            (
                v
                for v in sim.net.vlans.values()
                if v.fabric_id == fabric.id
                and (v.vid == int(ref) if ref.isdigit() else sim.net.vlan_name(v) == ref)
            ),
            None,
        )
    if vlan is None:
        raise ApiError(404, "No VLAN matches the given query.")
    return vlan


def vlan_read(sim: Simulator, req: Request) -> Any:
    return sim.net.vlan_json(_vlan(sim, req).id)


def vlan_create(sim: Simulator, req: Request) -> Any:
    """``POST fabrics/{fabric_id}/vlans/`` (admin): ``VLANForm`` with the fabric given. A new
    VLAN has no DHCP, no rack and, unless named, no name (shown as null)."""
    fabric = _fabric(sim, req.params["fabric_id"])
    _admin(req)
    new = vlan_form(sim, form_data(req), None, fabric)
    vlan = sim.net.add_vlan(
        fabric_id=new["fabric_id"],
        vid=new["vid"],
        name=new["name"],
        description=new["description"],
        mtu=new["mtu"] or 1500,
        dhcp_on=bool(new["dhcp_on"]),
        space=new["space"],
        primary_rack=new["primary_rack"],
        secondary_rack=new["secondary_rack"],
        relay_vlan=new["relay_vlan"],
    )
    return sim.net.vlan_json(vlan.id)


def vlan_update(sim: Simulator, req: Request) -> Any:
    """``PUT``: name, description, vid, mtu, dhcp_on, primary_rack, secondary_rack,
    relay_vlan, space, fabric; what every interface, subnet and machine shows of the VLAN
    changes with it."""
    vlan = _vlan(sim, req)
    _admin(req)
    new = vlan_form(sim, form_data(req), vlan, sim.net.fabrics[vlan.fabric_id])
    for key, value in new.items():
        if value is not None or key not in ("mtu", "dhcp_on", "vid"):
            setattr(vlan, key, value)
    sim.site_changed()
    return sim.net.vlan_json(vlan.id)


def vlan_delete(sim: Simulator, req: Request) -> Response:
    """``VLAN.delete``: not the fabric's default VLAN; its VLAN interfaces go, the other
    interfaces and its subnets move to the fabric's default VLAN (machines' and devices'
    interfaces lose their links), and VLANs relaying to it stop."""
    vlan = _vlan(sim, req)
    _admin(req)
    default = sim.net.default_vlan(vlan.fabric_id)
    if default is vlan or default is None:
        raise ApiError(400, "This VLAN is the default VLAN in the fabric, it cannot be deleted.")
    for node in sim.all_nodes():
        for iface in [i for i in node.interfaces if i.vlan_id == vlan.id]:
            if iface.type == "vlan":
                remove_interface(sim.net, node.interfaces, iface)
                continue
            if not node.is_controller:
                clear_links(sim.net, iface)
            iface.vlan_id = default.id
        node.touch(sim.now())
    for subnet in sim.net.subnets.values():
        if subnet.vlan_id == vlan.id:
            subnet.vlan_id = default.id
    for other in sim.net.vlans.values():
        if other.relay_vlan == vlan.id:
            other.relay_vlan = None
    del sim.net.vlans[vlan.id]
    sim.site_changed()
    return deleted()


def spaces(sim: Simulator, req: Request) -> Any:
    found: list[Any] = [
        sim.net.space_json(s) for s in sorted(sim.net.spaces.values(), key=lambda s: s.id)
    ]
    if sim.net.has_undefined_space():
        found.append(sim.net.space_json(None))
    return found


def space_read(sim: Simulator, req: Request) -> Any:
    ref = req.params["id"]
    if ref in ("-1", "undefined") and sim.net.has_undefined_space():
        return sim.net.space_json(None)
    space = next(
        (s for s in sim.net.spaces.values() if ref in (str(s.id), s.name, f"name:{s.name}")),
        None,
    )
    if space is None:
        raise ApiError(404, "No Space matches the given query.")
    return sim.net.space_json(space)


def subnets(sim: Simulator, req: Request) -> Any:
    return [sim.net.subnet_json(s) for s in sorted(sim.subnets)]


def subnet_read(sim: Simulator, req: Request) -> Any:
    found = sim.net.subnets_by_specifier(req.params["id"])
    if not found:
        raise ApiError(404, "No Subnet matches the given query.")
    return sim.net.subnet_json(found[0].id)


def _subnet(sim: Simulator, req: Request) -> Subnet:
    found = sim.net.subnets_by_specifier(req.params["id"])
    if not found:
        raise ApiError(404, "No Subnet matches the given query.")
    return found[0]


def subnet_statistics(sim: Simulator, req: Request) -> Any:
    return _subnet(sim, req).statistics()


# IPADDRESS_TYPE: the kinds of address records MAAS lists
AUTO, STICKY, USER_RESERVED = 0, 1, 4


def subnet_ip_addresses(sim: Simulator, req: Request) -> Any:
    """``op=ip_addresses`` (``render_json_for_related_ips``): every address assigned on the
    subnet, by address: the nodes' links (AUTO, STICKY for a static link) with the node and the
    interface they are on, the DNS resources' (user reserved) with the records.
    ``with_username`` and ``with_summary`` (formencode ``StringBool``s, default true) leave out
    the user and the node and record summaries."""
    subnet = _subnet(sim, req)
    with_username = string_bool(req.query, "with_username", default=True)
    with_summary = string_bool(req.query, "with_summary", default=True)
    if not string_bool(req.query, "with_node_summary", default=True):
        with_summary = False
    stamp = event_time(sim.clock.wall(sim.now()))
    found: list[dict[str, Any]] = []
    for node in sim.all_nodes():
        for iface in node.interfaces:
            for link in iface.links:
                if link.subnet_id != subnet.id or not link.ip_address:
                    continue
                entry: dict[str, Any] = {
                    "ip": link.ip_address,
                    "alloc_type": STICKY if link.mode == "static" else AUTO,
                    "created": stamp,
                    "updated": stamp,
                }
                if with_summary:
                    entry["node_summary"] = {
                        "system_id": node.system_id,
                        "node_type": node.node_type,
                        "fqdn": f"{node.hostname}.maas",
                        "hostname": node.hostname,
                        "is_container": False,
                        "via": iface.name,
                    }
                owner = getattr(node, "owner", None)
                if with_username and owner:
                    entry["user"] = owner
                found.append(entry)
    for record in sim.net.dns_resources.values():
        for ip in record.ip_addresses:
            if not subnet.contains(ip):
                continue
            entry = {"ip": ip, "alloc_type": USER_RESERVED, "created": stamp, "updated": stamp}
            if with_username and record.user:
                entry["user"] = record.user
            if with_summary:
                entry["dns_records"] = [
                    {"id": record.id, "name": record.name, "domain": record.domain}
                ]
            found.append(entry)
    return sorted(found, key=lambda e: ipaddress.ip_address(e["ip"]))


# -- DNS resources ---------------------------------------------------------------------------------


def dnsresource_json(sim: Simulator, record: DnsResource) -> dict[str, Any]:
    """``DISPLAYED_DNSRESOURCE_FIELDS``; each address as a user-reserved IP record (recorded
    against MAAS 3.5.10, errors.jsonl step 214)."""
    owner = sim.users.get(record.user or "")
    addresses: list[dict[str, Any]] = []
    for ip in record.ip_addresses:
        subnet = next((s for s in sim.subnets.values() if s.contains(ip)), None)
        addresses.append(
            {
                "created": iso_ms(record.created),
                "ip": ip,
                "alloc_type": USER_RESERVED,
                "subnet": sim.net.subnet_json(subnet.id) if subnet else None,
                "owner": user_json(owner) if owner else None,
                "alloc_type_name": "User reserved",
                "interface_set": [],
                "resource_uri": f"{API_PREFIX}ipaddresses/",
            }
        )
    return {
        "address_ttl": record.address_ttl,
        "id": record.id,
        "ip_addresses": addresses,
        "resource_records": [],
        "fqdn": f"{record.name}.{record.domain}",
        "resource_uri": f"{API_PREFIX}dnsresources/{record.id}/",
    }


def dnsresources(sim: Simulator, req: Request) -> Any:
    """``GET dnsresources/``: the records, filtered by ``name`` and ``domain`` (or an ``fqdn``
    split into both); MAAS's implicit records of nodes only with ``all`` (not simulated)."""
    name, domain = req.get("name"), req.get("domain")
    fqdn = req.get("fqdn")
    if name is None and domain is None and fqdn is not None:
        name, _, domain = fqdn.partition(".")
    return [
        dnsresource_json(sim, r)
        for r in sorted(sim.net.dns_resources.values(), key=lambda r: r.id)
        if (name is None or r.name == name) and (domain is None or r.domain == domain)
    ]


def _dnsresource(sim: Simulator, req: Request) -> DnsResource:
    ref = req.params["id"]
    record = sim.net.dns_resources.get(int(ref)) if ref.isdigit() else None
    if record is None:
        raise ApiError(404, "No DNSResource matches the given query.")
    return record


def dnsresource_read(sim: Simulator, req: Request) -> Any:
    return dnsresource_json(sim, _dnsresource(sim, req))


def _dnsresource_form(
    sim: Simulator, req: Request, record: DnsResource | None
) -> tuple[str, str, int | None, list[str]]:
    """``DNSResourceForm``: ``name`` and ``domain`` (a name or an id; unknown → 404), or an
    ``fqdn`` split into both; ``address_ttl`` (0 to 2^31 - 1); ``ip_addresses`` separated by
    spaces. Left out of an update, a field keeps its value."""
    data = form_data(req)
    name, domain = data.get("name"), data.get("domain")
    if name is None and domain is None and data.get("fqdn"):
        name, _, domain = data["fqdn"].partition(".")
    errors: dict[str, list[str]] = {}
    if domain is not None:
        found = next((d for d in sim.net.domains.values() if domain in (d.name, str(d.id))), None)
        if found is None:
            raise ApiError(404, "No Domain matches the given query.")
        domain = found.name
    name = name if name is not None else (record.name if record else None)
    domain = domain if domain is not None else (record.domain if record else None)
    if not name:
        errors["name"] = ["This field is required."]
    elif problem := hostname_problem(name):
        errors["name"] = [problem]
    if not domain:
        errors["domain"] = ["This field is required."]
    ttl = whole_number(data, "address_ttl", errors, minimum=0, maximum=(1 << 31) - 1)
    if "address_ttl" not in data and record is not None:
        ttl = record.address_ttl
    addresses = data["ip_addresses"].split() if "ip_addresses" in data else None
    for ip in addresses or []:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            errors.setdefault("ip_addresses", []).append(f"{ip} is not a valid IP address.")
    if errors:
        raise invalid(errors)
    if addresses is None:
        addresses = list(record.ip_addresses) if record else []
    return str(name), str(domain), ttl, addresses


def dnsresource_create(sim: Simulator, req: Request) -> Any:
    assert req.user is not None
    name, domain, ttl, addresses = _dnsresource_form(sim, req, None)
    new = DnsResource(
        max([0, *sim.net.dns_resources]) + 1, name, domain, ttl, addresses, req.user.username
    )
    new.created = sim.now()
    _reserve(sim, addresses)
    sim.net.dns_resources[new.id] = new
    return dnsresource_json(sim, new)


def dnsresource_update(sim: Simulator, req: Request) -> Any:
    record = _dnsresource(sim, req)
    name, domain, ttl, addresses = _dnsresource_form(sim, req, record)
    _reserve(sim, addresses)
    record.name, record.domain, record.address_ttl = name, domain, ttl
    record.ip_addresses = addresses
    return dnsresource_json(sim, record)


def dnsresource_delete(sim: Simulator, req: Request) -> Response:
    del sim.net.dns_resources[_dnsresource(sim, req).id]
    return deleted()


def _reserve(sim: Simulator, addresses: list[str]) -> None:
    """A record's addresses are reserved on their subnets: never handed out to a node."""
    for ip in addresses:
        for subnet in sim.subnets.values():
            if subnet.contains(ip) and not subnet.is_taken(ip):
                subnet.take(ip)


def static_routes(sim: Simulator, req: Request) -> Any:
    return [sim.net.route_json(r) for r in sorted(sim.net.routes.values(), key=lambda r: r.id)]


def _route(sim: Simulator, req: Request) -> StaticRoute:
    ref = req.params["id"]
    route = sim.net.routes.get(int(ref)) if ref.isdigit() else None
    if route is None:
        raise ApiError(404, "No StaticRoute matches the given query.")
    return route


def static_route_read(sim: Simulator, req: Request) -> Any:
    return sim.net.route_json(_route(sim, req))


def static_route_create(sim: Simulator, req: Request) -> Any:
    """``POST static-routes/`` (admin): ``source``, ``destination`` (ids or specifiers),
    ``gateway_ip`` (on the source subnet), ``metric`` (default 0). The gateway is no longer
    handed out on the source subnet."""
    source, destination, gateway, metric = static_route_form(sim, form_data(req), None)
    route = StaticRoute(max([0, *sim.net.routes]) + 1, source, destination, gateway, metric)
    sim.net.add_route(route)
    return sim.net.route_json(route)


def static_route_update(sim: Simulator, req: Request) -> Any:
    route = _route(sim, req)
    _admin(req)
    source, destination, gateway, metric = static_route_form(sim, form_data(req), route)
    sim.net.remove_route(route)
    route.source, route.destination, route.gateway_ip, route.metric = (
        source,
        destination,
        gateway,
        metric,
    )
    sim.net.add_route(route)
    return sim.net.route_json(route)


def static_route_delete(sim: Simulator, req: Request) -> Response:
    route = _route(sim, req)
    _admin(req)
    sim.net.remove_route(route)
    return deleted()


# -- IP ranges ------------------------------------------------------------------------------------


def _range_json(sim: Simulator, r: IPRange) -> dict[str, Any]:
    owner = sim.users.get(r.user or "")
    return sim.net.range_json(r, user_json(owner) if owner else None)


def _iprange(sim: Simulator, req: Request, edit: bool = False) -> IPRange:
    """``get_iprange_or_404``; editing needs the owner or an admin."""
    ref = req.params["id"]
    iprange = sim.net.ranges.get(int(ref)) if ref.isdigit() else None
    if iprange is None:
        raise ApiError(404, "No IPRange matches the given query.")
    assert req.user is not None
    if edit and not req.user.is_superuser and iprange.user != req.user.username:
        raise ApiError(403, "Unable to modify IP range. You don't own the IP range.")
    return iprange


def ipranges(sim: Simulator, req: Request) -> Any:
    return [_range_json(sim, r) for r in sorted(sim.net.ranges.values(), key=lambda r: r.id)]


def iprange_read(sim: Simulator, req: Request) -> Any:
    return _range_json(sim, _iprange(sim, req))


def iprange_create(sim: Simulator, req: Request) -> Any:
    """``POST ipranges/``: ``type`` (dynamic needs an admin), ``start_ip``, ``end_ip``,
    ``subnet`` (else the best subnet for ``start_ip``), ``comment``; owned by the caller. Its
    addresses are never handed out from then on."""
    assert req.user is not None
    data = form_data(req)
    if data.get("type") == "dynamic" and not req.user.is_superuser:
        raise ApiError(
            403, "Unable to create dynamic IP range. You don't have sufficient privileges."
        )
    new = ip_range_form(sim, data, None, req.user.username)
    iprange = IPRange(max([0, *sim.net.ranges]) + 1, **new)
    sim.net.add_range(iprange)
    return _range_json(sim, iprange)


def iprange_update(sim: Simulator, req: Request) -> Any:
    iprange = _iprange(sim, req, edit=True)
    new = ip_range_form(sim, form_data(req), iprange, iprange.user)
    sim.net.remove_range(iprange)
    for key, value in new.items():
        setattr(iprange, key, value)
    sim.net.add_range(iprange)
    return _range_json(sim, iprange)


def iprange_delete(sim: Simulator, req: Request) -> Response:
    iprange = _iprange(sim, req, edit=True)
    sim.net.remove_range(iprange)
    return deleted()


# -- domains, zones, pools ------------------------------------------------------------------------


def domains(sim: Simulator, req: Request) -> Any:
    return [sim.net.domain_json(d) for d in sorted(sim.net.domains.values(), key=lambda d: d.id)]


def domain_read(sim: Simulator, req: Request) -> Any:
    ref = req.params["id"]
    domain = next(
        (d for d in sim.net.domains.values() if ref in (str(d.id), d.name, f"name:{d.name}")),
        None,
    )
    if domain is None:
        raise ApiError(404, "No Domain matches the given query.")
    return sim.net.domain_json(domain)


def zones(sim: Simulator, req: Request) -> Any:
    return [sim.net.zone_json(z) for z in sorted(sim.net.zones.values(), key=lambda z: z.id)]


def zone_read(sim: Simulator, req: Request) -> Any:
    zone = sim.net.zone_named(req.params["name"])
    if zone is None:
        raise ApiError(404, "No Zone matches the given query.")
    return sim.net.zone_json(zone)


def pools(sim: Simulator, req: Request) -> Any:
    return [sim.net.pool_json(p) for p in sorted(sim.net.pools.values(), key=lambda p: p.id)]


def pool_read(sim: Simulator, req: Request) -> Any:
    ref = req.params["id"]
    pool = next((p for p in sim.net.pools.values() if ref in (str(p.id), p.name)), None)
    if pool is None:
        raise ApiError(404, "No ResourcePool matches the given query.")
    return sim.net.pool_json(pool)


# -- devices and the rack controller --------------------------------------------------------------


def devices(sim: Simulator, req: Request) -> Any:
    return [device_json(sim, d) for d in sim.devices.values()]


def device_read(sim: Simulator, req: Request) -> Any:
    d = sim.devices.get(req.params["system_id"])
    if d is None:
        raise ApiError(404, "No Device matches the given query.")
    return device_json(sim, d)


def device_delete(sim: Simulator, req: Request) -> Response:
    d = sim.devices.get(req.params["system_id"])
    if d is None:
        raise ApiError(404, "No Device matches the given query.")
    require(req.user, "edit", d)
    for iface in d.interfaces:
        clear_links(sim.net, iface)
    del sim.devices[d.system_id]
    return deleted()


def rack_controllers(sim: Simulator, req: Request) -> Any:
    return [rack_json(sim)] if sim.rack_controller else []


def rack_controller_read(sim: Simulator, req: Request) -> Any:
    if req.params["system_id"] != sim.rack.system_id or not sim.rack_controller:
        raise ApiError(404, "No RackController matches the given query.")
    return rack_json(sim)

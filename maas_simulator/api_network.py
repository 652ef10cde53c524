"""Site network handlers: fabrics, VLANs, spaces, subnets, static routes, domains, zones,
resource pools, devices and the rack controller (MAAS 3.5's ``api/fabrics.py``, ``vlans.py``,
``subnets.py``, ``staticroutes.py`` and the other site handlers). Node interfaces are in
``api_interfaces``."""

from __future__ import annotations

from typing import Any

from maas_domain.maas.status import NodeStatus
from maas_simulator.errors import ApiError
from maas_simulator.interfaces import clear_links
from maas_simulator.model import Simulator
from maas_simulator.render import device_json, rack_json
from maas_simulator.wire import (
    Request,
    Response,
    deleted,
    require,
)

S = NodeStatus
CHOICE = "Select a valid choice. That choice is not one of the available choices."


# -- fabrics, VLANs, spaces, subnets, routes ----------------------------------------------------


def fabrics(sim: Simulator, req: Request) -> Any:
    return [sim.net.fabric_json(f) for f in sorted(sim.net.fabrics.values(), key=lambda f: f.id)]


def _fabric(sim: Simulator, ref: str) -> Any:
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


def vlan_read(sim: Simulator, req: Request) -> Any:
    """``vlans/{id}/`` by VLAN id, ``fabrics/{fabric_id}/vlans/{vid}/`` by fabric and VID."""
    if "vlan_id" in req.params:
        ref = req.params["vlan_id"]
        vlan = sim.net.vlans.get(int(ref)) if ref.isdigit() else None
    else:
        fabric = _fabric(sim, req.params["fabric_id"])
        vid = req.params["vid"]
        vlan = next(
            (
                v
                for v in sim.net.vlans.values()
                if v.fabric_id == fabric.id and vid.isdigit() and v.vid == int(vid)
            ),
            None,
        )
    if vlan is None:
        raise ApiError(404, "No VLAN matches the given query.")
    return sim.net.vlan_json(vlan.id)


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


def static_routes(sim: Simulator, req: Request) -> Any:
    return [sim.net.route_json(r) for r in sorted(sim.net.routes.values(), key=lambda r: r.id)]


def static_route_read(sim: Simulator, req: Request) -> Any:
    ref = req.params["id"]
    route = sim.net.routes.get(int(ref)) if ref.isdigit() else None
    if route is None:
        raise ApiError(404, "No StaticRoute matches the given query.")
    return sim.net.route_json(route)


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
    return [rack_json(sim)]


def rack_controller_read(sim: Simulator, req: Request) -> Any:
    if req.params["system_id"] != sim.rack.system_id:
        raise ApiError(404, "No RackController matches the given query.")
    return rack_json(sim)

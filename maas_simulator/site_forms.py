"""MAAS's forms for the site network writes: ``VLANForm``, ``StaticRouteForm`` and
``IPRangeForm`` with the model checks behind them (MAAS 3.5's ``forms/vlan.py``,
``forms/staticroute.py``, ``forms/iprange.py``, ``models/vlan.py``, ``models/staticroute.py``,
``models/iprange.py``; docs/simulator.md, "Site network writes").

Each form takes the request's fields and the object it edits (None to create), and answers the
values to set or raises MAAS's 400 with its field errors. As MAAS's ``APIEditMixin``, a field
left out of an update keeps its value.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from maas_simulator.errors import invalid
from maas_simulator.model import Simulator
from maas_simulator.network import Fabric, IPRange, StaticRoute, Subnet, Vlan
from maas_simulator.wire import CHOICE, REQUIRED, checkbox, ip_field, whole_number

MODEL_NAME = re.compile(r"\w[ \w-]*")  # MODEL_NAME_VALIDATOR
RANGE_TYPES = ("dynamic", "reserved")


def _specifier(
    data: dict[str, str],
    name: str,
    errors: dict[str, list[str]],
    by_id: dict[int, Any],
    find: Callable[[str], Any],
) -> Any:
    """``SpecifierOrModelChoiceField``: an id (``None found with id=N.`` when unknown) or a
    specifier ``find`` resolves (a name; a subnet's ``cidr:``, ``vlan:``, …); "" clears it."""
    value = data[name].strip()
    if value == "":
        return None
    if value.isdigit():
        if int(value) in by_id:
            return by_id[int(value)]
        errors[name] = [f"None found with id={value}."]
        return None
    found = find(value)
    if found is None:
        errors[name] = [CHOICE]
    return found


def _named(objects: dict[int, Any]) -> Callable[[str], Any]:
    """A name, or ``name:<name>``."""
    return lambda ref: next(
        (o for o in objects.values() if o.name == ref.removeprefix("name:")), None
    )


def _rack(sim: Simulator, value: str, vid: int | None) -> str | None:
    """``NodeChoiceField`` over the racks connected to a VLAN of this VID (by system id or
    hostname); a new VLAN has no VID yet, so no rack can be chosen when creating one."""
    rack = sim.rack
    connected = vid is not None and any(
        i.vlan_id in sim.net.vlans and sim.net.vlans[i.vlan_id].vid == vid for i in rack.interfaces
    )
    if connected and value in (rack.system_id, rack.hostname):
        return rack.system_id
    raise ValueError(f"Select a valid choice. {value} is not one of the available choices.")


def vlan_form(
    sim: Simulator, data: dict[str, str], vlan: Vlan | None, fabric: Fabric
) -> dict[str, Any]:
    """``VLANForm`` and ``VLAN.clean``: the VLAN's new fields (``fabric_id`` included)."""
    net = sim.net
    errors: dict[str, list[str]] = {}
    old = vlan or Vlan(0, fabric.id, vid=-1, name=None, dhcp_on=False, primary_rack=None)
    new: dict[str, Any] = {
        "name": old.name,
        "description": old.description,
        "vid": old.vid,
        "mtu": old.mtu,
        "dhcp_on": old.dhcp_on,
        "primary_rack": old.primary_rack,
        "secondary_rack": old.secondary_rack,
        "relay_vlan": old.relay_vlan,
        "space": old.space,
        "fabric_id": fabric.id,
    }
    if "name" in data:
        name = data["name"].strip()
        if len(name) > 256:
            errors["name"] = [f"Ensure this value has at most 256 characters (it has {len(name)})."]
        elif name and not MODEL_NAME.fullmatch(name):
            errors["name"] = ["Enter a valid value."]
        new["name"] = name or None
    if "description" in data:
        new["description"] = data["description"]
    if "vid" in data and data["vid"].strip():
        new["vid"] = whole_number(data, "vid", errors)
    elif vlan is None:
        errors["vid"] = [REQUIRED]
    if data.get("mtu", "").strip():
        new["mtu"] = whole_number(data, "mtu", errors, minimum=552)
    if "dhcp_on" in data:
        new["dhcp_on"] = checkbox(data["dhcp_on"])
    for key in ("primary_rack", "secondary_rack"):
        if key in data:
            try:
                new[key] = (
                    _rack(sim, data[key], None if vlan is None else old.vid) if data[key] else None
                )
            except ValueError as exc:
                errors[key] = [str(exc)]
    if "relay_vlan" in data:
        # VLANs not relaying themselves, not this one; none while this one serves DHCP (but the
        # relay it already has).
        if old.dhcp_on and vlan is not None:
            choices: set[int] = {old.relay_vlan} if old.relay_vlan is not None else set()
        else:
            choices = {v.id for v in net.vlans.values() if v.relay_vlan is None} - {old.id}
        value = data["relay_vlan"].strip()
        if value == "":
            new["relay_vlan"] = None
        elif value.isdigit() and int(value) in choices:
            new["relay_vlan"] = int(value)
        else:
            errors["relay_vlan"] = [CHOICE]
    if "space" in data:
        given = {**data, "space": "" if data["space"] == "undefined" else data["space"]}
        space = _specifier(given, "space", errors, net.spaces, _named(net.spaces))
        new["space"] = space.name if space is not None else None
    if "fabric" in data:
        moved = _specifier(data, "fabric", errors, net.fabrics, _named(net.fabrics))
        if moved is not None:
            new["fabric_id"] = moved.id
    # clean_dhcp_on. MAAS re-checks a VLAN's DHCP at every update; a scenario VLAN may serve
    # DHCP without a dynamic range, so here the rule applies when a request sets dhcp_on.
    if (
        new["dhcp_on"]
        and "dhcp_on" in data
        and not (vlan is not None and net.has_dynamic_range(vlan.id))
    ):
        errors["dhcp_on"] = ["dhcp can only be turned on when a dynamic IP range is defined."]
        new["dhcp_on"] = None
    general = _vlan_racks(new, old, errors)
    if general:
        errors["__all__"] = general
    if "vid" not in errors and new["vid"] is not None and not 0 <= new["vid"] <= 4094:
        errors["vid"] = ["VID must be between 0 and 4094."]
    if "mtu" not in errors and new["mtu"] is not None and new["mtu"] > 65535:
        errors["mtu"] = ["MTU must be between 552 and 65535."]
    clash = any(
        v.fabric_id == new["fabric_id"] and v.vid == new["vid"] and v is not vlan
        for v in net.vlans.values()
    )
    if clash and "vid" not in errors and "fabric" not in errors:
        errors.setdefault("__all__", []).append(
            "A VLAN with the specified VID already exists in the destination fabric."
        )
    if errors:
        raise invalid(errors)
    if new["dhcp_on"]:
        new["relay_vlan"] = None  # relay_vlan cannot be set when DHCP is on
    return new


def _vlan_racks(new: dict[str, Any], old: Vlan, errors: dict[str, list[str]]) -> list[str]:
    """``VLANForm.clean``: the secondary is promoted when the primary goes; one rack cannot be
    both; DHCP needs a primary rack."""
    if "primary_rack" in errors or "secondary_rack" in errors:
        return []
    if not new["primary_rack"] and old.secondary_rack is not None:
        new["primary_rack"], new["secondary_rack"] = old.secondary_rack, None
    if new["primary_rack"] and new["primary_rack"] == old.secondary_rack:
        new["secondary_rack"] = None
    if new["secondary_rack"] and new["secondary_rack"] == old.primary_rack:
        return [f"{new['secondary_rack']} is already set as the primary rack controller"]
    if new["primary_rack"] and new["primary_rack"] == new["secondary_rack"]:
        return ["The primary and secondary rack must be different"]
    if new["dhcp_on"] and not new["primary_rack"] and not old.primary_rack:
        return ["dhcp can only be turned on when a primary rack controller is set."]
    return []


def static_route_form(
    sim: Simulator, data: dict[str, str], route: StaticRoute | None
) -> tuple[int, int, str, int]:
    """``StaticRouteForm`` and ``StaticRoute.clean``: (source, destination, gateway, metric)."""
    net = sim.net
    errors: dict[str, list[str]] = {}
    ends: dict[str, Subnet | None] = {}
    for key in ("source", "destination"):
        current = getattr(route, key) if route is not None else None
        if key in data and data[key].strip():
            ends[key] = _specifier(data, key, errors, net.subnets, net.subnet_by_ref)
            if ends[key] is None and key not in errors:
                errors[key] = [REQUIRED]
        elif current is not None and key not in data:
            ends[key] = net.subnets.get(current)
        else:
            ends[key] = None
            errors[key] = [REQUIRED]
    if "gateway_ip" in data or route is None:
        gateway = ip_field(data, "gateway_ip", errors)
        if gateway is None and "gateway_ip" not in errors:
            errors["gateway_ip"] = [REQUIRED]
    else:
        gateway = route.gateway_ip
    metric = whole_number(data, "metric", errors, minimum=0)
    if metric is None:
        metric = route.metric if route is not None and "metric" not in data else 0
    source, destination = ends["source"], ends["destination"]
    if gateway is not None and source is not None and not source.contains(gateway):
        errors.setdefault("gateway_ip", []).append(f"Enter an IP address in {source.cidr}.")
    if source is not None and destination is not None:
        if source is destination:
            errors["__all__"] = ["source and destination cannot be the same subnet."]
        elif source.network.version != destination.network.version:
            errors["__all__"] = ["source and destination must be the same IP version."]
        elif gateway is not None and not source.contains(gateway):
            errors["__all__"] = ["gateway_ip must be with in the source subnet."]
        elif not errors and any(
            (r.source, r.destination, r.gateway_ip) == (source.id, destination.id, gateway)
            for r in net.routes.values()
            if r is not route
        ):
            errors["__all__"] = [
                "Static route with this Source, Destination and Gateway IP already exists."
            ]
    if errors:
        raise invalid(errors)
    assert source is not None and destination is not None and gateway is not None
    return source.id, destination.id, gateway, metric


def ip_range_form(
    sim: Simulator, data: dict[str, str], iprange: IPRange | None, username: str | None
) -> dict[str, Any]:
    """``IPRangeForm`` and ``IPRange.clean``: subnet (the best one for ``start_ip`` when not
    given on create), type, start and end, comment, owner."""
    net = sim.net
    errors: dict[str, list[str]] = {}
    old = iprange or IPRange(0, -1, "", "", "", "", username)
    new: dict[str, Any] = {
        "subnet_id": old.subnet_id,
        "type": old.type,
        "start_ip": old.start_ip,
        "end_ip": old.end_ip,
        "comment": old.comment,
        "user": old.user,
    }
    for key in ("start_ip", "end_ip"):
        if key in data or iprange is None:
            new[key] = ip_field(data, key, errors)
            if new[key] is None and key not in errors:
                errors[key] = [REQUIRED]
    subnet_ref = data.get("subnet", "").strip()
    if not subnet_ref and iprange is None and new["start_ip"]:
        best = net.best_subnet_for_ip(new["start_ip"])
        subnet_ref = str(best.id) if best is not None else ""
    if subnet_ref:
        if subnet_ref.isdigit() and int(subnet_ref) in net.subnets:
            new["subnet_id"] = int(subnet_ref)
        else:
            errors["subnet"] = [CHOICE]
    elif iprange is None or "subnet" in data:
        errors["subnet"] = [REQUIRED]
    if "type" in data or iprange is None:
        kind = data.get("type", "")
        if not kind:
            errors["type"] = [REQUIRED]
        elif kind not in RANGE_TYPES:
            errors["type"] = [f"Select a valid choice. {kind} is not one of the available choices."]
        new["type"] = kind
    if "comment" in data:
        new["comment"] = data["comment"]
        if len(data["comment"]) > 255:
            errors["comment"] = [
                f"Ensure this value has at most 255 characters (it has {len(data['comment'])})."
            ]
    problem = _range_problem(sim, new, iprange)
    for key, message in problem.items():
        errors.setdefault(key, []).append(message)
    if errors:
        raise invalid(errors)
    return new


def _range_problem(sim: Simulator, new: dict[str, Any], iprange: IPRange | None) -> dict[str, str]:
    """``IPRange.clean``: the first problem, under the fields MAAS names."""
    both = ("start_ip", "end_ip")
    if not new["start_ip"] or not new["end_ip"]:
        return dict.fromkeys(both, "Start IP address and end IP address are both required.")
    start, end = ipaddress.ip_address(new["start_ip"]), ipaddress.ip_address(new["end_ip"])
    if start.version != end.version:
        return dict.fromkeys(
            both, "Start IP address and end IP address must be in the same address family."
        )
    if int(end) < int(start):
        return {"end_ip": "End IP address must not be less than Start IP address."}
    subnet = sim.net.subnets.get(new["subnet_id"])
    if subnet is None:
        return {}
    cidr = subnet.cidr
    if start not in subnet.network and end not in subnet.network:
        return dict.fromkeys(both, f"IP addresses must be within subnet: {cidr}.")
    if start not in subnet.network:
        return {"start_ip": f"Start IP address must be within subnet: {cidr}."}
    if end not in subnet.network:
        return {"end_ip": f"End IP address must be within subnet: {cidr}."}
    if start == subnet.network.network_address:
        return {"start_ip": "Reserved network address cannot be included in IP range."}
    if subnet.network.version == 4 and end == subnet.network.broadcast_address:
        return {"end_ip": "Broadcast address cannot be included in IP range."}
    kind = new["type"]
    if start.version == 6 and kind == "dynamic" and int(end) - int(start) + 1 < 256:
        return dict.fromkeys(both, "IPv6 dynamic range must be at least 256 addresses in size.")
    if kind not in RANGE_TYPES:
        return {}
    unused = subnet.unused(kind, exclude=iprange)
    if not unused:
        return dict.fromkeys(both, f"There is no room for any {kind} ranges on this subnet.")
    if any(lo <= int(start) and int(end) <= hi for lo, hi in unused):
        return {}
    what = "range." if kind == "reserved" else "IP address or range."
    return dict.fromkeys(both, f"Requested {kind} range conflicts with an existing {what}")

"""Interface handlers: a node's interfaces and their links (MAAS 3.5's ``api/interfaces.py``,
``forms/interface.py``, ``forms/interface_link.py``; docs/simulator.md, "Networking")."""

from __future__ import annotations

import ipaddress
from typing import Any

from maas_client.status import INTERFACE_EDITABLE, NodeStatus
from maas_simulator.errors import ApiError, conflict, invalid
from maas_simulator.interface_forms import create_bond, create_bridge, create_vlan
from maas_simulator.interfaces import (
    LINK_MODES,
    Interface,
    Link,
    clear_links,
    ensure_link_up,
    release_ip,
)
from maas_simulator.model import Simulator
from maas_simulator.network import Subnet
from maas_simulator.nodes import Device, Machine, Node, RackController
from maas_simulator.render import node_interface_json
from maas_simulator.wire import (
    Request,
    checkbox,
    form_data,
    invalid_choice,
    node_or_404,
    null_boolean,
    require,
    string_bool,
)

S = NodeStatus
CHOICE = "Select a valid choice. That choice is not one of the available choices."


# -- interfaces -----------------------------------------------------------------------------------


def interfaces_list(sim: Simulator, req: Request) -> Any:
    node = node_or_404(sim, req)
    return [node_interface_json(sim, node, i) for i in node.interfaces]


def _interface(sim: Simulator, req: Request) -> tuple[Node, Interface]:
    node = node_or_404(sim, req)
    for iface in node.interfaces:
        if str(iface.id) == req.params["id"] or iface.name == req.params["id"]:
            return node, iface
    raise ApiError(404, "No Interface matches the given query.")


def _editable_interface(sim: Simulator, req: Request, controller_op: str) -> tuple[Node, Interface]:
    """``get_interface_or_404(..., admin, edit)``: admin rights on a machine or controller, edit
    rights on a device; controllers refuse link edits."""
    node, iface = _interface(sim, req)
    require(req.user, "edit" if isinstance(node, Device) else "admin", node)
    if controller_op and isinstance(node, RackController):
        raise ApiError(403, f"Cannot {controller_op} interface on a controller.")
    return node, iface


def _allowed_state(node: Node, operation: str, extra: tuple[NodeStatus, ...] = ()) -> None:
    if node.node_type == 0 and node.status not in INTERFACE_EDITABLE and node.status not in extra:
        raise conflict(
            f"Cannot {operation} interface because the machine is not "
            "New, Ready, Allocated, or Broken."
        )


def _machine_to_build_on(sim: Simulator, req: Request, operation: str) -> Machine:
    """``Machine.objects.get_node_or_404(..., admin)`` (a device or controller is no Machine:
    404), then the machine's status."""
    m = sim.machines.get(req.params["system_id"])
    if m is None:
        raise ApiError(404, "No Machine matches the given query.")
    require(req.user, "admin", m)
    _allowed_state(m, operation)
    return m


def _single_parent(req: Request) -> list[str]:
    """``create_vlan`` and ``create_bridge`` copy ``parent`` (its last value) to ``parents``."""
    return req.data["parent"][-1:] if "parent" in req.data else req.data.get("parents", [])


def interfaces_create_bond(sim: Simulator, req: Request) -> Any:
    m = _machine_to_build_on(sim, req, "create bond")
    bond = create_bond(sim, m, form_data(req), req.data.get("parents", []))
    return node_interface_json(sim, m, bond)


def interfaces_create_vlan(sim: Simulator, req: Request) -> Any:
    m = _machine_to_build_on(sim, req, "create VLAN")
    iface = create_vlan(sim, m, form_data(req), _single_parent(req))
    return node_interface_json(sim, m, iface)


def interfaces_create_bridge(sim: Simulator, req: Request) -> Any:
    m = _machine_to_build_on(sim, req, "create bridge")
    bridge = create_bridge(
        sim, m, form_data(req), _single_parent(req), acquired=m.status == S.ALLOCATED
    )
    return node_interface_json(sim, m, bridge)


def interface_read(sim: Simulator, req: Request) -> Any:
    node, iface = _interface(sim, req)
    return node_interface_json(sim, node, iface)


def _int_field(req: Request, name: str, minimum: int, errors: dict[str, list[str]]) -> int | None:
    value = req.data.get(name, [None])[0]
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        errors[name] = ["Enter a whole number."]
        return None
    if number < minimum:
        errors[name] = [f"Ensure this value is greater than or equal to {minimum}."]
        return None
    return number


def interface_update(sim: Simulator, req: Request) -> Any:
    """``PUT``: Ready/Allocated/Broken machines take every field (name, mac_address, vlan, mtu,
    tags, enabled, link_connected, speeds); a Deployed machine only name, mac_address and the
    link fields; a controller only vlan and the link fields."""
    node, iface = _editable_interface(sim, req, "")
    _allowed_state(node, "update interface", (S.DEPLOYED,))
    deployed = node.node_type == 0 and node.status == S.DEPLOYED
    controller = isinstance(node, RackController)
    allowed = {"link_connected", "interface_speed", "link_speed"}
    if not controller:
        allowed |= {"name", "mac_address"}
    if controller or not deployed:
        allowed |= {"vlan"}
    if not controller and not deployed:
        allowed |= {"mtu", "tags", "enabled", "accept_ra"}
    data = {k: v[0] for k, v in req.data.items() if k in allowed and v}
    errors: dict[str, list[str]] = {}
    mtu = _int_field(req, "mtu", 552, errors) if "mtu" in data else None
    speeds = {
        k: _int_field(req, k, 0, errors) for k in ("interface_speed", "link_speed") if k in data
    }
    name = data.get("name")
    if name is not None and any(i.name == name and i is not iface for i in node.interfaces):
        errors.setdefault("name", []).append(
            f"Node {node.system_id} ({node.hostname}) already has an interface named '{name}'."
        )
    mac = data.get("mac_address")
    if mac is not None:
        mac = mac.lower().replace("-", ":")
        # PhysicalInterface.clean: a MAC is unique among physical interfaces only; a bond,
        # bridge or VLAN interface shares its parent's (recorded against MAAS 3.5.10)
        owner = next(
            (
                (i, n)
                for n in sim.all_nodes()
                for i in n.interfaces
                if i.mac_address == mac and i is not iface and i.type == "physical"
            ),
            None,
        )
        if owner is not None and iface.type == "physical":
            other, where = owner
            errors.setdefault("mac_address", []).append(
                f"This MAC address is already in use by {other.name} ({other.type}) on "
                f"{where.hostname}."
            )
    vlan_id: int | None = iface.vlan_id
    if "vlan" in data:
        ref = data["vlan"]
        if ref == "":
            vlan_id = None
        elif ref.isdigit() and int(ref) in sim.net.vlans:
            vlan_id = int(ref)
        else:
            errors.setdefault("vlan", []).append(CHOICE)
    # BooleanField: "0" is true; NullBooleanField: anything but true/false (2/3) is None, left
    # out of the save as MAAS's MAASModelForm drops None values
    link_connected = checkbox(data["link_connected"]) if "link_connected" in data else None
    enabled = null_boolean(data.get("enabled"))
    if (
        link_connected is False
        and not iface.link_connected
        and speeds.get("link_speed") not in (None, 0)
    ):
        errors.setdefault("__all__", []).append(
            "link_speed cannot be set when link_connected is false."
        )
    if errors:
        raise invalid(errors)
    if name:
        iface.name = name
    if mac:
        iface.mac_address = mac
    if "mtu" in data:
        iface.mtu = mtu
    if "tags" in data:
        iface.tags = [t for t in (x.strip() for x in data["tags"].split(",")) if t]
    if enabled is not None:
        iface.enabled = enabled
    if link_connected is not None:
        iface.link_connected = link_connected
    for key, value in speeds.items():
        if value is not None:
            setattr(iface, key, value)
    if vlan_id != iface.vlan_id:
        if not controller:
            clear_links(sim.net, iface)  # interface_vlan_update: a new VLAN drops every link
        iface.vlan_id = vlan_id
        if iface.type in ("bond", "bridge"):  # _update_parents: the parents follow
            for parent in (i for i in node.interfaces if i.id in iface.parents):
                clear_links(sim.net, parent)
                parent.vlan_id = vlan_id
    node.touch(sim.now())
    return node_interface_json(sim, node, iface)


def _subnet_field(sim: Simulator, iface: Interface, ref: str, force: bool) -> Subnet:
    """``SpecifierOrModelChoiceField`` over the interface's VLAN (any VLAN with ``force`` or
    when the interface is disconnected)."""
    within = (
        None
        if iface.vlan_id is None or force
        else {s.id for s in sim.subnets.values() if s.vlan_id == iface.vlan_id}
    )
    if ref.isdigit():
        subnet = sim.subnets.get(int(ref))
        if subnet is None or (within is not None and subnet.id not in within):
            raise invalid({"subnet": [f"None found with id={ref}."]})
        return subnet
    found = sim.net.subnet_by_ref(ref, within)
    if found is None:
        raise invalid({"subnet": [CHOICE]})
    return found


def subnet_label(sim: Simulator, subnet: Subnet) -> str:
    """``str(Subnet)``: ``name:cidr(vid=N)``."""
    return f"{subnet.name}:{subnet.cidr}(vid={sim.net.vlans[subnet.vlan_id].vid})"


def interface_link_subnet(sim: Simulator, req: Request) -> Any:
    node, iface = _editable_interface(sim, req, "link subnet")
    _allowed_state(node, "link subnet")
    force = string_bool(req.form, "force")  # get_optional_param(request.POST, StringBool)
    mode = (req.get("mode") or "").lower()
    if not mode:
        raise invalid({"mode": ["This field is required."]})
    if mode not in LINK_MODES:
        raise invalid_choice("mode", mode, list(LINK_MODES))
    ref = req.get("subnet")
    subnet = _subnet_field(sim, iface, ref, force) if ref else None
    ip = req.get("ip_address")
    errors: dict[str, list[str]] = {}
    if ip:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            errors["ip_address"] = ["Enter a valid IPv4 or IPv6 address."]
    if mode in ("auto", "static") and subnet is None:
        errors.setdefault("subnet", []).append("This field is required.")
    if mode == "dhcp" and any(link.mode == "dhcp" for link in iface.links):
        dhcp = next(link for link in iface.links if link.mode == "dhcp")
        on = sim.subnets.get(dhcp.subnet_id or -1)
        errors.setdefault("mode", []).append(
            f"Interface is already set to DHCP from '{subnet_label(sim, on)}'."
            if on
            else "Interface is already set to DHCP."
        )
    if (
        mode == "static"
        and subnet is not None
        and ip
        and "ip_address" not in errors
        and not subnet.contains(ip)
    ):
        errors.setdefault("ip_address", []).append(
            f"IP address is not in the given subnet '{subnet_label(sim, subnet)}'."
        )
    if mode == "static" and subnet is not None and ip and "ip_address" not in errors:
        dynamic = subnet.range_at(int(ipaddress.ip_address(ip)), "dynamic")
        if dynamic is not None:
            errors["ip_address"] = [
                f"IP address is inside a dynamic range {dynamic.start_ip} to {dynamic.end_ip}."
            ]
    if mode == "link_up" and not force and any(link.mode != "link_up" for link in iface.links):
        errors.setdefault("mode", []).append(
            "Cannot configure interface to link up (with no IP address) while other links are "
            "already configured. Specify force=True to override this behavior and delete all "
            "links."
        )
    if checkbox(form_data(req).get("default_gateway", "")):  # InterfaceLinkForm BooleanField
        if mode not in ("auto", "static"):
            errors.setdefault("default_gateway", []).append(f"Cannot use in mode '{mode}'.")
        elif subnet is not None and not subnet.gateway_ip:
            errors.setdefault("default_gateway", []).append(
                "Cannot set as default gateway because subnet "
                f"{subnet_label(sim, subnet)} doesn't provide a gateway IP address."
            )
    if errors:
        raise invalid(errors)
    if mode == "static" and subnet is not None:
        if ip and subnet.is_taken(ip):
            raise ApiError(404, "IP address is already in use.")
        address = ip or subnet.allocate()
        if address is None:
            raise ApiError(503, f"No more IPs available in subnet: {subnet.cidr}.")
        subnet.take(address)
    else:
        address = None
    if mode == "link_up" or force:
        clear_links(sim.net, iface)
        if force and subnet is not None:
            iface.vlan_id = None  # the subnet's VLAN is taken below
    if iface.vlan_id is None and subnet is not None:
        iface.vlan_id = subnet.vlan_id
    keep = []
    for link in iface.links:
        if link.mode == "link_up" or (mode in ("auto", "dhcp", "static") and link.mode == "dhcp"):
            release_ip(sim.net, link)
        else:
            keep.append(link)
    iface.links = keep
    iface.links.append(Link(sim.new_id(), mode, subnet.id if subnet else None, address))
    node.touch(sim.now())
    return node_interface_json(sim, node, iface)


def interface_unlink_subnet(sim: Simulator, req: Request) -> Any:
    node, iface = _editable_interface(sim, req, "link subnet")  # sic: MAAS's text
    _allowed_state(node, "unlink subnet")
    link_id = req.get("id")
    ids = [str(link.id) for link in iface.links]
    if not link_id:
        raise invalid({"id": ["This field is required."]})
    if link_id not in ids:
        raise invalid_choice("id", link_id, ids)
    keep = []
    for link in iface.links:
        if str(link.id) == link_id:
            release_ip(sim.net, link)
        else:
            keep.append(link)
    iface.links = keep
    ensure_link_up(iface, sim.new_id)
    node.touch(sim.now())
    return node_interface_json(sim, node, iface)


def interface_disconnect(sim: Simulator, req: Request) -> Any:
    """Deletes every link and address, and takes the NIC off its VLAN."""
    node, iface = _editable_interface(sim, req, "disconnect")
    _allowed_state(node, "disconnect")
    clear_links(sim.net, iface)
    iface.vlan_id = None
    node.touch(sim.now())
    return node_interface_json(sim, node, iface)

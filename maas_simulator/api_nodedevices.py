"""Node devices: ``nodes/{system_id}/devices/`` and ``…/devices/{id}/`` (MAAS 3.5's
``nodedevices.py``; docs/simulator.md, "Hardware")."""

from __future__ import annotations

from typing import Any

from maas_simulator.errors import ApiError
from maas_simulator.hardware import (
    BadChoice,
    NodeDevice,
    node_device_json,
    translate_bus,
    translate_hardware_type,
)
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine
from maas_simulator.render import node_interface_json
from maas_simulator.wire import Request, Response, deleted, node_or_404

TEXT_FILTERS = ("vendor_id", "product_id", "vendor_name", "product_name", "commissioning_driver")


def _devices(sim: Simulator, req: Request) -> list[NodeDevice]:
    """A machine's devices; MAAS records none here for devices and the rack controller."""
    node = node_or_404(sim, req)
    return list(sim.node_devices(node)) if isinstance(node, Machine) else []


def _query(req: Request, name: str) -> str | None:
    """``get_optional_param(request.GET, …)``: the query string only, its first value."""
    values = req.query.get(name)
    return values[0] if values else None


def nodedevices_list(sim: Simulator, req: Request) -> Any:
    """The node's devices, filtered by ``bus``, ``hardware_type`` (a name or a number) and the
    exact, case-insensitive ``vendor_id``, ``product_id``, ``vendor_name``, ``product_name``,
    ``commissioning_driver``. A refused bus or type is a 400 with MAAS's text."""
    devices = _devices(sim, req)
    try:
        bus = _query(req, "bus")
        if bus is not None:
            wanted_bus = translate_bus(bus)
            devices = [d for d in devices if d.bus == wanted_bus]
        kind = _query(req, "hardware_type")
        if kind is not None:
            wanted_kind = translate_hardware_type(kind)
            devices = [d for d in devices if d.hardware_type == wanted_kind]
    except BadChoice as exc:
        raise ApiError(400, str(exc)) from exc
    for name in TEXT_FILTERS:
        value = _query(req, name)
        if value is not None:
            devices = [d for d in devices if str(getattr(d, name) or "").lower() == value.lower()]
    system_id = req.params["system_id"]
    ifaces, disks = _nested(sim, req)
    return [
        node_device_json(system_id, d, ifaces, disks) for d in sorted(devices, key=lambda d: d.id)
    ]


def _nested(sim: Simulator, req: Request) -> tuple[dict[int, Any], dict[int, Any]]:
    """The interfaces and block devices node devices point to, as their own reads show them."""
    node = node_or_404(sim, req)
    if not isinstance(node, Machine):
        return {}, {}
    ifaces = {i.id: node_interface_json(sim, node, i) for i in node.interfaces}
    disks = {d.id: node.storage.device_json(node.system_id, d) for d in node.storage.physical}
    return ifaces, disks


def _device(sim: Simulator, req: Request) -> NodeDevice:
    """``_get_node_device``: a numeric id (404 when unknown), else ``bus:device`` or a PCI
    address; a lookup of the latter that does not find exactly one device is MAAS's 400
    ``Invalid id format!`` too (its 404 is caught with every other error there)."""
    devices = _devices(sim, req)
    ref = req.params["id"]
    if ref.isdigit():
        found = [d for d in devices if d.id == int(ref)]
        if not found:
            raise ApiError(404, "No NodeDevice matches the given query.")
        return found[0]
    parts = ref.split(":")
    try:
        if len(parts) == 2:
            bus_number, device_number = int(parts[0]), int(parts[1])
            found = [
                d
                for d in devices
                if d.bus_number == bus_number and d.device_number == device_number
            ]
        else:
            found = [d for d in devices if d.pci_address == ref]
    except ValueError:
        found = []
    if len(found) != 1:
        raise ApiError(400, "Invalid id format!")
    return found[0]


def nodedevice_read(sim: Simulator, req: Request) -> Any:
    return node_device_json(req.params["system_id"], _device(sim, req), *_nested(sim, req))


def nodedevice_delete(sim: Simulator, req: Request) -> Response:
    """Admins only; the device comes back at the next commissioning if it is still there."""
    device = _device(sim, req)
    node = node_or_404(sim, req)
    assert isinstance(node, Machine)  # others have no devices to find
    node.node_devices.remove(device)
    node.touch(sim.now())
    return deleted()

"""Storage handlers: block devices, partitions and volume groups of a machine (MAAS 3.5's
``blockdevices.py``, ``partitions.py``, ``volume_groups.py``). Reads, the boot disk, formatting,
mounting and tags are simulated; creating and deleting devices, partitions, volume groups and
logical volumes are not (docs/simulator.md)."""

from __future__ import annotations

import re
from typing import Any

from maas_domain.maas.status import NodeStatus
from maas_simulator.errors import ApiError, conflict, invalid
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine
from maas_simulator.storage import FORMATTABLE, BlockDevice, Filesystem, Partition
from maas_simulator.wire import Request, Response, mandatory, require, text

S = NodeStatus
ABSOLUTE_PATH = re.compile(r"(?:/[^/]*)*")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.I)


def _machine(
    sim: Simulator, req: Request, missing: str = "No Machine matches the given query."
) -> Machine:
    m = sim.machines.get(req.params["system_id"])
    if m is None:
        raise ApiError(404, missing)
    return m


def _device(
    sim: Simulator, req: Request, perm: str, key: str = "id"
) -> tuple[Machine, BlockDevice]:
    """``get_block_device_or_404``: by id or name, with the permission on its machine."""
    m = _machine(sim, req, "No BlockDevice matches the given query.")
    device = m.storage.device(req.params[key])
    if device is None:
        raise ApiError(404, "No BlockDevice matches the given query.")
    require(req.user, perm, m)
    return m, device


def _partition(sim: Simulator, req: Request, perm: str) -> tuple[Machine, BlockDevice, Partition]:
    m, device = _device(sim, req, perm, "device_id")
    partition = m.storage.partition(device, req.params["id"])
    if partition is None:
        raise ApiError(404, "No Partition matches the given query.")
    return m, device, partition


def _allocated_op(req: Request, m: Machine, what: str, operation: str) -> None:
    """``raise_error_for_invalid_state_on_allocated_operations``."""
    node_word = "machine" if what == "block device" else "node"
    if m.status not in (S.READY, S.ALLOCATED):
        raise conflict(
            f"Cannot {operation} {what} because the {node_word} is not Ready or Allocated."
        )
    assert req.user is not None
    if m.status == S.READY and not req.user.is_superuser:
        raise ApiError(
            403,
            f"Cannot {operation} {what} because you don't have the permissions on a Ready "
            f"{node_word}.",
        )


# -- block devices --------------------------------------------------------------------------------


def blockdevices_list(sim: Simulator, req: Request) -> Any:
    m = _machine(sim, req)
    return [m.storage.device_json(m.system_id, d) for d in m.storage.devices]


def blockdevice_read(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "view")
    return m.storage.device_json(m.system_id, device)


def blockdevice_set_boot_disk(sim: Simulator, req: Request) -> Response:
    m, device = _device(sim, req, "admin")
    if m.status != S.READY:
        raise conflict("Cannot set as boot disk because the machine is not Ready.")
    if device.kind != "physical":
        raise ApiError(400, f"Cannot set a {device.kind} block device as the boot disk.")
    m.storage.boot_disk_id = device.id
    m.touch(sim.now())
    return text(200, "OK")


def _tag_op(sim: Simulator, req: Request, add: bool) -> Any:
    m, device = _device(sim, req, "admin")
    if m.status != S.READY:
        raise conflict("Cannot update block device because the machine is not Ready.")
    tag = mandatory(req, "tag")
    if add and tag not in device.tags:
        device.tags.append(tag)
    if not add and tag in device.tags:
        device.tags.remove(tag)
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


def blockdevice_add_tag(sim: Simulator, req: Request) -> Any:
    return _tag_op(sim, req, True)


def blockdevice_remove_tag(sim: Simulator, req: Request) -> Any:
    return _tag_op(sim, req, False)


def _format_form(sim: Simulator, req: Request) -> Filesystem:
    fstype = req.get("fstype") or ""
    if not fstype:
        raise invalid({"fstype": ["This field is required."]})
    if fstype not in FORMATTABLE:
        raise invalid(
            {"fstype": [f"Select a valid choice. {fstype} is not one of the available choices."]}
        )
    given = req.get("uuid")
    if given and not UUID4.match(given):
        raise invalid({"uuid": ["Enter a valid UUID."]})
    return Filesystem(fstype, given or sim.new_uuid(), req.get("label") or None)


def blockdevice_format(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "edit")
    _allocated_op(req, m, "block device", "format")
    fs = _format_form(sim, req)
    if device.partitions is not None:
        raise invalid({"__all__": ["Cannot format block device with a partition table."]})
    if device.filesystem is not None and device.filesystem.fstype not in FORMATTABLE:
        raise invalid(
            {
                "__all__": [
                    "Cannot format a block device that has a filesystem type of "
                    f"{device.filesystem.fstype}."
                ]
            }
        )
    device.filesystem = fs
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


def _unformat(fs: Filesystem | None, what: str) -> None:
    if fs is None:
        raise ApiError(400, f"{what.capitalize()} is not formatted.")
    if fs.is_mounted:
        raise ApiError(
            400,
            "Filesystem is mounted and cannot be unformatted. Unmount the filesystem before "
            f"unformatting the {what}.",
        )
    if fs.vg_name is not None:
        raise ApiError(
            400,
            "Filesystem is part of a volume group, and cannot be unformatted. Remove "
            f"{what} from volume group before unformatting the {what}.",
        )


def blockdevice_unformat(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "edit")
    _allocated_op(req, m, "block device", "unformat")
    _unformat(device.filesystem, "block device")
    device.filesystem = None
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


def _mount(req: Request, fs: Filesystem | None) -> None:
    """``MountFilesystemForm``."""
    if fs is None:
        raise invalid({"__all__": ["Cannot mount an unformatted partition or block device."]})
    if fs.vg_name is not None:
        raise invalid(
            {"__all__": ["Filesystem is part of a filesystem group, and cannot be mounted."]}
        )
    point = (req.get("mount_point") or "").strip()  # Django's CharField strips
    if fs.fstype != "swap":
        if not point:
            raise invalid({"mount_point": ["This field is required."]})
        if not ABSOLUTE_PATH.fullmatch(point):
            raise invalid({"mount_point": ["Enter a valid value."]})
    fs.mount_point = point if fs.fstype != "swap" else "none"
    fs.mount_options = req.get("mount_options") or None


def _unmount(fs: Filesystem | None, what: str) -> None:
    if fs is None:
        raise ApiError(400, f"{what.capitalize()} is not formatted.")
    if not fs.is_mounted:
        raise ApiError(400, "Filesystem is already unmounted.")
    fs.mount_point = None
    fs.mount_options = None


def blockdevice_mount(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "edit")
    _allocated_op(req, m, "block device", "mount")
    _mount(req, device.filesystem)
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


def blockdevice_unmount(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "edit")
    _allocated_op(req, m, "block device", "unmount")
    _unmount(device.filesystem, "block device")
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


# -- partitions -----------------------------------------------------------------------------------


def partitions_list(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "view", "device_id")
    return [m.storage.partition_json(m.system_id, device, p) for p in device.partitions or []]


def partition_read(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "view")
    return m.storage.partition_json(m.system_id, device, partition)


def partition_format(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "format")
    fs = _format_form(sim, req)
    if partition.filesystem is not None and partition.filesystem.fstype not in FORMATTABLE:
        raise invalid(
            {
                "__all__": [
                    "Cannot format a partition that has a filesystem type of "
                    f"{partition.filesystem.fstype}."
                ]
            }
        )
    partition.filesystem = fs
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_unformat(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "unformat")
    _unformat(partition.filesystem, "partition")
    partition.filesystem = None
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_mount(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "mount")
    _mount(req, partition.filesystem)
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_unmount(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "unmount")
    _unmount(partition.filesystem, "partition")
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


# -- volume groups --------------------------------------------------------------------------------


def volume_groups_list(sim: Simulator, req: Request) -> Any:
    m = _machine(sim, req)
    return [m.storage.vg_json(m.system_id, vg) for vg in m.storage.vgs]


def volume_group_read(sim: Simulator, req: Request) -> Any:
    m = _machine(sim, req, "No VolumeGroup matches the given query.")
    vg = m.storage.vg(req.params["id"])
    if vg is None:
        raise ApiError(404, "No VolumeGroup matches the given query.")
    return m.storage.vg_json(m.system_id, vg)

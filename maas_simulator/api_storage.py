"""Storage handlers: block devices, partitions, volume groups and logical volumes of a machine
(MAAS 3.5's ``blockdevices.py``, ``partitions.py``, ``volume_groups.py`` and their forms):
reads, the boot disk, formatting, mounting, tags, and building a custom layout (partitions,
volume groups, logical volumes) on a Ready machine (docs/simulator.md, "Storage")."""

from __future__ import annotations

import re
from typing import Any

from maas_client.status import NodeStatus
from maas_simulator.errors import ApiError, conflict, invalid
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine
from maas_simulator.storage import (
    FORMATTABLE,
    MIN_BLOCK_DEVICE_SIZE,
    MIN_PARTITION_SIZE,
    BlockDevice,
    Filesystem,
    Partition,
    VolumeGroup,
    align_down,
)
from maas_simulator.wire import (
    Request,
    Response,
    byte_size,
    checkbox,
    deleted,
    form_data,
    mandatory,
    require,
    text,
)

S = NodeStatus
ABSOLUTE_PATH = re.compile(r"(?:/[^/]*)*")
UUID4_LOOSE = re.compile(
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?4[0-9a-fA-F]{3}-?[89abAB][0-9a-fA-F]{3}-?[0-9a-fA-F]{12}"
)
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


def _find_partition(m: Machine, ref: str) -> tuple[BlockDevice, Partition]:
    """``get_partition_by_id_or_name``: by id or ``<device>-part<N>``, on any of the
    machine's devices."""
    for d in m.storage.devices:
        for p in d.partitions or []:
            if ref == str(p.id) or ref == f"{d.name}-part{p.index}":
                return d, p
    raise ApiError(404, "No Partition matches the given query.")


def _partition(sim: Simulator, req: Request, perm: str) -> tuple[Machine, BlockDevice, Partition]:
    m, _ = _device(sim, req, perm, "device_id")
    return m, *_find_partition(m, req.params["id"])


def _ready(m: Machine, what: str, machine_word: str = "machine") -> None:
    if m.status != S.READY:
        raise conflict(f"Cannot {what} because the {machine_word} is not Ready.")


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
    old = m.storage.own_fs(device)  # save(): a ValidationError outside the form, a text 400
    if old is not None and old.fstype not in FORMATTABLE:
        raise ApiError(
            400, f"Cannot format a block device that has a filesystem type of {old.fstype}."
        )
    m.storage.set_fs(device, fs)
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
    _unformat(m.storage.fs(device), "block device")
    m.storage.set_fs(device, None)
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
    _mount(req, m.storage.fs(device))
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


def blockdevice_unmount(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "edit")
    _allocated_op(req, m, "block device", "unmount")
    _unmount(m.storage.fs(device), "block device")
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, device)


# -- partitions -----------------------------------------------------------------------------------


def partitions_list(sim: Simulator, req: Request) -> Any:
    m, device = _device(sim, req, "view", "device_id")
    return [m.storage.partition_json(m.system_id, device, p) for p in device.partitions or []]


def partition_create(sim: Simulator, req: Request) -> Any:
    """``POST …/partitions/`` (admin, Ready): ``size`` (bytes or K/M/G/T; the rest of the disk
    when not given, aligned down to 4 MiB), ``uuid``, ``bootable``."""
    m, device = _device(sim, req, "admin", "device_id")
    _ready(m, "create partition", "node")
    data = form_data(req)
    errors: dict[str, list[str]] = {}
    size = byte_size(data, "size", errors, minimum=MIN_PARTITION_SIZE, maximum=device.size)
    uuid = _uuid_field(data, errors)
    if errors:
        raise invalid(errors)
    if device.vg_id is not None:  # PartitionTable.clean
        raise invalid({"block_device": ["Cannot create a partition table on a logical volume."]})
    available = device.available()
    wanted = available if size is None else align_down(size)
    if wanted < MIN_PARTITION_SIZE:
        raise invalid(
            {"size": [f"Ensure this value is greater than or equal to {MIN_PARTITION_SIZE}."]}
        )
    if wanted > available and wanted - device.block_size > available:
        raise invalid(
            {"size": ["Partition cannot be saved; not enough free space on the block device."]}
        )
    wanted = min(wanted, available)  # one block over is taken off (_validate_enough_space)
    bootable = checkbox(data.get("bootable", ""))
    partition = m.storage.add_partition(
        device, wanted, uuid or sim.new_uuid(), bootable, sim.new_id
    )
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_delete(sim: Simulator, req: Request) -> Response:
    """``DELETE …/partition/{id}`` (admin, Ready): the partitions after it are renumbered; not
    a partition of a volume group."""
    m, device = _device(sim, req, "admin", "device_id")
    if device.partitions is None:
        raise ApiError(404, "No PartitionTable matches the given query.")
    _ready(m, "delete block device", "node")  # sic: MAAS's text
    owner, partition = _find_partition(m, req.params["id"])
    if owner is not device:
        raise ApiError(400, "Partition doesn't belong to the partition table")
    if partition.filesystem is not None and partition.filesystem.vg_name is not None:
        raise ApiError(400, "Cannot delete partition because its part of a volume group.")
    m.storage.delete_partition(device, partition)
    m.touch(sim.now())
    return deleted()


def _uuid_field(data: dict[str, str], errors: dict[str, list[str]]) -> str | None:
    """MAAS's ``UUID4Field``: 32 to 36 characters of a version-4 UUID."""
    value = data.get("uuid", "")
    if not value:
        return None
    if not 32 <= len(value) <= 36 or not UUID4_LOOSE.match(value):
        errors["uuid"] = ["Enter a valid value."]
        return None
    return value


def partition_read(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "view")
    return m.storage.partition_json(m.system_id, device, partition)


def partition_format(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "format")
    fs = _format_form(sim, req)
    old = m.storage.own_fs(partition)
    if old is not None and old.fstype not in FORMATTABLE:
        raise ApiError(
            400, f"Cannot format a partition that has a filesystem type of {old.fstype}."
        )
    m.storage.set_fs(partition, fs)
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_unformat(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "unformat")
    _unformat(m.storage.fs(partition), "partition")
    m.storage.set_fs(partition, None)
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_mount(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "mount")
    _mount(req, m.storage.fs(partition))
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


def partition_unmount(sim: Simulator, req: Request) -> Any:
    m, device, partition = _partition(sim, req, "edit")
    _allocated_op(req, m, "partition", "unmount")
    _unmount(m.storage.fs(partition), "partition")
    m.touch(sim.now())
    return m.storage.partition_json(m.system_id, device, partition)


# -- volume groups --------------------------------------------------------------------------------


def volume_groups_list(sim: Simulator, req: Request) -> Any:
    m = _machine(sim, req)
    return [m.storage.vg_json(m.system_id, vg) for vg in m.storage.vgs]


def _vg(sim: Simulator, req: Request, perm: str = "view") -> tuple[Machine, VolumeGroup]:
    m = _machine(sim, req, "No VolumeGroup matches the given query.")
    vg = m.storage.vg(req.params["id"])
    if vg is None:
        raise ApiError(404, "No VolumeGroup matches the given query.")
    require(req.user, perm, m)
    return m, vg


def volume_group_read(sim: Simulator, req: Request) -> Any:
    m, vg = _vg(sim, req)
    return m.storage.vg_json(m.system_id, vg)


def volume_group_create(sim: Simulator, req: Request) -> Any:
    """``POST nodes/{id}/volume-groups/`` (admin, Ready): ``name``, ``uuid``,
    ``block_devices`` and ``partitions`` (ids or names of unused ones, repeated)."""
    m = _machine(sim, req)
    require(req.user, "admin", m)
    _ready(m, "create volume group")
    data = form_data(req)
    errors: dict[str, list[str]] = {}
    name = data.get("name", "").strip()
    if not name:
        errors["name"] = ["This field is required."]
    uuid = _uuid_field(data, errors)
    free = m.storage.free_devices()
    devices = _choices(
        req.data.get("block_devices", []),
        {**{str(d.id): d for d in free}, **{d.name: d for d in free}},
        "block_devices",
        errors,
    )
    parts = m.storage.free_partitions()
    partitions = _choices(
        req.data.get("partitions", []),
        {**{str(p.id): p for _, p in parts}, **{f"{d.name}-part{p.index}": p for d, p in parts}},
        "partitions",
        errors,
    )
    if name and not devices and not partitions and not errors:
        errors["__all__"] = ["At least one valid block device or partition is required."]
    if errors:
        raise invalid(errors)
    vg = m.storage.create_vg(
        name, uuid or "", devices, partitions, new_id=sim.new_id, new_uuid=sim.new_uuid
    )
    m.touch(sim.now())
    return m.storage.vg_json(m.system_id, vg)


def _choices(
    given: list[str], choices: dict[str, Any], field: str, errors: dict[str, list[str]]
) -> list[Any]:
    """``MultipleChoiceField``: every value one of the choices (ids or names)."""
    for value in given:
        if value not in choices:
            errors[field] = [f"Select a valid choice. {value} is not one of the available choices."]
            return []
    return list({id(choices[v]): choices[v] for v in given}.values())


def volume_group_delete(sim: Simulator, req: Request) -> Response:
    """``DELETE`` (admin, Ready): not while it has logical volumes; its members are free
    again."""
    m, vg = _vg(sim, req, "admin")
    _ready(m, "delete volume group")
    if vg.logical_volumes:
        raise ApiError(400, "This volume group has logical volumes; it cannot be deleted.")
    m.storage.delete_vg(vg)
    m.touch(sim.now())
    return deleted()


def volume_group_create_lv(sim: Simulator, req: Request) -> Any:
    """``op=create_logical_volume`` (admin, Ready): ``name``, ``uuid``, ``size`` (the free
    space when not given). Answers the logical volume as a block device."""
    m, vg = _vg(sim, req, "admin")
    _ready(m, "create logical volume")
    data = form_data(req)
    errors: dict[str, list[str]] = {}
    name = data.get("name", "").strip()
    if not name:
        errors["name"] = ["This field is required."]
    uuid = _uuid_field(data, errors)
    free = m.storage.vg_size(vg) - m.storage.vg_used(vg)
    size = byte_size(data, "size", errors, minimum=MIN_BLOCK_DEVICE_SIZE, maximum=free)
    if free < MIN_BLOCK_DEVICE_SIZE:
        errors.pop("size", None)
        errors["__all__"] = [
            f"Volume group ({vg.name}) cannot hold any more logical volumes, because it "
            "doesn't have enough free space."
        ]
    if errors:
        raise invalid(errors)
    if any((d.lv_name or d.name) == name for d in m.storage.devices):
        raise invalid({"__all__": ["Block device with this Node config and Name already exists."]})
    lv = m.storage.create_lv(
        vg, name, free if size is None else size, uuid or sim.new_uuid(), sim.new_id
    )
    m.touch(sim.now())
    return m.storage.device_json(m.system_id, lv)


def volume_group_delete_lv(sim: Simulator, req: Request) -> Response:
    """``op=delete_logical_volume`` (admin, Ready): ``id``; an unknown one is ignored."""
    m, vg = _vg(sim, req, "admin")
    _ready(m, "delete logical volume")
    ref = mandatory(req, "id")
    lv = next((d for d in m.storage.devices if d.vg_id == vg.id and str(d.id) == ref), None)
    if lv is not None:
        m.storage.delete_lv(vg, lv)
        m.touch(sim.now())
    return deleted()

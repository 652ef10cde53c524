"""The simulated storage model: block devices, partitions, filesystems, volume groups and the
storage layouts that build them (docs/simulator.md, "Storage").

Sizes and names follow MAAS 3.5 (``storage_layouts.py``, ``partitiontable.py``,
``filesystemgroup.py``): a GPT table reserves 5 MiB (4 MiB at the start, 1 MiB at the end),
partitions align down to 4 MiB, the UEFI layouts start with a 512 MiB FAT32 ``/boot/efi``
partition, a volume group keeps one 4 MiB extent per physical volume for LVM headers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from maas_simulator.network import API_PREFIX, human_bytes

MiB = 1024 * 1024
EFI_PARTITION_SIZE = 512 * MiB
MIN_BOOT_PARTITION_SIZE = 512 * MiB
MIN_ROOT_PARTITION_SIZE = 3 * 1024 * MiB
PARTITION_ALIGNMENT = 4 * MiB
GPT_OVERHEAD = 4 * MiB + 1 * MiB
LVM_PE_SIZE = 4 * MiB
# The layouts a simulated machine can take; bcache, vmfs6/7 and custom answer with MAAS's own
# refusal (docs/simulator.md, "What is deliberately not simulated").
LAYOUTS = ("bcache", "blank", "custom", "flat", "lvm", "vmfs6", "vmfs7")
FSTYPES = (
    "ext2",
    "ext4",
    "xfs",
    "fat32",
    "vfat",
    "lvm-pv",
    "raid",
    "raid-spare",
    "bcache-cache",
    "bcache-backing",
    "swap",
    "ramfs",
    "tmpfs",
    "btrfs",
    "zfsroot",
    "vmfs6",
)
FORMATTABLE = ("ext2", "ext4", "xfs", "fat32", "vfat", "swap", "btrfs", "zfsroot")
MIN_PARTITION_SIZE = PARTITION_ALIGNMENT
MIN_BLOCK_DEVICE_SIZE = 4 * MiB


class LayoutError(Exception):
    """``StorageLayoutError``: the layout cannot be applied (MAAS answers 400)."""


class LayoutFieldsError(Exception):
    """``StorageLayoutFieldsError``: the layout's size fields are invalid (a 400 form error)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(str(errors))
        self.errors = errors


def align_down(size: int, block: int = PARTITION_ALIGNMENT) -> int:
    return (size // block) * block


@dataclass
class Filesystem:
    fstype: str
    uuid: str
    label: str | None = None
    mount_point: str | None = None
    mount_options: str | None = None
    vg_name: str | None = None  # lvm-pv: the volume group it belongs to

    def as_json(self) -> dict[str, Any]:
        return {
            "fstype": self.fstype,
            "label": self.label,
            "uuid": self.uuid,
            "mount_point": self.mount_point,
            "mount_options": self.mount_options,
        }

    @property
    def is_mounted(self) -> bool:
        return self.mount_point is not None


@dataclass
class Partition:
    id: int
    index: int
    size: int
    uuid: str
    bootable: bool = False
    tags: list[str] = field(default_factory=list)
    filesystem: Filesystem | None = None
    acquired: Filesystem | None = None  # the copy edited while the machine is allocated


@dataclass
class BlockDevice:
    id: int
    name: str
    size: int
    block_size: int = 512
    kind: str = "physical"  # physical | virtual (a logical volume)
    model: str | None = None
    serial: str | None = None
    id_path: str | None = None
    tags: list[str] = field(default_factory=list)
    firmware_version: str | None = None
    numa_node: int | None = 0
    partitions: list[Partition] | None = None  # None: no partition table
    filesystem: Filesystem | None = None
    uuid: str | None = None  # virtual devices only
    vg_id: int | None = None  # the volume group of a logical volume
    lv_name: str | None = None  # a logical volume's own name (``name`` shows "<vg>-<lv>")
    acquired: Filesystem | None = None  # the copy edited while the machine is allocated
    # an amd64 machine booting BIOS keeps 1 MiB of a GPT table for grub (get_overhead_size)
    bios_grub: int = 0

    def table_used(self) -> int:
        assert self.partitions is not None
        return sum(p.size for p in self.partitions) + GPT_OVERHEAD + self.bios_grub

    def available(self) -> int:
        """``PartitionTable.get_available_size``: what a new partition can take, aligned (a
        disk without a table gets a GPT one)."""
        used = self.table_used() if self.partitions is not None else GPT_OVERHEAD + self.bios_grub
        return align_down(self.size - used)


@dataclass
class VolumeGroup:
    id: int
    name: str
    uuid: str
    members: list[tuple[str, int]]  # ("partition" | "blockdev", id)
    logical_volumes: list[int] = field(default_factory=list)  # block device ids


Holder = BlockDevice | Partition


def used_for(fs: Filesystem | None, partitions: list[Partition] | None = None) -> str:
    """``maasserver.utils.storage.used_for``."""
    if fs is not None:
        if fs.is_mounted:
            return f"{fs.fstype} formatted filesystem mounted at {fs.mount_point}"
        if fs.fstype == "lvm-pv":
            return f"LVM volume for {fs.vg_name}"
        return f"Unmounted {fs.fstype} formatted filesystem"
    if partitions is not None:
        n = len(partitions)
        return f"GPT partitioned with {n} partition{'s' if n != 1 else ''}"
    return "Unused"


class Storage:
    """One machine's storage configuration (its ``current_config``)."""

    def __init__(self) -> None:
        self.devices: list[BlockDevice] = []
        self.vgs: list[VolumeGroup] = []
        self.boot_disk_id: int | None = None
        self.layout = ""
        self.allocated = False  # the machine is in an allocated status (Node.set_status)
        self.uefi = True  # the machine boots UEFI: the layouts start with an EFI partition

    # -- filesystems: MAAS keeps an acquired copy while the machine is allocated ------------
    def holders(self) -> Iterator[Holder]:
        for d in self.devices:
            yield d
            yield from d.partitions or []

    def fs(self, holder: Holder) -> Filesystem | None:
        """``get_effective_filesystem``: while allocated, the acquired copy (or a filesystem
        that is not mountable, such as an LVM physical volume); otherwise the filesystem."""
        if not self.allocated:
            return holder.filesystem
        if holder.acquired is not None:
            return holder.acquired
        fs = holder.filesystem
        return fs if fs is not None and fs.fstype not in FORMATTABLE else None

    def own_fs(self, holder: Holder) -> Filesystem | None:
        """The filesystem a format replaces: the acquired one while allocated."""
        return holder.acquired if self.allocated else holder.filesystem

    def set_fs(self, holder: Holder, fs: Filesystem | None) -> None:
        if self.allocated:
            holder.acquired = fs
        else:
            holder.filesystem = fs

    def acquire(self) -> None:
        """``_create_acquired_filesystems``: every mountable filesystem gets a copy, which
        edits made while the machine is allocated change."""
        for holder in self.holders():
            fs = holder.filesystem
            holder.acquired = replace(fs) if fs is not None and fs.fstype in FORMATTABLE else None

    def release(self) -> None:
        """``_clear_acquired_filesystems``: the copies go; the filesystems set while the
        machine was Ready show again."""
        for holder in self.holders():
            holder.acquired = None

    def used_size(self, d: BlockDevice) -> int:
        if self.fs(d) is not None:
            return d.size
        if d.partitions is not None:
            return d.table_used()
        return 0

    # -- lookups ----------------------------------------------------------------------------
    @property
    def physical(self) -> list[BlockDevice]:
        return [d for d in self.devices if d.kind == "physical"]

    def device(self, ref: str) -> BlockDevice | None:
        for d in self.devices:
            if ref == str(d.id) or ref == d.name:
                return d
        return None

    def partition(self, device: BlockDevice, ref: str) -> Partition | None:
        for p in device.partitions or []:
            if ref == str(p.id):
                return p
        return None

    def partition_by_id(self, pid: int) -> tuple[BlockDevice, Partition] | None:
        for d in self.devices:
            for p in d.partitions or []:
                if p.id == pid:
                    return d, p
        return None

    def vg(self, ref: str) -> VolumeGroup | None:
        return next((v for v in self.vgs if ref in (str(v.id), v.name)), None)

    def boot_disk(self) -> BlockDevice | None:
        """``Node.get_boot_disk``: the chosen one, else the first physical disk of 512 MiB+."""
        if self.boot_disk_id is not None:
            chosen = next((d for d in self.devices if d.id == self.boot_disk_id), None)
            if chosen is not None:
                return chosen
        big = [d for d in self.physical if d.size >= MIN_BOOT_PARTITION_SIZE]
        return min(big, key=lambda d: d.id) if big else None

    def layout_issues(self) -> list[str]:
        """``Node.storage_layout_issues`` for an Ubuntu deployment (bcache, ZFS and ESXi rules
        aside): no disk at all, no boot disk, or no filesystem mounted at ``/``."""
        if not self.physical:
            return [
                "There are currently no storage devices.  Please add a storage device to be "
                "able to deploy this node."
            ]
        issues = (
            [] if self.boot_disk() else ["Specify a storage device to be able to deploy this node."]
        )
        if not any(
            (fs := self.fs(h)) is not None and fs.mount_point == "/" for h in self.holders()
        ):
            issues.append("Mount the root '/' filesystem to be able to deploy this node.")
        return issues

    def total_bytes(self) -> int:
        return sum(d.size for d in self.physical)

    # -- changes ----------------------------------------------------------------------------
    def clear(self) -> None:
        """``_clear_full_storage_configuration``: no tables, filesystems or volume groups."""
        self.devices = [d for d in self.devices if d.kind == "physical"]
        for d in self.devices:
            d.partitions = None
            d.filesystem = d.acquired = None
        self.vgs = []

    def apply_layout(
        self,
        name: str,
        *,
        new_id: Callable[[], int],
        new_uuid: Callable[[], str],
        params: dict[str, str] | None = None,
    ) -> None:
        """``StorageLayout.configure`` for flat, lvm and blank; the others refuse as MAAS does
        when their prerequisites are missing."""
        params = params or {}
        if not self.physical:
            raise LayoutError("missing-boot-disk")
        boot = self.boot_disk()
        if boot is None:
            raise LayoutError("missing-boot-disk")
        if name == "custom":
            raise LayoutError("No custom storage layout configuration found")
        if name in ("vmfs6", "vmfs7"):
            raise LayoutError(f"{name} layouts are not simulated")
        if name == "bcache":
            cache = [d for d in self.physical if d.id != boot.id and "ssd" in d.tags]
            if not cache:
                raise LayoutError("Node doesn't have an available cache device to setup bcache.")
            raise LayoutError("bcache layouts are not simulated")
        sizes = layout_sizes(params, boot, lvm=name == "lvm")
        self.clear()
        self.layout = name
        if name == "blank":
            return
        boot.partitions = []
        if self.uefi:  # create_basic_layout: an EFI partition only when booting UEFI
            efi = Partition(new_id(), 1, EFI_PARTITION_SIZE, new_uuid(), bootable=True)
            efi.filesystem = Filesystem("fat32", new_uuid(), "efi", "/boot/efi")
            boot.partitions.append(efi)
        boot_size = sizes["boot_size"]
        if boot_size:
            index = len(boot.partitions) + 1
            part = Partition(new_id(), index, align_down(boot_size), new_uuid(), bootable=True)
            part.filesystem = Filesystem("ext4", new_uuid(), "boot", "/boot")
            boot.partitions.append(part)
        # root_device: the root partition goes on that disk (the EFI partition stays put).
        target = next((d for d in self.physical if str(d.id) == params.get("root_device")), boot)
        if target is not boot:
            target.partitions = []
        assert target.partitions is not None
        available = align_down(target.size - target.table_used())
        root_size = sizes["root_size"]
        root = Partition(
            new_id(),
            len(target.partitions) + 1,
            min(align_down(root_size), available) if root_size else available,
            new_uuid(),
        )
        target.partitions.append(root)
        if name == "flat":
            root.filesystem = Filesystem("ext4", new_uuid(), "root", "/")
            return
        # lvm: the root partition is the volume group's only physical volume.
        vg_name = params.get("vg_name") or "vgroot"
        lv_name = params.get("lv_name") or "lvroot"
        root.filesystem = Filesystem("lvm-pv", new_uuid(), vg_name=vg_name)
        vg = VolumeGroup(new_id(), vg_name, new_uuid(), [("partition", root.id)])
        self.vgs.append(vg)
        size = self.vg_size(vg)
        lv_size = sizes["lv_size"]
        lv = BlockDevice(
            new_id(),
            f"{vg_name}-{lv_name}",
            align_down(min(lv_size, size) if lv_size else size, LVM_PE_SIZE),
            block_size=4096,
            kind="virtual",
            numa_node=None,
            uuid=new_uuid(),
            vg_id=vg.id,
            lv_name=lv_name,
        )
        lv.filesystem = Filesystem("ext4", new_uuid(), "root", "/")
        vg.logical_volumes.append(lv.id)
        self.devices.append(lv)

    # -- custom storage: partitions, volume groups, logical volumes -----------------------
    def add_partition(
        self, device: BlockDevice, size: int, uuid: str, bootable: bool, new_id: Callable[[], int]
    ) -> Partition:
        """``PartitionTable.add_partition`` (a GPT table is made if the disk has none)."""
        if device.partitions is None:
            device.partitions = []
        partition = Partition(new_id(), len(device.partitions) + 1, size, uuid, bootable)
        device.partitions.append(partition)
        return partition

    def delete_partition(self, device: BlockDevice, partition: Partition) -> None:
        """``delete_partition``: the ones after it are renumbered; the table stays."""
        assert device.partitions is not None
        device.partitions.remove(partition)
        for n, p in enumerate(device.partitions, start=1):
            p.index = n

    def free_devices(self) -> list[BlockDevice]:
        """``get_free_block_devices_for_node``: no partition table, no filesystem."""
        return [
            d
            for d in self.devices
            if d.partitions is None and d.filesystem is None and d.acquired is None
        ]

    def free_partitions(self) -> list[tuple[BlockDevice, Partition]]:
        """``get_free_partitions_for_node``: partitions without a filesystem."""
        return [
            (d, p)
            for d in self.devices
            for p in d.partitions or []
            if p.filesystem is None and p.acquired is None
        ]

    def create_vg(
        self,
        name: str,
        uuid: str,
        devices: list[BlockDevice],
        partitions: list[Partition],
        *,
        new_id: Callable[[], int],
        new_uuid: Callable[[], str],
    ) -> VolumeGroup:
        """``create_volume_group``: each member becomes an LVM physical volume; the boot disk
        joins as one partition over the whole disk (``_move_boot_disk_to_partitions``)."""
        boot = self.boot_disk()
        for device in list(devices):
            if device is boot:
                devices.remove(device)
                whole = self.add_partition(device, device.available(), new_uuid(), False, new_id)
                partitions.append(whole)
                break
        members: list[tuple[str, int]] = [("blockdev", d.id) for d in devices]
        members += [("partition", p.id) for p in partitions]
        holders: list[Holder] = [*devices, *partitions]
        for holder in holders:
            holder.filesystem = Filesystem("lvm-pv", new_uuid(), vg_name=name)
        vg = VolumeGroup(new_id(), name, uuid or new_uuid(), members)
        self.vgs.append(vg)
        return vg

    def delete_vg(self, vg: VolumeGroup) -> None:
        """The members are no longer physical volumes (their filesystems go with it)."""
        for holder in self.holders():
            if self._member(vg, holder):
                holder.filesystem = None
        self.vgs.remove(vg)

    def _member(self, vg: VolumeGroup, holder: Holder) -> bool:
        kind = "partition" if isinstance(holder, Partition) else "blockdev"
        return (kind, holder.id) in vg.members

    def create_lv(
        self, vg: VolumeGroup, name: str, size: int, uuid: str, new_id: Callable[[], int]
    ) -> BlockDevice:
        """``create_logical_volume``: a virtual block device "<vg>-<name>", aligned down."""
        lv = BlockDevice(
            new_id(),
            f"{vg.name}-{name}",
            align_down(size),
            block_size=4096,
            kind="virtual",
            numa_node=None,
            uuid=uuid,
            vg_id=vg.id,
            lv_name=name,
        )
        vg.logical_volumes.append(lv.id)
        self.devices.append(lv)
        return lv

    def delete_lv(self, vg: VolumeGroup, lv: BlockDevice) -> None:
        vg.logical_volumes.remove(lv.id)
        self.devices.remove(lv)

    def member_sizes(self, vg: VolumeGroup) -> list[int]:
        sizes = []
        for kind, mid in vg.members:
            if kind == "partition":
                found = self.partition_by_id(mid)
                sizes.append(found[1].size if found else 0)
            else:
                dev = next((d for d in self.devices if d.id == mid), None)
                sizes.append(dev.size if dev else 0)
        return sizes

    def vg_size(self, vg: VolumeGroup) -> int:
        """``get_lvm_size``: whole extents, less one extent per physical volume."""
        sizes = self.member_sizes(vg)
        if not sizes:
            return 0
        return (sum(sizes) // LVM_PE_SIZE - len(sizes)) * LVM_PE_SIZE

    def vg_used(self, vg: VolumeGroup) -> int:
        return sum(d.size for d in self.devices if d.vg_id == vg.id)

    # -- JSON -------------------------------------------------------------------------------
    def partition_json(self, sid: str, device: BlockDevice, p: Partition) -> dict[str, Any]:
        return {
            "uuid": p.uuid,
            "size": p.size,
            "bootable": p.bootable,
            "tags": list(p.tags),
            "type": "partition",
            "used_for": used_for(self.fs(p)),
            "system_id": sid,
            "path": f"/dev/disk/by-dname/{device.name}-part{p.index}",
            "filesystem": fs.as_json() if (fs := self.fs(p)) else None,
            "device_id": device.id,
            "id": p.id,
            "resource_uri": (f"{API_PREFIX}nodes/{sid}/blockdevices/{device.id}/partition/{p.id}"),
        }

    def device_json(self, sid: str, d: BlockDevice, *, firmware: bool = False) -> dict[str, Any]:
        """A block device; ``firmware``: with ``firmware_version``, which only the machine's
        own device sets show, for physical disks (recorded against MAAS 3.5.10)."""
        used = self.used_size(d)
        fs = self.fs(d)
        shown = {
            "system_id": sid,
            "id": d.id,
            "name": d.name,
            "uuid": d.uuid,
            "type": d.kind,
            "path": f"/dev/disk/by-dname/{d.name}",
            "model": d.model,
            "serial": d.serial,
            "id_path": d.id_path,
            "size": d.size,
            "block_size": d.block_size,
            "available_size": d.size - used,
            "used_size": used,
            "used_for": used_for(fs, d.partitions),
            "tags": list(d.tags),
            "filesystem": fs.as_json() if fs else None,
            "partition_table_type": "GPT" if d.partitions is not None else None,
            "partitions": [self.partition_json(sid, d, p) for p in d.partitions or []],
            "storage_pool": None,
            "numa_node": d.numa_node,
            "resource_uri": f"{API_PREFIX}nodes/{sid}/blockdevices/{d.id}/",
        }
        if firmware and d.kind == "physical":
            shown["firmware_version"] = d.firmware_version
        return shown

    def vg_json(self, sid: str, vg: VolumeGroup) -> dict[str, Any]:
        size, used = self.vg_size(vg), self.vg_used(vg)
        devices = []
        for kind, mid in vg.members:
            if kind == "partition":
                found = self.partition_by_id(mid)
                if found:
                    devices.append(self.partition_json(sid, *found))
            else:
                dev = next((d for d in self.devices if d.id == mid), None)
                if dev:
                    devices.append(self.device_json(sid, dev))
        return {
            "system_id": sid,
            "id": vg.id,
            "uuid": vg.uuid,
            "name": vg.name,
            "devices": devices,
            "size": size,
            "human_size": human_bytes(size),
            "available_size": size - used,
            "human_available_size": human_bytes(size - used),
            "used_size": used,
            "human_used_size": human_bytes(used),
            "logical_volumes": [self.device_json(sid, d) for d in self.devices if d.vg_id == vg.id],
            "resource_uri": f"{API_PREFIX}nodes/{sid}/volume-group/{vg.id}/",
        }

    def machine_fields(self, sid: str) -> dict[str, Any]:
        """The storage fields of the machine object (``boot_disk``, the device sets, ...)."""
        devices = [self.device_json(sid, d, firmware=True) for d in self.devices]
        boot = self.boot_disk()
        return {
            "boot_disk": next((j for j in devices if boot and j["id"] == boot.id), None),
            "blockdevice_set": devices,
            "physicalblockdevice_set": [j for j in devices if j["type"] == "physical"],
            "virtualblockdevice_set": [j for j in devices if j["type"] == "virtual"],
            "volume_groups": [
                {"system_id": sid, "id": vg.id, "__incomplete__": True} for vg in self.vgs
            ],
            "storage": self.total_bytes() / 1000 / 1000,
        }


def _size(value: str, disk: BlockDevice) -> int:
    """``BytesOrPercentageField``: bytes with an optional K/M/G/T suffix, or a percentage of
    the boot disk less the EFI partition. Raises ValueError for anything else."""
    text = value.strip()
    units = {"K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}
    try:
        if text.endswith("%"):
            number = float(text[:-1]) * (disk.size - EFI_PARTITION_SIZE) / 100
        elif text[-1:].upper() in units:
            number = float(text[:-1]) * units[text[-1:].upper()]
        else:
            number = float(text)
        return int(number)
    except (ValueError, OverflowError) as exc:
        raise ValueError(text) from exc


def layout_sizes(params: dict[str, str], boot: BlockDevice, *, lvm: bool) -> dict[str, int]:
    """The layout's ``boot_size``, ``root_size`` and ``lv_size`` (0 = not given), checked as
    ``StorageLayoutBase.clean`` and ``LVMStorageLayout.clean`` check them."""
    errors: dict[str, list[str]] = {}
    bounds = {
        "boot_size": (
            MIN_BOOT_PARTITION_SIZE,
            boot.size - EFI_PARTITION_SIZE - MIN_ROOT_PARTITION_SIZE,
        ),
        "root_size": (
            MIN_ROOT_PARTITION_SIZE,
            boot.size - EFI_PARTITION_SIZE - MIN_BOOT_PARTITION_SIZE,
        ),
    }
    sizes = {"boot_size": 0, "root_size": 0, "lv_size": 0}
    for name in ("boot_size", "root_size", "lv_size"):
        value = params.get(name)
        if not value:
            continue
        try:
            sizes[name] = _size(value, boot)
        except ValueError:
            errors[name] = [f"'{value}' is not a valid size."]
            continue
        low, high = bounds.get(name, (None, None))
        if low is not None and sizes[name] < low:
            errors[name] = [f"Size is too small. Minimum size is {low}."]
        elif high is not None and sizes[name] > high:
            errors[name] = [f"Size is too large. Maximum size is {high}."]
    too_big = EFI_PARTITION_SIZE + sizes["boot_size"] + sizes["root_size"] > boot.size
    if not errors and sizes["root_size"] and too_big:
        errors["__all__"] = [
            "Size of the boot partition and root partition are larger than the available "
            "space on the boot disk."
        ]
    if lvm and sizes["lv_size"] and "lv_size" not in errors:
        root = sizes["root_size"] or boot.size - EFI_PARTITION_SIZE - sizes["boot_size"]
        if sizes["lv_size"] < MIN_ROOT_PARTITION_SIZE:
            errors["lv_size"] = [f"Size is too small. Minimum size is {MIN_ROOT_PARTITION_SIZE}."]
        elif sizes["lv_size"] > root:
            errors["lv_size"] = [f"Size is too large. Maximum size is {root}."]
    if errors:
        raise LayoutFieldsError(errors)
    return sizes


def new_uuid_factory(rng: Any) -> Callable[[], str]:
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))

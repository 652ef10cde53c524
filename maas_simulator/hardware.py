"""What a machine really has on its buses and what MAAS records of it: GPUs, NICs and NVMe
controllers as PCI functions, MAAS's node devices (``nodes/{id}/devices/``), the 18
``hardware_info`` keys and the hardware types MAAS shares between node devices, scripts and
results (docs/simulator.md, "Hardware").

Pure data and its JSON; which functions a given machine has, and how MAAS's record follows
them, is worked out in ``inventory.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maas_simulator.network import API_PREFIX

# HARDWARE_TYPE: the number, its label, and the names MAAS accepts for it (lower-cased).
HARDWARE_TYPES: dict[int, tuple[str, tuple[str, ...]]] = {
    0: ("Node", ("node", "machine", "controller", "other", "generic")),
    1: ("CPU", ("cpu", "processor")),
    2: ("Memory", ("memory", "ram")),
    3: ("Storage", ("storage", "disk", "ssd")),
    4: ("Network", ("network", "net", "interface")),
    5: ("GPU", ("gpu", "graphics")),
}
NODE, CPU, MEMORY, STORAGE, NETWORK, GPU = range(6)
BUS_NAMES = {1: "PCIE", 2: "USB"}


class BadChoice(ValueError):
    """A filter value MAAS refuses; the message is MAAS's text (a 400 body)."""


def translate_hardware_type(value: str) -> int:
    """``translate_hardware_type``: a number 0-5 or a name, matched lower-cased."""
    if value.isdigit():
        if int(value) in HARDWARE_TYPES:
            return int(value)
        raise BadChoice("Invalid hardware type numeric value.")
    for number, (_, names) in HARDWARE_TYPES.items():
        if value.lower() in names:
            return number
    raise BadChoice("Hardware type must be node, cpu, memory, storage, or gpu")


def translate_bus(value: str) -> int:
    """``translate_bus``: 1/2, or PCIE/USB in upper or lower case (not mixed)."""
    if value.isdigit():
        if int(value) in BUS_NAMES:
            return int(value)
        raise BadChoice("Invalid bus numeric value!")
    if value in ("PCIE", "pcie"):
        return 1
    if value in ("USB", "usb"):
        return 2
    raise BadChoice("Bus must be PCIE or USB!")


# -- what the machine has ---------------------------------------------------------------------


@dataclass
class GpuSpec:
    """The machine's accelerators (scenario ``gpus:``). ``numa_nodes`` None: spread evenly."""

    count: int = 8
    vendor_id: str = "10de"
    product_id: str = "2330"
    vendor_name: str = "NVIDIA Corporation"
    product_name: str = "GH100 [H100 SXM5 80GB]"
    numa_nodes: list[int] | None = None

    @property
    def driver(self) -> str:
        return "nvidia" if self.vendor_id.lower() == "10de" else ""


@dataclass
class NicSpec:
    """A NIC port as the hardware has it (scenario interface fields). ``speed`` is what the
    link negotiates, ``interface_speed`` the port's rating (Mbit/s)."""

    speed: int = 25000
    interface_speed: int | None = None  # None: the same as speed
    vendor: str = "Intel Corporation"
    product: str = "Ethernet Controller E810-XXV for SFP"
    firmware_version: str = "4.40 0x8001c967 1.3534.0"
    numa_node: int = 0
    sriov_max_vf: int = 0
    pci_address: str | None = None  # None: given by the machine's slot layout
    name: str | None = None  # the name the machine's OS gives the port (commissioning reads it)

    @property
    def rated(self) -> int:
        return self.interface_speed if self.interface_speed is not None else self.speed


# PCI ids of the NIC and NVMe products a scenario is likely to name (pci.ids); others get a
# stable made-up product id.
PCI_VENDORS = {
    "intel": ("8086", "Intel Corporation"),
    "mellanox": ("15b3", "Mellanox Technologies"),
    "nvidia": ("10de", "NVIDIA Corporation"),
    "broadcom": ("14e4", "Broadcom Inc. and subsidiaries"),
    "samsung": ("144d", "Samsung Electronics Co Ltd"),
    "micron": ("1344", "Micron Technology Inc"),
    "kioxia": ("1e0f", "KIOXIA Corporation"),
    "solidigm": ("25e7", "Solidigm"),
}
PCI_PRODUCTS = {
    "Ethernet Controller E810-XXV for SFP": ("159b", "ice"),
    "Ethernet Controller E810-C for QSFP": ("1592", "ice"),
    "MT2892 Family [ConnectX-6 Dx]": ("101d", "mlx5_core"),
    "MT2910 Family [ConnectX-7]": ("1021", "mlx5_core"),
    "BCM57508 NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb Ethernet": ("1750", "bnxt_en"),
}
NVME_PRODUCTS = {  # the model's first word → (vendor key, product id, product name)
    "SAMSUNG": ("samsung", "a80a", "NVMe SSD Controller PM9A1/PM9A3/980PRO"),
    "MICRON": ("micron", "51c3", "7450 PRO NVMe SSD"),
    "KIOXIA": ("kioxia", "0007", "NVMe SSD Controller Cx6"),
    "SOLIDIGM": ("solidigm", "0b60", "NVMe DC SSD [3DNAND, Sentinel Rock Controller]"),
}


def pci_vendor(name: str | None) -> tuple[str, str]:
    """(vendor id, vendor name) of a vendor named in a scenario."""
    lowered = (name or "").lower()
    for key, found in PCI_VENDORS.items():
        if key in lowered:
            return found
    return f"{sum(lowered.encode()) % 0xFFFF:04x}", name or "Unknown"


def made_up_id(name: str) -> str:
    return f"{sum(n * (i + 1) for i, n in enumerate(name.encode())) % 0xFFFF:04x}"


@dataclass
class PciFunction:
    """One PCI function on the machine's bus, as the LXD resources data lists it."""

    pci_address: str
    vendor_id: str
    product_id: str
    vendor_name: str
    product_name: str
    driver: str
    numa_node: int
    display: bool = False  # PCI class 0x03: LXD lists it under gpu.cards
    mac_address: str | None = None  # a NIC port: the interface it is
    disk: str | None = None  # an NVMe controller: the disk's kernel name


def bdf_numbers(pci_address: str) -> tuple[int, int]:
    """``bus_number`` and ``device_number`` of a BDF, decimal from its hex (0x18 → 24)."""
    _, bus, rest = pci_address.split(":")
    return int(bus, 16), int(rest.split(".")[0], 16)


# -- what MAAS records --------------------------------------------------------------------------


@dataclass
class NodeDevice:
    """A row of MAAS's ``NodeDevice``: a PCI (or USB) device commissioning found."""

    id: int
    bus: int
    hardware_type: int
    numa_node: int
    vendor_id: str
    product_id: str
    vendor_name: str
    product_name: str
    commissioning_driver: str
    bus_number: int
    device_number: int
    pci_address: str | None
    physical_blockdevice: int | None = None  # the block device's id
    physical_interface: int | None = None  # the interface's id

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two sightings "the same device" (vendor, product, address)."""
        address = self.pci_address or f"{self.bus_number}:{self.device_number}"
        return (self.vendor_id, self.product_id, address)


def node_device_json(
    system_id: str,
    d: NodeDevice,
    interfaces: dict[int, dict[str, Any]] | None = None,
    disks: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``NodeDeviceHandler.fields``. The two foreign keys nest the whole interface and block
    device they point to, as MAAS renders them (``interfaces``, ``disks``: their JSON by id;
    recorded against MAAS 3.5.10)."""
    return {
        "id": d.id,
        "bus": d.bus,
        "bus_name": BUS_NAMES[d.bus],
        "hardware_type": d.hardware_type,
        "hardware_type_name": HARDWARE_TYPES[d.hardware_type][0],
        "system_id": system_id,
        "numa_node": d.numa_node,
        "physical_blockdevice": (disks or {}).get(d.physical_blockdevice or -1),
        "physical_interface": (interfaces or {}).get(d.physical_interface or -1),
        "vendor_id": d.vendor_id,
        "product_id": d.product_id,
        "vendor_name": d.vendor_name,
        "product_name": d.product_name,
        "commissioning_driver": d.commissioning_driver,
        "bus_number": d.bus_number,
        "device_number": d.device_number,
        "pci_address": d.pci_address,
        "resource_uri": f"{API_PREFIX}nodes/{system_id}/devices/{d.id}/",
    }


# -- hardware_info ------------------------------------------------------------------------------

HARDWARE_INFO_KEYS = (
    "system_vendor",
    "system_product",
    "system_family",
    "system_version",
    "system_sku",
    "system_serial",
    "cpu_model",
    "mainboard_vendor",
    "mainboard_product",
    "mainboard_serial",
    "mainboard_version",
    "mainboard_firmware_vendor",
    "mainboard_firmware_date",
    "mainboard_firmware_version",
    "chassis_vendor",
    "chassis_type",
    "chassis_serial",
    "chassis_version",
)
DEFAULT_HARDWARE_INFO = {
    "system_vendor": "Supermicro",
    "system_product": "SYS-821GE-TNHR",
    "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
    "mainboard_vendor": "Supermicro",
    "mainboard_product": "X13DEG-OAD",
    "mainboard_firmware_vendor": "American Megatrends International, LLC.",
    "mainboard_firmware_date": "05/16/2024",
    "mainboard_firmware_version": "2.1",
    "chassis_vendor": "Supermicro",
    "chassis_type": "Rack Mount Chassis",
}
PLACEHOLDERS = {"0123456789", "none"}  # SMBIOS fillers MAAS treats as unknown


@dataclass
class HardwareInfo:
    """The SMBIOS facts of the machine (scenario ``hardware_info:`` over the defaults)."""

    overrides: dict[str, str] = field(default_factory=dict)

    def read(self, serial: str) -> dict[str, str]:
        """All 18 keys as commissioning reports them: "Unknown" unless known."""
        values = {"system_serial": serial, **DEFAULT_HARDWARE_INFO, **self.overrides}
        info = {}
        for key in HARDWARE_INFO_KEYS:
            value = str(values.get(key) or "").strip()
            info[key] = "Unknown" if not value or value.lower() in PLACEHOLDERS else value
        return info


UNKNOWN_HARDWARE_INFO = dict.fromkeys(HARDWARE_INFO_KEYS, "Unknown")

"""What commissioning (and a hardware sync) reads of a machine's hardware beyond CPUs, memory
and disks: its PCI functions (GPUs, the BMC's VGA, NVSwitches, NIC ports, NVMe controllers), the
NIC attributes MAAS shows on interfaces, NUMA nodes and ``hardware_info``; and how MAAS's node
devices follow the bus (docs/simulator.md, "Hardware").

The machine faults ``gpu_missing`` (GPUs off the bus at commissioning) and ``nic_slow`` (ports
negotiating below their rating) act here, as does a GPU lost after deploy
(``Hardware.gpus_lost``).
"""

from __future__ import annotations

from collections.abc import Callable

from maas_simulator.hardware import (
    GPU,
    NETWORK,
    NODE,
    NVME_PRODUCTS,
    PCI_PRODUCTS,
    PCI_VENDORS,
    STORAGE,
    NicSpec,
    NodeDevice,
    PciFunction,
    bdf_numbers,
    made_up_id,
    pci_vendor,
)
from maas_simulator.nodes import Machine

# Bus numbers of an HGX-style board: the GPUs' slots, the NVSwitches', the NICs' and NVMe's.
GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
NVSWITCH_BUSES = (0x05, 0x06, 0x07, 0x08)
NIC_BUS = 0x31  # two ports per card: 31:00.0, 31:00.1, 32:00.0, …
NVME_BUS = 0xC1
BMC_VGA = PciFunction(
    "0000:03:00.0",
    "1a03",
    "2000",
    "ASPEED Technology, Inc.",
    "ASPEED Graphics Family",
    "ast",
    0,
    display=True,
)

# (action, device): what a re-read changed, for the hardware-sync events
Change = tuple[str, NodeDevice]


def gpu_address(i: int) -> str:
    bus = GPU_BUSES[i] if i < len(GPU_BUSES) else 0xE0 + i
    return f"0000:{bus:02x}:00.0"


def nic_address(i: int) -> str:
    return f"0000:{NIC_BUS + i // 2:02x}:00.{i % 2}"


def gpus_gone(m: Machine) -> int:
    """NVIDIA GPUs off the bus now: ``gpu_missing``, and those lost after deploy."""
    return m.faults.gpu_missing + m.hardware.gpus_lost


def gpu_functions(m: Machine, gone: int) -> list[PciFunction]:
    """The GPUs on the bus: those the machine has, less ``gone`` NVIDIA ones off the bus; the
    last slots go first."""
    spec, numa = m.hardware.gpus, max(m.hardware.numa_nodes, 1)
    gone = gone if spec.vendor_id.lower() == "10de" else 0
    functions = []
    for i in range(max(spec.count - gone, 0)):
        node = spec.numa_nodes[i] if spec.numa_nodes else i * numa // max(spec.count, 1)
        functions.append(
            PciFunction(
                gpu_address(i),
                spec.vendor_id.lower(),
                spec.product_id.lower(),
                spec.vendor_name,
                spec.product_name,
                spec.driver,
                node,
                display=True,
            )
        )
    return functions


def nvswitch_count(m: Machine) -> int:
    if m.hardware.nvswitches is not None:
        return m.hardware.nvswitches
    gpus = m.hardware.gpus
    return 4 if gpus.count > 0 and gpus.vendor_id.lower() == "10de" else 0


def nic_spec(m: Machine, mac: str) -> NicSpec:
    return m.hardware.nics.get(mac) or NicSpec()


def nic_functions(m: Machine) -> list[PciFunction]:
    functions = []
    physical = [i for i in m.interfaces if i.type == "physical"]
    for n, iface in enumerate(physical):
        spec = nic_spec(m, iface.mac_address)
        vendor_id, vendor_name = pci_vendor(spec.vendor)
        known = PCI_PRODUCTS.get(spec.product)
        product_id, driver = known if known else (made_up_id(spec.product), "")
        functions.append(
            PciFunction(
                spec.pci_address or nic_address(n),
                vendor_id,
                product_id,
                vendor_name,
                spec.product,
                driver,
                spec.numa_node,
                mac_address=iface.mac_address,
            )
        )
    return functions


def nvme_functions(m: Machine) -> list[PciFunction]:
    functions = []
    disks = [d for d in m.hardware.disks or [] if str(d["name"]).startswith("nvme")]
    for n, disk in enumerate(disks):
        model = str(disk.get("model") or "")
        vendor_key, product_id, product = NVME_PRODUCTS.get(
            model.split(" ")[0].upper(), NVME_PRODUCTS["SAMSUNG"]
        )
        vendor_id, vendor_name = PCI_VENDORS[vendor_key]
        functions.append(
            PciFunction(
                f"0000:{NVME_BUS + n:02x}:00.0",
                vendor_id,
                product_id,
                vendor_name,
                product,
                "nvme",
                int(disk.get("numa_node", 0)),
                disk=str(disk["name"]),
            )
        )
    return functions


def pci_functions(m: Machine, gone: int) -> list[PciFunction]:
    """Every PCI function the LXD resources data of this machine lists, in address order."""
    functions = [*gpu_functions(m, gone), *nic_functions(m), *nvme_functions(m)]
    if m.hardware.bmc_vga:
        functions.append(BMC_VGA)
    for i in range(nvswitch_count(m)):
        bus = NVSWITCH_BUSES[i] if i < len(NVSWITCH_BUSES) else 0x09 + i
        functions.append(
            PciFunction(
                f"0000:{bus:02x}:00.0",
                "10de",
                "22a3",
                "NVIDIA Corporation",
                "GH100 [H100 NVSwitch]",
                "",
                0 if i < nvswitch_count(m) // 2 else m.hardware.numa_nodes - 1,
            )
        )
    return sorted(functions, key=lambda f: f.pci_address)


def apply_nics(m: Machine) -> None:
    """The NIC attributes commissioning reads: vendor, product, firmware, NUMA node, SR-IOV
    (an ``sriov`` tag), the rated speed, and the negotiated one (0 without carrier;
    ``nic_slow`` slows a port)."""
    for iface in m.interfaces:
        if iface.type != "physical":
            continue
        spec = nic_spec(m, iface.mac_address)
        if spec.name:
            iface.name = spec.name  # MAAS names a NIC as the machine's OS reports it
        iface.vendor, iface.product = spec.vendor, spec.product
        iface.firmware_version = spec.firmware_version
        iface.numa_node, iface.sriov_max_vf = spec.numa_node, spec.sriov_max_vf
        iface.interface_speed = spec.rated
        iface.link_connected = iface.connected
        slow = m.faults.nic_slow.get(iface.name)
        iface.link_speed = (slow if slow is not None else spec.speed) if iface.connected else 0
        if spec.sriov_max_vf > 0 and "sriov" not in iface.tags:
            iface.tags.append("sriov")


def hardware_type(
    function: PciFunction, interfaces: dict[str, int], disks: dict[str, int]
) -> tuple[int, int | None, int | None]:
    """MAAS's choice of a device's type: a NIC MAAS has as an interface, a disk it has as a
    block device, a display-class function (LXD's gpu.cards), else a plain node device."""
    if function.mac_address in interfaces:
        return NETWORK, None, interfaces[function.mac_address]
    if function.disk in disks:
        return STORAGE, disks[function.disk], None
    if function.display:
        return GPU, None, None
    return NODE, None, None


def update_node_devices(m: Machine, new_id: Callable[[], int], gone: int) -> list[Change]:
    """``update_node_devices``: devices are matched by (vendor, product, address); a changed
    one is updated in place (its id kept), new ones are added, vanished ones removed."""
    interfaces = {i.mac_address: i.id for i in m.interfaces if i.type == "physical"}
    disks = {d.name: d.id for d in m.storage.physical}
    old = {d.key: d for d in m.node_devices}
    changes: list[Change] = []
    devices = []
    for function in pci_functions(m, gone):
        kind, disk_id, iface_id = hardware_type(function, interfaces, disks)
        device = old.pop((function.vendor_id, function.product_id, function.pci_address), None)
        if device is None:
            bus_number, device_number = bdf_numbers(function.pci_address)
            device = NodeDevice(
                new_id(),
                1,
                kind,
                function.numa_node,
                function.vendor_id,
                function.product_id,
                function.vendor_name,
                function.product_name,
                function.driver,
                bus_number,
                device_number,
                function.pci_address,
                disk_id,
                iface_id,
            )
            changes.append(("added", device))
        else:
            fields = {
                "hardware_type": kind,
                "numa_node": function.numa_node,
                "physical_blockdevice": disk_id,
                "physical_interface": iface_id,
                "vendor_name": function.vendor_name,
                "product_name": function.product_name,
                "commissioning_driver": function.driver,
            }
            if any(getattr(device, k) != v for k, v in fields.items()):
                for k, v in fields.items():
                    setattr(device, k, v)
                changes.append(("updated", device))
        devices.append(device)
    changes.extend(("removed", d) for d in old.values())
    m.node_devices = devices
    return changes


def node_devices(m: Machine, new_id: Callable[[], int]) -> list[NodeDevice]:
    """MAAS's node devices of the machine, made now if their first read is still due."""
    if m.devices_due is not None:
        update_node_devices(m, new_id, m.devices_due)
        m.devices_due = None
    return m.node_devices


def read_hardware(
    m: Machine, new_id: Callable[[], int], *, networking: bool = True
) -> list[Change]:
    """What the commissioning hook records besides disks and links: NUMA nodes,
    ``hardware_info``, the NIC attributes (not with ``skip_networking``), the node devices. A
    machine's first read makes its devices when first needed (seeding 10,000 machines stays
    cheap); nothing to report then."""
    m.numa_nodes = max(m.hardware.numa_nodes, 1)
    m.hardware_info = m.hardware.info.read(m.hardware_uuid[-12:])
    if networking:
        apply_nics(m)
    if not m.node_devices:
        m.devices_due = gpus_gone(m)
        return []
    node_devices(m, new_id)
    return update_node_devices(m, new_id, gpus_gone(m))

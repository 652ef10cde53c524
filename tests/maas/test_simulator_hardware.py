"""What a machine has and what MAAS knows of it, over HTTP as a MAAS client reads it: the machine's
hardware fields (``hardware_info``, ``numanode_set``, NIC and disk attributes), node devices
(``nodes/{id}/devices/``) with every filter and refusal, and the hardware faults (docs/simulator.md,
"Hardware")."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.maas import Api, Sim, make_sim

ALICE_KEY = "AliceConsumerKey12:AliceTokenKey12345:AliceTokenSecretABCDEFGHIJKLMNOP"
DEVICE_KEYS = {
    "id",
    "bus",
    "bus_name",
    "hardware_type",
    "hardware_type_name",
    "system_id",
    "numa_node",
    "physical_blockdevice",
    "physical_interface",
    "vendor_id",
    "product_id",
    "vendor_name",
    "product_name",
    "commissioning_driver",
    "bus_number",
    "device_number",
    "pci_address",
    "resource_uri",
}
HARDWARE_INFO_KEYS = {
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
}


@pytest.fixture
def hw(sims: list[Sim]) -> Sim:
    """A site with a non-admin user besides the admin."""
    s = make_sim({"users": [{"username": "alice", "is_superuser": False, "api_key": ALICE_KEY}]})
    sims.append(s)
    return s


def devices(api: Api, sid: str, **query: Any) -> list[dict[str, Any]]:
    response = api.get(f"nodes/{sid}/devices/", **query)
    assert response.status_code == 200, response.text
    return list(response.json())


def nvidia_gpus(api: Api, sid: str) -> list[dict[str, Any]]:
    return devices(api, sid, hardware_type="gpu", vendor_id="10de")


def refused(response: Any, status: int, text: str) -> None:
    assert (response.status_code, response.text) == (status, text)
    # MAAS's own refusals carry a charset; piston's 404 for an object not found is bare
    # (recorded against MAAS 3.5.10)
    bare = response.status_code == 404 and text.endswith("matches the given query.")
    assert response.headers["Content-Type"] == (
        "text/plain" if bare else "text/plain; charset=utf-8"
    )


# -- the machine object -------------------------------------------------------------------------


def test_a_commissioned_machine_shows_its_hardware_info_and_numa_nodes(api: Api, sim: Sim) -> None:
    sid = sim.add(
        hostname="hi1",
        status="ready",
        cpu_count=224,
        memory=2_063_872,
        numa_nodes=2,
        hardware_info={
            "system_vendor": "Dell Inc.",
            "system_product": "PowerEdge XE9680",
            "mainboard_firmware_version": "1.6.10",
            "mainboard_firmware_date": "03/12/2024",
            "chassis_serial": "0123456789",  # an SMBIOS filler: MAAS shows Unknown
            "mainboard_serial": "None",
        },
    )
    machine = api.machine(sid)
    info = machine["hardware_info"]
    assert set(info) == HARDWARE_INFO_KEYS
    assert (info["system_vendor"], info["system_product"]) == ("Dell Inc.", "PowerEdge XE9680")
    assert (info["mainboard_firmware_version"], info["mainboard_firmware_date"]) == (
        "1.6.10",
        "03/12/2024",
    )
    assert info["cpu_model"] == "Intel(R) Xeon(R) Platinum 8480+"  # the default
    assert (info["chassis_serial"], info["mainboard_serial"], info["system_sku"]) == (
        "Unknown",
        "Unknown",
        "Unknown",
    )
    numa = machine["numanode_set"]
    assert [n["index"] for n in numa] == [0, 1]
    assert numa[0]["cores"] == list(range(112)) and numa[1]["cores"] == list(range(112, 224))
    assert [n["memory"] for n in numa] == [1_031_936, 1_031_936]
    assert all(n["hugepages_set"] == [] for n in numa)


def test_a_machine_created_through_the_api_is_unknown_hardware_until_commissioned(
    api: Api, sim: Sim
) -> None:
    created = api.post(
        "machines/",
        data={
            "architecture": "amd64",
            "mac_addresses": "52:54:00:12:34:56",
            "power_type": "manual",
            "commission": "false",
        },
    )
    assert created.status_code == 200, created.text
    machine = created.json()
    sid = machine["system_id"]
    assert set(machine["hardware_info"].values()) == {"Unknown"}
    assert machine["numanode_set"] == [{"index": 0, "cores": [], "memory": 0, "hugepages_set": []}]
    [nic] = machine["interface_set"]
    assert (nic["vendor"], nic["product"], nic["interface_speed"], nic["link_speed"]) == (
        None,
        None,
        0,
        0,
    )
    assert devices(api, sid) == []
    api.ok(sid, "commission")
    sim.advance(130)
    machine = api.machine(sid)
    assert machine["hardware_info"]["system_vendor"] == "Supermicro"
    assert machine["interface_set"][0]["vendor"] == "Intel Corporation"
    assert len(nvidia_gpus(api, sid)) == 8


def test_nic_attributes_come_from_the_scenario_and_default_to_25g_intel_ports(
    api: Api, sim: Sim
) -> None:
    sid = sim.add(
        hostname="nic1",
        status="ready",
        interfaces=[
            {"name": "eno1", "mac_address": "52:54:00:aa:01:01", "subnet": 1},
            {
                "name": "ens10f0np0",
                "mac_address": "52:54:00:aa:01:02",
                "subnet": 2,
                "vendor": "Mellanox Technologies",
                "product": "MT2910 Family [ConnectX-7]",
                "firmware_version": "28.39.1002",
                "speed": 200000,
                "interface_speed": 400000,
                "numa_node": 1,
                "sriov_max_vf": 16,
            },
            {"name": "ens10f1np1", "mac_address": "52:54:00:aa:01:03", "connected": False},
        ],
    )
    eno1, cx7, unplugged = api.machine(sid)["interface_set"]
    assert (eno1["vendor"], eno1["product"]) == (
        "Intel Corporation",
        "Ethernet Controller E810-XXV for SFP",
    )
    assert (eno1["interface_speed"], eno1["link_speed"], eno1["link_connected"]) == (
        25000,
        25000,
        True,
    )
    assert (eno1["sriov_max_vf"], eno1["tags"]) == (0, [])
    assert (cx7["vendor"], cx7["product"], cx7["firmware_version"]) == (
        "Mellanox Technologies",
        "MT2910 Family [ConnectX-7]",
        "28.39.1002",
    )
    assert (cx7["interface_speed"], cx7["link_speed"], cx7["numa_node"]) == (400000, 200000, 1)
    assert (cx7["sriov_max_vf"], cx7["tags"]) == (16, ["sriov"])
    assert (unplugged["link_connected"], unplugged["link_speed"]) == (False, 0)
    assert unplugged["interface_speed"] == 25000


def test_disks_show_firmware_numa_node_and_id_path(api: Api, sim: Sim) -> None:
    sid = sim.add(
        hostname="dk1",
        status="ready",
        disks=[
            {
                "name": "nvme0n1",
                "size": 3_840_755_982_336,
                "model": "SAMSUNG MZQL23T8HCLS-00A07",
                "serial": "S64HNE0T1",
                "firmware_version": "GDC5602Q",
                "numa_node": 1,
                "tags": ["ssd"],
            },
            {"name": "sda", "size": 480_103_981_056, "model": "MZ7L3480", "tags": ["ssd"]},
        ],
    )
    nvme, sda = api.machine(sid)["physicalblockdevice_set"]
    assert (nvme["firmware_version"], nvme["numa_node"], nvme["serial"]) == (
        "GDC5602Q",
        1,
        "S64HNE0T1",
    )
    assert nvme["id_path"] == "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T1"
    assert (sda["id_path"], sda["firmware_version"], sda["numa_node"]) == ("/dev/sda", None, 0)
    storage = devices(api, sid, hardware_type="storage")
    assert [(d["physical_blockdevice"]["id"], d["numa_node"]) for d in storage] == [(nvme["id"], 1)]


# -- node devices -------------------------------------------------------------------------------


def test_node_devices_of_a_default_gpu_server(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="nd1", status="ready")
    machine = api.machine(sid)
    listed = devices(api, sid)
    assert all(set(d) == DEVICE_KEYS for d in listed)
    gpus = [d for d in listed if d["hardware_type"] == 5]
    # the BMC's VGA is a display-class function too: counting GPUs needs the vendor
    assert len(gpus) == 9
    assert [d["vendor_id"] for d in gpus].count("10de") == 8
    aspeed = next(d for d in gpus if d["vendor_id"] == "1a03")
    assert (aspeed["product_id"], aspeed["hardware_type_name"]) == ("2000", "GPU")
    h100 = next(d for d in gpus if d["pci_address"] == "0000:18:00.0")
    assert h100 == {
        "id": h100["id"],
        "bus": 1,
        "bus_name": "PCIE",
        "hardware_type": 5,
        "hardware_type_name": "GPU",
        "system_id": sid,
        "numa_node": 0,
        "physical_blockdevice": None,
        "physical_interface": None,
        "vendor_id": "10de",
        "product_id": "2330",
        "vendor_name": "NVIDIA Corporation",
        "product_name": "GH100 [H100 SXM5 80GB]",
        "commissioning_driver": "nvidia",
        "bus_number": 24,
        "device_number": 0,
        "pci_address": "0000:18:00.0",
        "resource_uri": f"/MAAS/api/2.0/nodes/{sid}/devices/{h100['id']}/",
    }
    # spread evenly over the two NUMA nodes
    assert sorted(d["numa_node"] for d in gpus if d["vendor_id"] == "10de") == [0] * 4 + [1] * 4
    switches = [d for d in listed if d["product_name"] == "GH100 [H100 NVSwitch]"]
    assert switches and {d["hardware_type_name"] for d in switches} == {"Node"}
    # a NIC's and a disk's node device nest the whole interface and block device, as MAAS
    # renders those foreign keys (onboarding-sequence.jsonl step 35)
    nics = {d["physical_interface"]["id"]: d for d in listed if d["hardware_type"] == 4}
    assert set(nics) == {i["id"] for i in machine["interface_set"]}
    assert {d["vendor_id"] for d in nics.values()} == {"8086"}
    nested = {i["id"]: i for i in api.get(f"nodes/{sid}/interfaces/").json()}
    assert all(d["physical_interface"] == nested[i] for i, d in nics.items())
    disks = {d["physical_blockdevice"]["id"]: d for d in listed if d["hardware_type"] == 3}
    assert set(disks) == {d["id"] for d in machine["physicalblockdevice_set"]}
    shown = {d["id"]: d for d in api.get(f"nodes/{sid}/blockdevices/").json()}
    assert all(d["physical_blockdevice"] == shown[i] for i, d in disks.items())


def test_gpus_and_the_bmc_vga_come_from_the_scenario(api: Api, sim: Sim) -> None:
    none = sim.add(hostname="nd2", status="ready", gpus={"count": 0}, bmc_vga=False)
    assert devices(api, none, hardware_type="gpu") == []
    assert devices(api, none, vendor_id="10de") == []  # no NVSwitch without NVIDIA GPUs
    b200 = sim.add(
        hostname="nd3",
        status="ready",
        numa_nodes=2,
        gpus={
            "count": 4,
            "product_id": "2901",
            "product_name": "GB100 [B200]",
            "numa_nodes": [1, 1, 1, 0],
        },
    )
    gpus = nvidia_gpus(api, b200)
    assert [(d["product_id"], d["product_name"]) for d in gpus] == [("2901", "GB100 [B200]")] * 4
    assert sorted(d["numa_node"] for d in gpus) == [0, 1, 1, 1]


def test_node_device_filters(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="nf1", status="ready")
    for value in ("gpu", "GPU", "graphics", "5"):
        assert len(devices(api, sid, hardware_type=value)) == 9
    assert {d["hardware_type"] for d in devices(api, sid, hardware_type="net")} == {4}
    assert {d["hardware_type"] for d in devices(api, sid, hardware_type="disk")} == {3}
    assert {d["hardware_type"] for d in devices(api, sid, hardware_type="generic")} == {0}
    assert devices(api, sid, hardware_type="cpu") == []
    every = devices(api, sid)
    for value in ("PCIE", "pcie", "1"):
        assert devices(api, sid, bus=value) == every
    assert devices(api, sid, bus="usb") == devices(api, sid, bus="2") == []
    # exact, case-insensitive matches; a part of a name matches nothing
    assert len(devices(api, sid, vendor_id="10DE", product_id="2330")) == 8
    assert len(devices(api, sid, vendor_name="nvidia corporation")) == 12  # GPUs, NVSwitches
    assert devices(api, sid, vendor_name="NVIDIA") == []
    assert len(devices(api, sid, product_name="gh100 [h100 sxm5 80gb]")) == 8
    assert devices(api, sid, product_name="H100") == []
    assert len(devices(api, sid, commissioning_driver="NVIDIA")) == 8
    assert len(devices(api, sid, commissioning_driver="ice")) == 2
    assert devices(api, sid, commissioning_driver="nv") == []


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ({"hardware_type": "fpga"}, "Hardware type must be node, cpu, memory, storage, or gpu"),
        ({"hardware_type": "6"}, "Invalid hardware type numeric value."),
        ({"bus": "Pcie"}, "Bus must be PCIE or USB!"),
        ({"bus": "pci"}, "Bus must be PCIE or USB!"),
        ({"bus": "0"}, "Invalid bus numeric value!"),
    ],
)
def test_node_device_filter_refusals(api: Api, sim: Sim, query: dict[str, str], text: str) -> None:
    sid = sim.add(hostname="nr1", status="ready")
    refused(api.get(f"nodes/{sid}/devices/", **query), 400, text)


def test_one_node_device_by_id_bus_device_pair_or_pci_address(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="no1", status="ready")
    gpu = next(d for d in devices(api, sid) if d["pci_address"] == "0000:9a:00.0")
    for ref in (str(gpu["id"]), "154:0", "0000:9a:00.0"):
        response = api.get(f"nodes/{sid}/devices/{ref}/")
        assert (response.status_code, response.json()) == (200, gpu)
    # the pair is the device's bus and device *numbers*, decimal: 0x9a is 154
    refused(api.get(f"nodes/{sid}/devices/9a:0/"), 400, "Invalid id format!")
    refused(api.get(f"nodes/{sid}/devices/h100-0/"), 400, "Invalid id format!")
    refused(api.get(f"nodes/{sid}/devices/1:2:3/"), 400, "Invalid id format!")
    # a pair or address that finds nothing is the same 400 in MAAS, not a 404
    refused(api.get(f"nodes/{sid}/devices/0000:77:00.0/"), 400, "Invalid id format!")
    refused(api.get(f"nodes/{sid}/devices/200:0/"), 400, "Invalid id format!")
    # both ports of a NIC card share bus 0x31 and device 0: the pair is not one device
    refused(api.get(f"nodes/{sid}/devices/49:0/"), 400, "Invalid id format!")
    refused(api.get(f"nodes/{sid}/devices/999999/"), 404, "No NodeDevice matches the given query.")


def test_node_devices_of_an_unknown_node_or_anothers_machine(hw: Sim) -> None:
    admin, alice = Api(hw), Api(hw, ALICE_KEY)
    refused(admin.get("nodes/nosuch/devices/"), 404, "No Node matches the given query.")
    refused(admin.get("nodes/nosuch/devices/1/"), 404, "No Node matches the given query.")
    theirs = hw.add(hostname="nu1", status="deployed")  # owned by admin
    assert (
        alice.get(f"nodes/{theirs}/devices/").status_code,
        alice.get(f"nodes/{theirs}/devices/").text,
    ) == (403, "")
    free = hw.add(hostname="nu2", status="ready")
    assert len(devices(alice, free, hardware_type="gpu")) == 9


def test_deleting_a_node_device_is_for_admins_and_commissioning_brings_it_back(hw: Sim) -> None:
    admin, alice = Api(hw), Api(hw, ALICE_KEY)
    sid = hw.add(hostname="nx1", status="ready")
    first, *others = nvidia_gpus(admin, sid)
    path = f"nodes/{sid}/devices/{first['id']}/"
    denied = alice.session.delete(alice.root + path)
    refused(denied, 403, "This method is reserved for admin users.")
    gone = admin.session.delete(admin.root + path)
    assert (gone.status_code, gone.text) == (204, "")
    assert len(nvidia_gpus(admin, sid)) == 7
    refused(admin.get(path), 404, "No NodeDevice matches the given query.")
    admin.ok(sid, "commission")
    hw.advance(130)
    back = {d["pci_address"]: d["id"] for d in nvidia_gpus(admin, sid)}
    assert len(back) == 8
    assert back[first["pci_address"]] != first["id"]  # a new row
    assert all(back[d["pci_address"]] == d["id"] for d in others)  # the others kept theirs


# -- faults -------------------------------------------------------------------------------------


def test_gpu_missing_commissioning_finds_fewer_gpus_than_the_machine_has(
    api: Api, sim: Sim
) -> None:
    seeded = sim.add(hostname="gm1", status="ready", faults={"gpu_missing": 2})
    assert len(nvidia_gpus(api, seeded)) == 6
    # the BMC's VGA is still there: 7 display devices for 8 GPUs bought
    assert len(devices(api, seeded, hardware_type="gpu")) == 7
    # MAAS's record is what commissioning saw, whatever the bus shows later
    sim.post(f"machines/{seeded}/faults", {"gpu_missing": 0})
    assert len(nvidia_gpus(api, seeded)) == 6
    untouched = sim.add(hostname="gm3", status="ready", faults={"gpu_missing": 3})
    sim.post(f"machines/{untouched}/faults", {"gpu_missing": 0})  # before any read of it
    assert len(nvidia_gpus(api, untouched)) == 5
    healthy = sim.add(hostname="gm2", status="ready")
    before = {d["pci_address"]: d["id"] for d in nvidia_gpus(api, healthy)}
    sim.post(f"machines/{healthy}/faults", {"gpu_missing": 1})
    assert len(nvidia_gpus(api, healthy)) == 8  # MAAS knows nothing until it looks again
    api.ok(healthy, "commission")
    sim.advance(130)
    after = {d["pci_address"]: d["id"] for d in nvidia_gpus(api, healthy)}
    assert set(before) - set(after) == {"0000:db:00.0"}  # the last slot is off the bus
    assert all(after[a] == before[a] for a in after)  # the others keep their ids


def test_a_repair_replaces_the_parts_and_the_next_commissioning_shows_them(
    api: Api, sim: Sim
) -> None:
    """``POST /_sim/machines/{sid}/repair``: a vendor's fix. MAAS's picture changes only when it
    commissions the machine again (its PCI devices are refreshed then, not before)."""
    sid = sim.add(hostname="rp1", status="ready",
                  faults={"gpu_missing": 1, "nic_slow": {"eno2": 10000}})  # fmt: skip
    assert len(nvidia_gpus(api, sid)) == 7
    sim.repair(sid)
    faults = sim.post(f"machines/{sid}/faults", {})["faults"]
    assert (faults["gpu_missing"], faults["nic_slow"]) == (0, {})
    assert len(nvidia_gpus(api, sid)) == 7  # MAAS has not looked yet
    api.ok(sid, "commission")
    sim.advance(130)
    assert len(nvidia_gpus(api, sid)) == 8


def test_nic_slow_a_port_negotiates_below_its_rating(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="ns1", status="ready", faults={"nic_slow": {"eno2": 10000}})
    eno1, eno2 = api.machine(sid)["interface_set"]
    assert (eno1["interface_speed"], eno1["link_speed"]) == (25000, 25000)
    assert (eno2["interface_speed"], eno2["link_speed"]) == (25000, 10000)
    other = sim.add(hostname="ns2", status="ready")
    sim.post(f"machines/{other}/faults", {"nic_slow": {"eno1": 1000}})
    api.ok(other, "commission")
    sim.advance(130)
    assert api.machine(other)["interface_set"][0]["link_speed"] == 1000


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"hardware_info": {"bios_vendor": "x"}}, "unknown hardware_info keys ['bios_vendor']"),
        ({"gpus": {"count": 2, "model": "H100"}}, "unknown gpus fields: ['model']"),
        ({"gpus": {"count": 2, "vendor_id": "nvidia"}}, "gpus.vendor_id must be 4 hex digits"),
        ({"gpus": {"count": 2, "numa_nodes": [0]}}, "gpus.numa_nodes must give each of the 2"),
        ({"numa_nodes": 0}, "numa_nodes must be 1 or more"),
        ({"faults": {"gpu_missing": -1}}, "gpu_missing must be a count"),
        ({"faults": {"nic_slow": {"eth9": 1000}}}, "nic_slow names no NIC ['eth9']"),
        (
            {"interfaces": [{"name": "e1", "mac_address": "52:54:00:00:00:01", "numa_node": 2}]},
            "numa_node must be below numa_nodes (2)",
        ),
    ],
)
def test_bad_hardware_in_a_scenario_is_refused(spec: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        make_sim({"machines": [{"hostname": "bad", **spec}]})

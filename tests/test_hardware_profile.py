"""SKU hardware profiles (maas_domain/hardware.py, docs/hardware.md): what a profile may say,
refused with the field and the reason when no machine could satisfy it, and the judgement of a
machine as MAAS describes it (the JSON of MAAS 3.5's machine and node-device answers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maas_client.hardware import MachineHardware, NodeDevice
from maas_domain import hardware
from maas_domain.errors import InvalidInput

H100 = {
    "vendor_id": "10de",
    "product_id": "2330",
    "vendor_name": "NVIDIA Corporation",
    "product_name": "GH100 [H100 SXM5 80GB]",
    "commissioning_driver": "nvidia",
}
ASPEED = {
    "vendor_id": "1a03",
    "product_id": "2000",
    "vendor_name": "ASPEED Technology, Inc.",
    "product_name": "ASPEED Graphics Family",
    "commissioning_driver": "ast",
}


def device(i: int, spec: dict[str, Any], *, kind: int = 5, numa: int | None = 0) -> dict[str, Any]:
    return {
        "id": i,
        "bus": 1,
        "bus_name": "PCIE",
        "hardware_type": kind,
        "hardware_type_name": "GPU",
        "system_id": "abc123",
        "numa_node": numa,
        "physical_blockdevice": None,
        "physical_interface": None,
        "pci_address": f"0000:{i:02x}:00.0",
        **spec,
    }


def gpus(count: int = 8, *, bmc_vga: bool = True) -> list[NodeDevice]:
    rows = [device(i + 1, H100, numa=0 if i < count / 2 else 1) for i in range(count)]
    if bmc_vga:
        rows.append(device(99, ASPEED, numa=0))
    return [NodeDevice.from_json(r) for r in rows]


def nic(
    i: int, name: str, speed: int, *, vendor: str = "Mellanox Technologies", connected: bool = True
) -> dict[str, Any]:
    return {
        "id": i,
        "name": name,
        "type": "physical",
        "mac_address": f"52:54:00:00:00:{i:02x}",
        "vendor": vendor,
        "product": "MT2910 Family [ConnectX-7]",
        "firmware_version": "28.1",
        "link_connected": connected,
        "link_speed": speed if connected else 0,
        "interface_speed": 400000,
        "numa_node": 0,
        "enabled": True,
    }


def machine(**changes: Any) -> MachineHardware:
    data: dict[str, Any] = {
        "system_id": "abc123",
        "hostname": "g01",
        "status": 4,
        "status_name": "Ready",
        "cpu_count": 224,
        "memory": 2 * 1024 * 1024,
        "hardware_info": {"mainboard_firmware_version": "2.1.0", "system_product": "HGX"},
        "numanode_set": [
            {"index": 0, "cores": [], "memory": 0},
            {"index": 1, "cores": [], "memory": 0},
        ],
        "boot_interface": {"id": 1},
        "interface_set": [nic(1, "eno1", 25000, vendor="Intel Corporation")]
        + [nic(10 + i, f"ens{i}np0", 400000) for i in range(8)],
        "physicalblockdevice_set": [
            {
                "id": 1,
                "name": "nvme0n1",
                "model": "MZ1L2960",
                "serial": "S1",
                "size": 960 * 10**9,
                "tags": ["ssd"],
                "id_path": "/dev/disk/by-id/nvme-S1",
            },
            {
                "id": 2,
                "name": "nvme1n1",
                "model": "MZQL27T6",
                "serial": "S2",
                "size": 7680 * 10**9,
                "tags": ["ssd"],
                "id_path": "/dev/disk/by-id/nvme-S2",
            },
        ],
    }
    data.update(changes)
    return MachineHardware.from_json(data)


PROFILE = {
    "gpu": {"pci_ids": ["10de:2330"], "per_numa_node": {"0": 4, "1": 4}},
    "cpu": {"min": 112, "max": 224},
    "memory": {"min_gib": 2000},
    "nics": [
        {"role": "fabric", "count": 8, "min_speed_mbps": 400000, "vendor": "Mellanox"},
        {"role": "pxe", "pxe": True, "count": 1, "min_speed_mbps": 25000},
    ],
    "disks": [{"count": 1, "min_size_gb": 7000, "type": "nvme"}],
    "firmware": {"mainboard_firmware_version": ["2.1.0", "2.1.1"]},
}


def verdict(
    mach: MachineHardware | None = None,
    devices: list[NodeDevice] | None = None,
    profile: dict[str, Any] | None = None,
    count: int = 8,
    model: str = "H100",
) -> dict[str, tuple[bool, str]]:
    clean = hardware.validate_profile(
        PROFILE if profile is None else profile, gpu_count=count, gpu_model=model
    )
    checks = hardware.judge(
        gpu_count=count,
        gpu_model=model,
        hardware=clean,
        machine=mach or machine(),
        devices=gpus() if devices is None else devices,
    )
    return {c.requirement: (c.passed, c.observed) for c in checks}


# -- judging ---------------------------------------------------------------------------------------


def test_the_machine_a_sku_promises_passes_every_requirement() -> None:
    found = verdict()
    assert set(found) == {
        "gpu.count",
        "gpu.model",
        "gpu.per_numa_node",
        "cpu.count",
        "memory",
        "nics.fabric",
        "nics.pxe",
        "disks.0",
        "firmware.mainboard_firmware_version",
    }
    assert all(ok for ok, _ in found.values()), found


def test_a_gpu_off_the_bus_fails_the_count_and_the_numa_placement() -> None:
    seven = [d for d in gpus() if d.id != 8]  # the last GPU of NUMA node 1
    found = verdict(devices=seven)
    assert found["gpu.count"][0] is False and found["gpu.count"][1].startswith("7")
    assert found["gpu.per_numa_node"] == (False, "NUMA 0: 4, NUMA 1: 3")
    assert found["gpu.model"][0] is True


def test_the_bmc_video_chip_is_never_counted_as_a_gpu() -> None:
    """MAAS types a BMC's VGA function GPU too: counting by hardware type alone would make
    seven H100s and an ASPEED look like eight."""
    seven_and_vga = [d for d in gpus() if d.id != 8]
    found = verdict(devices=seven_and_vga, profile={}, model="")  # count by accelerator vendor
    assert found["gpu.count"][0] is False
    assert found["gpu.count"][1].startswith("7; not counted: ASPEED")
    assert verdict(devices=gpus(), profile={}, model="")["gpu.count"][0] is True


def test_a_gpu_of_another_model_fails_the_model_not_the_count() -> None:
    a100 = dict(H100, product_id="20b0", product_name="GA100 [A100 SXM4 80GB]")
    devices = [*gpus(7), NodeDevice.from_json(device(50, a100, numa=1))]
    found = verdict(devices=devices, profile={})
    assert found["gpu.count"][0] is True  # 8 NVIDIA accelerators
    assert found["gpu.model"][0] is False and "A100" in found["gpu.model"][1]
    # named by PCI id, the A100 is not one of the eight
    assert verdict(devices=devices)["gpu.count"][0] is False


def test_one_fabric_nic_linking_slow_fails_its_role_naming_it() -> None:
    nics = [nic(1, "eno1", 25000, vendor="Intel Corporation")]
    nics += [nic(10 + i, f"ens{i}np0", 100000 if i == 3 else 400000) for i in range(8)]
    found = verdict(mach=machine(interface_set=nics))
    assert found["nics.fabric"] == (False, "7 of 8 matching; short: ens3np0 at 100G")
    assert found["nics.pxe"][0] is True


def test_a_fabric_nic_with_no_link_is_short_whatever_its_rated_speed() -> None:
    nics = [nic(1, "eno1", 25000, vendor="Intel Corporation")]
    nics += [nic(10 + i, f"ens{i}np0", 400000, connected=i != 0) for i in range(8)]
    assert verdict(mach=machine(interface_set=nics))["nics.fabric"] == (
        False,
        "7 of 8 matching; short: ens0np0 no link",
    )


def test_the_pxe_role_is_the_boot_interface_only() -> None:
    slow_boot = [nic(1, "eno1", 10000, vendor="Intel Corporation")]
    slow_boot += [nic(10 + i, f"ens{i}np0", 400000) for i in range(8)]
    found = verdict(mach=machine(interface_set=slow_boot))
    assert found["nics.pxe"] == (False, "0 of 1 matching; short: eno1 at 10G")
    # a role with no match counts the NICs other than the boot one
    plain = {"nics": [{"role": "data", "count": 9, "min_speed_mbps": 1}]}
    assert verdict(profile=plain)["nics.data"][0] is False
    assert verdict(profile={"nics": [{"role": "data", "count": 8}]})["nics.data"][0] is True


def test_half_the_memory_a_missing_nvme_and_too_few_cpus_each_fail() -> None:
    found = verdict(mach=machine(memory=1024 * 1024, cpu_count=96, physicalblockdevice_set=[]))
    assert found["memory"] == (False, "1024 GiB")
    assert found["cpu.count"] == (False, "96")
    assert found["disks.0"] == (False, "0 of 0 matching")


def test_a_small_disk_of_the_right_kind_is_named() -> None:
    small = copy.deepcopy(machine().disks)
    disks = [
        {
            "id": d.id,
            "name": d.name,
            "model": d.model,
            "serial": d.serial,
            "size": 10**12,
            "tags": list(d.tags),
        }
        for d in small
    ]
    assert verdict(mach=machine(physicalblockdevice_set=disks))["disks.0"] == (
        False,
        "0 of 2 matching; small: nvme0n1 1000 GB, nvme1n1 1000 GB",
    )


def test_a_firmware_outside_the_baseline_fails_and_unknown_is_not_a_match() -> None:
    old = machine(hardware_info={"mainboard_firmware_version": "1.9.9"})
    assert verdict(mach=old)["firmware.mainboard_firmware_version"] == (False, "1.9.9")
    unknown = machine(hardware_info={})
    assert verdict(mach=unknown)["firmware.mainboard_firmware_version"] == (False, "Unknown")


def test_a_sku_that_states_only_gpus_checks_only_gpus() -> None:
    """What SKUs stated before profiles existed keeps meaning the same: count and model."""
    found = verdict(profile={}, mach=machine(memory=1, cpu_count=1, interface_set=[]))
    assert set(found) == {"gpu.count", "gpu.model"}
    assert not hardware.states_requirements(0, {})
    assert hardware.states_requirements(8, {}) and hardware.states_requirements(0, {"cpu": {}})


def test_report_and_summary_say_what_failed() -> None:
    checks = hardware.judge(
        gpu_count=8, gpu_model="", hardware={}, machine=machine(), devices=gpus(6)
    )
    report = hardware.report(checks, sku="h100x8")
    assert report["conformant"] is False and report["sku"] == "h100x8"
    assert report["checks"][0]["requirement"] == "gpu.count"
    assert hardware.failed_summary(checks).startswith("gpu.count: expected 8 accelerator GPUs")
    assert hardware.report([], sku="x")["conformant"] is True  # nothing stated, nothing failed


# -- validation ------------------------------------------------------------------------------------


def refused(profile: Any, count: int = 8) -> dict[str, list[str]]:
    with pytest.raises(InvalidInput) as info:
        hardware.validate_profile(profile, gpu_count=count, gpu_model="")
    fields: dict[str, list[str]] = info.value.extra["fields"]
    return fields


def test_a_complete_profile_is_kept_as_given() -> None:
    clean = hardware.validate_profile(PROFILE, gpu_count=8, gpu_model="H100")
    assert clean["nics"] == PROFILE["nics"]  # kept as given: what a client reads back
    assert clean["gpu"] == PROFILE["gpu"]
    assert clean["disks"] == [{"count": 1, "type": "nvme", "min_size_gb": 7000}]
    assert hardware.validate_profile({}, gpu_count=0, gpu_model="") == {}


@pytest.mark.parametrize(
    ("profile", "field", "reason"),
    [
        ({"cpu": {"min": 256, "max": 128}}, "hardware.cpu.min", "Above cpu.max"),
        ({"cpu": {}}, "hardware.cpu", "Give min, max or both"),
        (
            {"gpu": {"per_numa_node": {"0": 4, "1": 3}}},
            "hardware.gpu.per_numa_node",
            "Adds up to 7",
        ),
        ({"gpu": {"per_numa_node": {"zero": 8}}}, "hardware.gpu.per_numa_node.zero", "NUMA index"),
        ({"gpu": {"pci_ids": ["10DE:2330"]}}, "hardware.gpu.pci_ids", "Not a PCI id"),
        ({"gpu": {"pci_ids": ["10de:2330\n"]}}, "hardware.gpu.pci_ids", "Not a PCI id"),
        ({"gpus": {}}, "hardware.gpus", "Unknown field"),
        ({"memory": {"min_gib": 10**9}}, "hardware.memory.min_gib", "between 1 and 65536"),
        ({"memory": {"min_gib": True}}, "hardware.memory.min_gib", "integer"),
        (
            {"nics": [{"role": "f", "count": 1, "min_speed_mbps": 3_200_000}]},
            "hardware.nics.0.min_speed_mbps",
            "between 1 and 1600000",
        ),
        (
            {"nics": [{"role": "f", "count": 1}, {"role": "f", "count": 2}]},
            "hardware.nics",
            "given 2 times",
        ),
        (
            {
                "nics": [
                    {"role": "a", "count": 1, "pxe": True},
                    {"role": "b", "count": 1, "pxe": True},
                ]
            },
            "hardware.nics",
            "Only one requirement can be the PXE",
        ),
        ({"nics": [{"role": "pxe", "count": 2, "pxe": True}]}, "hardware.nics.0.count", "is 1"),
        ({"nics": [{"role": "Fabric!", "count": 1}]}, "hardware.nics.0.role", "A role is"),
        (
            {"nics": [{"role": "f", "count": 1, "vendor": "Mella\x1bnox"}]},
            "hardware.nics.0.vendor",
            "control characters",
        ),
        ({"disks": [{"count": 2, "type": "floppy"}]}, "hardware.disks.0.type", "One of"),
        ({"disks": [{"count": 0}]}, "hardware.disks.0.count", "between 1 and 64"),
        ({"firmware": {"bios_version": "1"}}, "hardware.firmware.bios_version", "Unknown field"),
        (
            {"firmware": {"mainboard_firmware_version": []}},
            "hardware.firmware.mainboard_firmware_version",
            "A value or a list",
        ),
        ([], "hardware", "Must be an object"),
    ],
)
def test_a_profile_no_machine_could_meet_is_refused_naming_the_field(
    profile: Any, field: str, reason: str
) -> None:
    fields = refused(profile)
    assert field in fields, fields
    assert any(reason in r for r in fields[field]), fields[field]


def test_gpu_requirements_need_a_gpu_count() -> None:
    assert "hardware.gpu" in refused({"gpu": {"pci_ids": ["10de:2330"]}}, count=0)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from([*hardware.SECTIONS, "min", "role", "count", "x"]),
                inner,
                max_size=5,
            )
        ),
        max_leaves=25,
    )
)
def test_any_json_is_a_clean_profile_or_a_400_never_a_crash(value: Any) -> None:
    try:
        clean = hardware.validate_profile(value, gpu_count=8, gpu_model="")
    except InvalidInput as exc:
        refusal = exc.extra["fields"]
        assert all(k.startswith("hardware") for k in refusal)
    else:  # what is accepted judges without error
        hardware.judge(gpu_count=8, gpu_model="", hardware=clean, machine=machine(), devices=gpus())

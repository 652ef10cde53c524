"""The simulator's storage model over raw HTTP: block devices, partitions, volume groups, the
storage layouts and how they hold across commissioning, deploy and release (MAAS 3.5's
``blockdevices.py``, ``partitions.py``, ``volume_groups.py``, ``storage_layouts.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.maas import API_KEY, Api, Sim, make_sim

MiB = 1024 * 1024
BOOT_SIZE = 960_197_124_096
DATA_SIZE = 7_681_501_126_656
BOB_KEY = "BobConsumerKey1234:BobTokenKey1234567:BobTokenSecretABCDEFGHIJKLMNOPQR"


def wait_status(api: Api, sid: str, label: str, sim: Sim, seconds: float = 400) -> dict[str, Any]:
    sim.advance(seconds)
    machine = api.machine(sid)
    assert machine["status_name"] == label
    return machine


def test_a_ready_machine_shows_its_disks_and_flat_layout(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="st01", status="ready")
    m = api.machine(sid)
    physical = m["physicalblockdevice_set"]
    assert [(d["name"], d["size"], d["type"]) for d in physical] == [
        ("nvme0n1", BOOT_SIZE, "physical"),
        ("nvme1n1", DATA_SIZE, "physical"),
    ]
    assert m["storage"] == (BOOT_SIZE + DATA_SIZE) / 1000 / 1000
    assert m["blockdevice_set"] == physical and m["virtualblockdevice_set"] == []
    boot = m["boot_disk"]
    assert boot["id"] == physical[0]["id"]
    assert boot["used_for"] == "GPT partitioned with 2 partitions"
    assert boot["partition_table_type"] == "GPT" and boot["tags"] == ["ssd"]
    efi, root = boot["partitions"]
    assert (efi["size"], efi["bootable"], efi["filesystem"]["mount_point"]) == (
        512 * MiB,
        True,
        "/boot/efi",
    )
    assert efi["filesystem"]["fstype"] == "fat32" and efi["filesystem"]["label"] == "efi"
    assert root["used_for"] == "ext4 formatted filesystem mounted at /"
    assert root["path"] == "/dev/disk/by-dname/nvme0n1-part2"
    # the GPT keeps 5 MiB; partitions align down to 4 MiB
    assert root["size"] == (BOOT_SIZE - 512 * MiB - 5 * MiB) // (4 * MiB) * (4 * MiB)
    assert boot["used_size"] == efi["size"] + root["size"] + 5 * MiB
    assert boot["available_size"] == BOOT_SIZE - boot["used_size"]
    data = physical[1]
    assert (data["used_for"], data["partitions"], data["filesystem"]) == ("Unused", [], None)
    assert data["partition_table_type"] is None and data["available_size"] == DATA_SIZE
    assert m["volume_groups"] == [] and m["raids"] == [] and m["bcaches"] == []


def test_block_device_partition_and_volume_group_endpoints(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="st02", status="ready")
    devices = api.get(f"nodes/{sid}/blockdevices/").json()
    boot = devices[0]
    assert boot["resource_uri"] == f"/MAAS/api/2.0/nodes/{sid}/blockdevices/{boot['id']}/"
    assert api.get(f"nodes/{sid}/blockdevices/{boot['id']}/").json() == boot
    assert api.get(f"nodes/{sid}/blockdevices/nvme0n1/").json()["id"] == boot["id"]  # by name
    parts = api.get(f"nodes/{sid}/blockdevices/{boot['id']}/partitions/").json()
    assert parts == boot["partitions"]
    root = parts[1]
    # the partition path has no trailing slash, and both "partition" and "partitions" work
    assert root["resource_uri"] == (
        f"/MAAS/api/2.0/nodes/{sid}/blockdevices/{boot['id']}/partition/{root['id']}"
    )
    for form in ("partition", "partitions"):
        read = api.get(f"nodes/{sid}/blockdevices/{boot['id']}/{form}/{root['id']}")
        assert (read.status_code, read.json()) == (200, root)
    assert api.get(f"nodes/{sid}/blockdevices/{devices[1]['id']}/partitions/").json() == []
    assert api.get(f"nodes/{sid}/volume-groups/").json() == []
    missing = api.get(f"nodes/{sid}/blockdevices/999999/")
    assert (missing.status_code, missing.text) == (404, "No BlockDevice matches the given query.")
    no_part = api.get(f"nodes/{sid}/blockdevices/{boot['id']}/partition/999999")
    assert (no_part.status_code, no_part.text) == (404, "No Partition matches the given query.")
    no_machine = api.get("nodes/zzzzzz/blockdevices/")
    assert (no_machine.status_code, no_machine.text) == (404, "No Machine matches the given query.")


def test_lvm_layout_builds_a_volume_group_and_a_logical_volume(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="st03", status="ready")
    m = api.ok(sid, "set_storage_layout", storage_layout="lvm", vg_name="vg0", lv_name="root")
    boot = m["boot_disk"]
    pv = boot["partitions"][1]
    assert pv["filesystem"]["fstype"] == "lvm-pv"
    assert pv["used_for"] == "LVM volume for vg0"
    [lv] = m["virtualblockdevice_set"]
    assert (lv["name"], lv["type"], lv["path"]) == (
        "vg0-root",
        "virtual",
        "/dev/disk/by-dname/vg0-root",
    )
    assert lv["filesystem"]["mount_point"] == "/" and lv["uuid"]
    assert lv["model"] is None and lv["serial"] is None
    assert [d["name"] for d in m["blockdevice_set"]] == ["nvme0n1", "nvme1n1", "vg0-root"]
    [incomplete] = m["volume_groups"]
    vgs = api.get(f"nodes/{sid}/volume-groups/").json()
    [vg] = vgs
    assert incomplete == {"system_id": sid, "id": vg["id"], "__incomplete__": True}
    # one 4 MiB extent per physical volume is kept for the LVM headers
    expected = (pv["size"] // (4 * MiB) - 1) * (4 * MiB)
    assert (vg["name"], vg["size"], vg["used_size"], vg["available_size"]) == (
        "vg0",
        expected,
        expected,
        0,
    )
    assert (
        vg["human_size"] == f"{expected / 1e9:.1f} GB" and vg["human_available_size"] == "0 bytes"
    )
    assert [d["id"] for d in vg["devices"]] == [pv["id"]]
    assert [v["id"] for v in vg["logical_volumes"]] == [lv["id"]]
    for form in ("volume-group", "volume-groups"):
        assert api.get(f"nodes/{sid}/{form}/{vg['id']}/").json() == vg
    # blank: no table, no filesystem anywhere; the disks stay
    blank = api.ok(sid, "set_storage_layout", storage_layout="blank")
    assert [d["used_for"] for d in blank["blockdevice_set"]] == ["Unused", "Unused"]
    assert blank["volume_groups"] == [] and blank["storage"] == m["storage"]


def test_layout_sizes_and_refusals(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="st04", status="ready")
    m = api.ok(sid, "set_storage_layout", storage_layout="flat", boot_size="1G", root_size="100G")
    _efi, boot, root = m["boot_disk"]["partitions"]
    assert boot["filesystem"]["mount_point"] == "/boot"
    assert boot["size"] == 1_000_000_000 // (4 * MiB) * (4 * MiB)
    assert root["size"] == 100_000_000_000 // (4 * MiB) * (4 * MiB)
    data = m["physicalblockdevice_set"][1]["id"]
    on_data = api.ok(sid, "set_storage_layout", storage_layout="flat", root_device=str(data))
    # root_device: "/" on the data disk, the EFI partition stays on the boot disk
    assert on_data["boot_disk"]["id"] != data
    assert [p["filesystem"]["mount_point"] for p in on_data["boot_disk"]["partitions"]] == [
        "/boot/efi"
    ]
    [root_part] = on_data["physicalblockdevice_set"][1]["partitions"]
    assert (root_part["filesystem"]["mount_point"], root_part["path"]) == (
        "/",
        "/dev/disk/by-dname/nvme1n1-part1",
    )
    assert root_part["size"] == (DATA_SIZE - 5 * MiB) // (4 * MiB) * (4 * MiB)
    bad_root = api.op(sid, "set_storage_layout", storage_layout="flat", root_device="7")
    assert bad_root.status_code == 400 and "root_device" in bad_root.json()
    for layout, text in (
        ("bcache", "Failed to configure storage layout 'bcache': bcache layouts are not simulated"),
        ("vmfs6", "Failed to configure storage layout 'vmfs6': vmfs6 layouts are not simulated"),
        (
            "custom",
            "Failed to configure storage layout 'custom': No custom storage layout "
            "configuration found",
        ),
    ):
        refused = api.op(sid, "set_storage_layout", storage_layout=layout)
        assert (refused.status_code, refused.text) == (400, text)
    assert api.machine(sid)["boot_disk"]["partitions"] == on_data["boot_disk"]["partitions"]
    missing = api.op(sid, "set_storage_layout")
    assert missing.json() == {"storage_layout": ["This field is required."]}
    for form, errors in (
        ({"root_size": "1e400"}, {"root_size": ["'1e400' is not a valid size."]}),
        ({"root_size": "-5G"}, {"root_size": ["Size is too small. Minimum size is 3221225472."]}),
        ({"root_size": "lots"}, {"root_size": ["'lots' is not a valid size."]}),
        (
            {"boot_size": "2T"},
            {
                "boot_size": [
                    f"Size is too large. Maximum size is {BOOT_SIZE - 512 * MiB - 3 * 1024 * MiB}."
                ]
            },
        ),
        (
            {"boot_size": "500G", "root_size": "500G"},
            {
                "__all__": [
                    "Size of the boot partition and root partition are larger than the "
                    "available space on the boot disk."
                ]
            },
        ),
        (
            {"storage_layout": "lvm", "root_size": "10G", "lv_size": "20G"},
            {"lv_size": ["Size is too large. Maximum size is 10000000000."]},
        ),
    ):
        bad = api.op(sid, "set_storage_layout", **{"storage_layout": "flat", **form})
        assert (bad.status_code, bad.json()) == (400, errors), form
    # a refused layout changes nothing
    assert api.machine(sid)["boot_disk"]["partitions"] == on_data["boot_disk"]["partitions"]
    half = api.ok(sid, "set_storage_layout", storage_layout="flat", root_size="50%")
    assert half["boot_disk"]["partitions"][1]["size"] == (
        (BOOT_SIZE - 512 * MiB) // 2 // (4 * MiB) * (4 * MiB)
    )


def test_a_machine_without_disks_cannot_take_a_layout(sims: list[Sim]) -> None:
    s = make_sim({"machines": [{"hostname": "nodisk", "status": "ready", "disks": []}]})
    sims.append(s)
    api = Api(s)
    sid = next(iter(s.model.machines))
    m = api.machine(sid)
    assert (m["boot_disk"], m["blockdevice_set"], m["storage"]) == (None, [], 0)
    refused = api.op(sid, "set_storage_layout", storage_layout="flat")
    assert (refused.status_code, refused.text) == (
        400,
        "Machine is missing a boot disk; no storage layout can be applied.",
    )


def test_commissioning_discovers_disks_and_applies_the_default_layout(api: Api, sim: Sim) -> None:
    created = api.post(
        "machines/",
        data={
            "architecture": "amd64",
            "mac_addresses": "52:54:00:77:00:01",
            "power_type": "manual",
            "commission": "false",
        },
    )
    assert created.status_code == 200, created.text
    sid = created.json()["system_id"]
    new = api.machine(sid)
    # MAAS knows nothing of the hardware before commissioning
    assert (new["cpu_count"], new["memory"], new["storage"], new["boot_disk"]) == (0, 0, 0, None)
    assert new["interface_set"][0]["vlan"] is None and new["interface_set"][0]["links"] == []
    api.ok(sid, "commission", testing_scripts="none")
    m = wait_status(api, sid, "Ready", sim, 200)
    assert m["cpu_count"] == 128 and m["memory"] == 2 * 1024 * 1024
    assert [d["name"] for d in m["physicalblockdevice_set"]] == ["nvme0n1", "nvme1n1"]
    assert m["boot_disk"]["used_for"] == "GPT partitioned with 2 partitions"
    # skip_storage: the storage hook leaves the block devices alone, so none are found
    other = api.post(
        "machines/",
        data={
            "architecture": "amd64",
            "mac_addresses": "52:54:00:77:00:02",
            "power_type": "manual",
            "commission": "false",
        },
    ).json()["system_id"]
    api.ok(other, "commission", skip_storage="1", testing_scripts="none")
    skipped = wait_status(api, other, "Ready", sim, 200)
    assert (skipped["cpu_count"], skipped["boot_disk"], skipped["storage"]) == (128, None, 0)


def test_layout_survives_deploy_and_release_and_commissioning_resets_it(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="st05", status="ready", power_type="manual")
    lvm = api.ok(sid, "set_storage_layout", storage_layout="lvm")
    api.ok(sid, "deploy", distro_series="jammy")
    deployed = wait_status(api, sid, "Deployed", sim)
    assert deployed["virtualblockdevice_set"] == lvm["virtualblockdevice_set"]
    refused = api.op(sid, "set_storage_layout", storage_layout="flat")
    assert refused.status_code == 409
    api.ok(sid, "release")
    released = wait_status(api, sid, "Ready", sim, 60)
    assert released["volume_groups"] == lvm["volume_groups"]
    assert released["blockdevice_set"] == lvm["blockdevice_set"]
    # skip_storage keeps the configuration; a plain commissioning goes back to flat
    api.ok(sid, "commission", skip_storage="1", testing_scripts="none")
    kept = wait_status(api, sid, "Ready", sim, 200)
    assert [d["name"] for d in kept["blockdevice_set"]] == ["nvme0n1", "nvme1n1", "vgroot-lvroot"]
    api.ok(sid, "commission", testing_scripts="none")
    during = api.machine(sid)
    assert during["status_name"] == "Commissioning"
    assert during["boot_disk"]["partitions"] == []  # wiped when commissioning starts
    flat = wait_status(api, sid, "Ready", sim, 200)
    assert flat["volume_groups"] == [] and flat["virtualblockdevice_set"] == []
    assert flat["boot_disk"]["partitions"][1]["filesystem"]["mount_point"] == "/"
    # the disks kept their ids: MAAS matches them by serial
    assert [d["id"] for d in flat["physicalblockdevice_set"]] == [
        d["id"] for d in lvm["physicalblockdevice_set"]
    ]


def test_restore_storage_configuration(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="st06", status="ready")
    api.ok(sid, "set_storage_layout", storage_layout="blank")
    restored = api.ok(sid, "restore_storage_configuration")
    assert restored["boot_disk"]["used_for"] == "GPT partitioned with 2 partitions"
    deployed = sim.add(hostname="st07", status="deployed")
    refused = api.op(deployed, "restore_storage_configuration")
    assert (refused.status_code, refused.text) == (
        409,
        "Machine must be in a ready or failed testing state to restore storage configuration.",
    )


def test_boot_disk_format_mount_and_tags(sims: list[Sim]) -> None:
    s = make_sim({"users": [{"username": "bob", "is_superuser": False, "api_key": BOB_KEY}]})
    sims.append(s)
    admin, bob = Api(s, API_KEY), Api(s, BOB_KEY)
    sid = s.add(hostname="st08", status="ready")
    devices = admin.get(f"nodes/{sid}/blockdevices/").json()
    data = devices[1]["id"]
    path = f"nodes/{sid}/blockdevices/{data}/"
    chosen = admin.post(path, "set_boot_disk")
    assert (chosen.status_code, chosen.text) == (200, "OK")
    assert admin.machine(sid)["boot_disk"]["id"] == data
    virtual = admin.post(
        f"nodes/{sid}/blockdevices/{devices[0]['id']}/", "format", data={"fstype": "ext4"}
    )
    assert virtual.status_code == 400  # the old boot disk still has its partition table
    assert virtual.json() == {"__all__": ["Cannot format block device with a partition table."]}
    # a user may not touch the storage of a Ready machine
    denied = bob.post(path, "format", data={"fstype": "xfs"})
    assert (denied.status_code, denied.text) == (
        403,
        "Cannot format block device because you don't have the permissions on a Ready machine.",
    )
    bad = admin.post(path, "format", data={"fstype": "zfs"})
    assert bad.json() == {
        "fstype": ["Select a valid choice. zfs is not one of the available choices."]
    }
    formatted = admin.post(path, "format", data={"fstype": "xfs", "label": "scratch"})
    assert formatted.json()["used_for"] == "Unmounted xfs formatted filesystem"
    relative = admin.post(path, "mount", data={"mount_point": "srv"})
    assert relative.json() == {"mount_point": ["Enter a valid value."]}
    relative = admin.post(path, "mount", data={"mount_point": "srv\n/x"})
    assert relative.json() == {"mount_point": ["Enter a valid value."]}
    mounted = admin.post(path, "mount", data={"mount_point": "/srv\n", "mount_options": "noatime"})
    assert mounted.json()["filesystem"] == {
        "fstype": "xfs",
        "label": "scratch",
        "uuid": formatted.json()["filesystem"]["uuid"],
        "mount_point": "/srv",
        "mount_options": "noatime",
    }
    busy = admin.post(path, "unformat")
    assert busy.status_code == 400 and busy.text.startswith("Filesystem is mounted")
    assert admin.post(path, "unmount").json()["filesystem"]["mount_point"] is None
    assert admin.post(path, "unmount").text == "Filesystem is already unmounted."
    assert admin.post(path, "unformat").json()["filesystem"] is None
    tagged = admin.post(path, "add_tag", data={"tag": "scratch"})
    assert tagged.json()["tags"] == ["ssd", "scratch"]
    assert admin.post(path, "add_tag").text == "No provided tag!"
    assert admin.post(path, "remove_tag", data={"tag": "ssd"}).json()["tags"] == ["scratch"]
    # Deployed: the boot disk is fixed
    admin.ok(sid, "deploy", distro_series="jammy")
    assert admin.post(path, "set_boot_disk").status_code == 409
    # formatting goes on in Allocated (by its owner), not in Deploying
    assert admin.post(path, "format", data={"fstype": "ext4"}).status_code == 409


def test_storage_in_a_scenario(sims: list[Sim]) -> None:
    s = make_sim(
        {
            "machines": [
                {
                    "hostname": "dgx01",
                    "status": "ready",
                    "storage_layout": "lvm",
                    "disks": [
                        {
                            "name": "sda",
                            "size": 480_000_000_000,
                            "model": "MZ7L3480",
                            "serial": "S1",
                            "tags": ["ssd"],
                        },
                        {
                            "name": "sdb",
                            "size": 4_000_000_000_000,
                            "serial": "S2",
                            "tags": ["rotary", "7200rpm"],
                        },
                    ],
                }
            ]
        }
    )
    sims.append(s)
    m = Api(s).machine(next(iter(s.model.machines)))
    assert [(d["name"], d["tags"]) for d in m["physicalblockdevice_set"]] == [
        ("sda", ["ssd"]),
        ("sdb", ["7200rpm", "rotary"]),
    ]
    assert m["storage"] == 4_480_000.0
    assert [v["name"] for v in m["virtualblockdevice_set"]] == ["vgroot-lvroot"]


@pytest.mark.parametrize(
    ("machine", "message"),
    [
        ({"hostname": "x", "disks": [{"name": "sda"}]}, "each disk needs a name and a size"),
        ({"hostname": "x", "disks": [{"name": "sda", "size": 1, "rpm": 1}]}, "unknown disk fields"),
        (
            {"hostname": "x", "disks": [{"name": "a", "size": 1}, {"name": "a", "size": 2}]},
            "two disks named",
        ),
        (
            {"hostname": "x", "storage_layout": "bcache"},
            "storage_layout must be flat, lvm or blank",
        ),
    ],
)
def test_scenario_disk_mistakes_are_refused(machine: dict[str, Any], message: str) -> None:
    from maas_simulator import scenario
    from maas_simulator.model import Simulator

    with pytest.raises(ValueError, match=message):
        scenario.load(Simulator(), {"machines": [machine]})

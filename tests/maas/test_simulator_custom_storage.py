"""Custom storage on a Ready machine: partitions (create, read, delete, format, mount), volume
groups (create, delete), logical volumes (create, delete), as MAAS 3.5's ``partitions.py``,
``volume_groups.py`` and their forms answer them; and what release does to filesystems made
while the machine was allocated (``_clear_acquired_filesystems``; docs/simulator.md,
"Storage"). Driven by python-libmaas and by OAuth-signed multipart requests; each refusal has
its test."""

from __future__ import annotations

from typing import Any

import maas.client
import pytest

from tests.support.maas import API_KEY, Api, Sim, make_sim

MiB = 1024 * 1024
DATA_SIZE = 7_681_501_126_656  # the default data disk, nvme1n1
BOB_KEY = "BobConsumerKey1234:BobTokenKey1234567:BobTokenSecretABCDEFGHIJKLMNOPQR"


@pytest.fixture
def site(sims: list[Sim]) -> Sim:
    s = make_sim(
        {
            "users": [{"username": "bob", "is_superuser": False, "api_key": BOB_KEY}],
            "machines": [
                {"hostname": "s1", "status": "ready", "power_type": "manual"},
                {"hostname": "s2", "status": "ready", "storage_layout": "blank"},
                {"hostname": "s3", "status": "ready"},
            ],
        },
        scale=1.0,  # time moves only through advance (a release powers off 10 s later)
    )
    sims.append(s)
    return s


@pytest.fixture
def sapi(site: Sim) -> Api:
    return Api(site)


def sid_of(site: Sim, hostname: str) -> str:
    return next(m.system_id for m in site.model.machines.values() if m.hostname == hostname)


def disks(api: Api, sid: str) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in api.get(f"nodes/{sid}/blockdevices/").json()}


def errors(response: Any) -> Any:
    assert response.status_code == 400, response.text
    return response.json()


def test_partitions_volume_group_and_logical_volume_with_libmaas(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "s2")
    lm = maas.client.connect(site.url, apikey=API_KEY)
    machine = lm.machines.get(system_id=sid)
    data = machine.block_devices.get_by_name("nvme1n1")
    partitions = lm._origin.Partitions
    first = partitions.create(data, 100 * 1000**3 + 12345)  # aligned down to 4 MiB
    assert first.size == (100 * 1000**3 + 12345) // (4 * MiB) * (4 * MiB)
    second = partitions.create(data, 200 * 1000**3)
    assert [p.path for p in partitions.read(sid, data)] == [
        "/dev/disk/by-dname/nvme1n1-part1",
        "/dev/disk/by-dname/nvme1n1-part2",
    ]
    first.format("xfs")
    first.mount("/srv/scratch", mount_options="noatime")
    shown = lm._origin.Partition.read(sid, data, first.id)
    assert (shown.filesystem.fstype, shown.filesystem.mount_point) == ("xfs", "/srv/scratch")
    assert shown.used_for == "xfs formatted filesystem mounted at /srv/scratch"
    vg = lm._origin.VolumeGroups.create(sid, "vgdata", [second])
    assert (vg.name, vg.size) == ("vgdata", second.size - 4 * MiB)  # one extent for LVM
    lv = lm._origin.LogicalVolumes.create(vg, "lvdata", 50 * 1000**3)
    assert (lv.name, lv.size) == ("vgdata-lvdata", 50 * 1000**3 // (4 * MiB) * (4 * MiB))
    groups = sapi.get(f"nodes/{sid}/volume-groups/").json()
    assert [(g["name"], [d["id"] for d in g["devices"]]) for g in groups] == [
        ("vgdata", [second.id])
    ]
    assert [v["name"] for v in groups[0]["logical_volumes"]] == ["vgdata-lvdata"]
    m = sapi.machine(sid)
    assert [v["name"] for v in m["virtualblockdevice_set"]] == ["vgdata-lvdata"]
    assert m["volume_groups"] == [{"system_id": sid, "id": vg.id, "__incomplete__": True}]
    nvme1 = next(d for d in m["blockdevice_set"] if d["name"] == "nvme1n1")
    assert nvme1["used_for"] == "GPT partitioned with 2 partitions"
    assert nvme1["partitions"][1]["used_for"] == "LVM volume for vgdata"
    # A storage reset, as a site-preparation client does it: LVs, the VG, the partitions.
    lv_gone = sapi.send(
        "POST", f"nodes/{sid}/volume-group/{vg.id}/", "delete_logical_volume", id=lv.id
    )
    assert lv_gone.status_code == 204
    vg.delete()
    first.delete()
    assert (
        sapi.send("DELETE", f"nodes/{sid}/blockdevices/{data.id}/partition/{second.id}").status_code
        == 204
    )
    after = disks(sapi, sid)["nvme1n1"]
    assert (after["partitions"], after["used_for"]) == ([], "GPT partitioned with 0 partitions")
    assert sapi.get(f"nodes/{sid}/volume-groups/").json() == []


def test_partition_refusals(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "s2")
    data = disks(sapi, sid)["nvme1n1"]
    path = f"nodes/{sid}/blockdevices/{data['id']}/partitions/"
    assert errors(sapi.send("POST", path, size=DATA_SIZE + 1)) == {
        "size": [f"Ensure this value is less than or equal to {DATA_SIZE}."]
    }
    assert errors(sapi.send("POST", path, size=MiB)) == {
        "size": [f"Ensure this value is greater than or equal to {4 * MiB}."]
    }
    assert errors(sapi.send("POST", path, size="lots")) == {"size": ["Enter a valid value."]}
    assert errors(sapi.send("POST", path, size="7T", uuid="not-a-uuid")) == {
        "uuid": ["Enter a valid value."]
    }
    first = sapi.send("POST", path, size="7T")
    assert first.status_code == 200, first.text
    # Bigger than what is left of the disk (the GPT keeps 5 MiB).
    assert errors(sapi.send("POST", path, size="1T")) == {
        "size": ["Partition cannot be saved; not enough free space on the block device."]
    }
    rest = sapi.send("POST", path)  # no size: the rest of the disk
    assert rest.json()["size"] == (DATA_SIZE - 7 * 1000**4 - 5 * MiB) // (4 * MiB) * (4 * MiB)
    assert errors(sapi.send("POST", path)) == {
        "size": [f"Ensure this value is greater than or equal to {4 * MiB}."]
    }
    denied = Api(site, BOB_KEY).send("POST", path, size="1G")
    assert (denied.status_code, denied.text) == (403, "")
    boot = disks(sapi, sid)["nvme0n1"]
    empty = sapi.send(
        "DELETE", f"nodes/{sid}/blockdevices/{boot['id']}/partition/{first.json()['id']}"
    )
    assert (empty.status_code, empty.text) == (404, "No PartitionTable matches the given query.")
    other = sapi.send("POST", f"nodes/{sid}/blockdevices/{boot['id']}/partitions/", size="1G")
    wrong = sapi.send(
        "DELETE", f"nodes/{sid}/blockdevices/{boot['id']}/partition/{first.json()['id']}"
    )
    assert (wrong.status_code, wrong.text) == (
        400,
        "Partition doesn't belong to the partition table",
    )
    assert (
        sapi.send("DELETE", f"nodes/{sid}/blockdevices/{boot['id']}/partition/999999").status_code
        == 404
    )
    assert other.status_code == 200
    sapi.post("machines/", "allocate", data={"system_id": sid})
    late = sapi.send("POST", path, size="1G")
    assert (late.status_code, late.text) == (
        409,
        "Cannot create partition because the node is not Ready.",
    )
    gone = sapi.send(
        "DELETE", f"nodes/{sid}/blockdevices/{data['id']}/partition/{first.json()['id']}"
    )
    assert (gone.status_code, gone.text) == (
        409,
        "Cannot delete block device because the node is not Ready.",
    )


def test_partition_deletion_renumbers_the_rest(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "s2")
    data = disks(sapi, sid)["nvme1n1"]
    made = [
        sapi.send("POST", f"nodes/{sid}/blockdevices/{data['id']}/partitions/", size="1T").json()
        for _ in range(3)
    ]
    by_name = sapi.send("DELETE", f"nodes/{sid}/blockdevices/{data['id']}/partitions/nvme1n1-part1")
    assert by_name.status_code == 204
    left = sapi.get(f"nodes/{sid}/blockdevices/{data['id']}/partitions/").json()
    assert [(p["id"], p["path"]) for p in left] == [
        (made[1]["id"], "/dev/disk/by-dname/nvme1n1-part1"),
        (made[2]["id"], "/dev/disk/by-dname/nvme1n1-part2"),
    ]


def test_volume_group_and_logical_volume_refusals(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "s2")
    found = disks(sapi, sid)
    data, boot = found["nvme1n1"], found["nvme0n1"]
    groups = f"nodes/{sid}/volume-groups/"
    assert errors(sapi.send("POST", groups, name="vg0")) == {
        "__all__": ["At least one valid block device or partition is required."]
    }
    assert errors(sapi.send("POST", groups, block_devices=data["id"])) == {
        "name": ["This field is required."]
    }
    assert errors(sapi.send("POST", groups, name="vg0", block_devices="sdz")) == {
        "block_devices": ["Select a valid choice. sdz is not one of the available choices."]
    }
    # The boot disk joins as a partition over the whole disk; the data disk by name.
    made = sapi.send("POST", groups, name="vg0", block_devices=[boot["id"], "nvme1n1"])
    assert made.status_code == 200, made.text
    members = made.json()["devices"]
    assert [(d["type"], d.get("path")) for d in members] == [
        ("physical", "/dev/disk/by-dname/nvme1n1"),
        ("partition", "/dev/disk/by-dname/nvme0n1-part1"),
    ]
    assert errors(sapi.send("POST", groups, name="vg1", block_devices=data["id"])) == {
        "block_devices": [
            f"Select a valid choice. {data['id']} is not one of the available choices."
        ]
    }
    vg = made.json()
    lv_path = f"nodes/{sid}/volume-group/{vg['id']}/"
    too_big = sapi.send(
        "POST", lv_path, "create_logical_volume", name="lv0", size=vg["size"] + 4 * MiB
    )
    assert errors(too_big) == {
        "size": [f"Ensure this value is less than or equal to {vg['available_size']}."]
    }
    assert errors(sapi.send("POST", lv_path, "create_logical_volume", size="1G")) == {
        "name": ["This field is required."]
    }
    whole = sapi.send("POST", lv_path, "create_logical_volume", name="lv0")
    assert whole.status_code == 200 and whole.json()["size"] == vg["size"]
    assert errors(sapi.send("POST", lv_path, "create_logical_volume", name="lv1")) == {
        "__all__": [
            "Volume group (vg0) cannot hold any more logical volumes, because it doesn't have "
            "enough free space."
        ]
    }
    kept = sapi.send("DELETE", lv_path)
    assert (kept.status_code, kept.text) == (
        400,
        "This volume group has logical volumes; it cannot be deleted.",
    )
    member = sapi.send(
        "DELETE", f"nodes/{sid}/blockdevices/{boot['id']}/partition/{members[1]['id']}"
    )
    assert (member.status_code, member.text) == (
        400,
        "Cannot delete partition because its part of a volume group.",
    )
    missing = sapi.send("POST", lv_path, "delete_logical_volume")
    assert (missing.status_code, missing.text) == (400, "No provided id!")
    assert (
        sapi.send("POST", lv_path, "delete_logical_volume", id=999999).status_code == 204
    )  # ignored
    assert (
        sapi.send("POST", lv_path, "delete_logical_volume", id=whole.json()["id"]).status_code
        == 204
    )
    again = sapi.send("POST", lv_path, "create_logical_volume", name="lv0", size="1T")
    assert errors(sapi.send("POST", lv_path, "create_logical_volume", name="lv0", size="1T")) == {
        "__all__": ["Block device with this Node config and Name already exists."]
    }
    assert again.status_code == 200
    sapi.post("machines/", "allocate", data={"system_id": sid})
    late = sapi.send("POST", groups, name="vg2", partitions="x")
    assert (late.status_code, late.text) == (
        409,
        "Cannot create volume group because the machine is not Ready.",
    )
    late_lv = sapi.send("POST", lv_path, "create_logical_volume", name="lv9")
    assert (late_lv.status_code, late_lv.text) == (
        409,
        "Cannot create logical volume because the machine is not Ready.",
    )
    late_delete = sapi.send("DELETE", lv_path)
    assert (late_delete.status_code, late_delete.text) == (
        409,
        "Cannot delete volume group because the machine is not Ready.",
    )


def test_release_drops_what_was_formatted_while_allocated(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "s3")  # flat: the boot disk is partitioned, the data disk unused
    data = disks(sapi, sid)["nvme1n1"]
    root = disks(sapi, sid)["nvme0n1"]["partitions"][1]
    path = f"nodes/{sid}/blockdevices/{data['id']}/"
    # Set while Ready: stays.
    ready = sapi.send("POST", path, "format", fstype="ext4", label="keep")
    assert ready.json()["filesystem"]["label"] == "keep"
    assert sapi.post("machines/", "allocate", data={"system_id": sid}).status_code == 200
    # Changed while Allocated: the acquired copies change, the Ready ones wait underneath.
    sapi.send("POST", path, "format", fstype="xfs", label="scratch")
    sapi.send("POST", path, "mount", mount_point="/scratch")
    boot = disks(sapi, sid)["nvme0n1"]["id"]
    unmounted = sapi.send(
        "POST", f"nodes/{sid}/blockdevices/{boot}/partition/{root['id']}", "unmount"
    )
    assert unmounted.json()["filesystem"]["mount_point"] is None
    allocated = sapi.machine(sid)
    shown = next(d for d in allocated["blockdevice_set"] if d["name"] == "nvme1n1")
    assert (shown["filesystem"]["fstype"], shown["filesystem"]["mount_point"]) == (
        "xfs",
        "/scratch",
    )
    # MAAS refuses to deploy without a root filesystem (Node.storage_layout_issues)
    refused = sapi.post(f"machines/{sid}/", "deploy")
    assert refused.status_code == 400, refused.text
    assert refused.json() == {
        "storage": ["Mount the root '/' filesystem to be able to deploy this node."]
    }
    assert sapi.status(sid) == "Allocated"
    sapi.send(
        "POST", f"nodes/{sid}/blockdevices/{boot}/partition/{root['id']}", "mount", mount_point="/"
    )
    sapi.ok(sid, "deploy")
    site.advance(300)
    assert sapi.status(sid) == "Deployed"
    assert sapi.ok(sid, "release")["status_name"] == "Releasing"  # powering off
    # The copies are gone at once; while still allocated, mountable filesystems do not show.
    releasing = disks(sapi, sid)
    assert (releasing["nvme1n1"]["filesystem"], releasing["nvme1n1"]["used_for"]) == (
        None,
        "Unused",
    )
    site.advance(60)
    assert sapi.status(sid) == "Ready"
    released = disks(sapi, sid)
    assert (
        released["nvme1n1"]["filesystem"]["fstype"],
        released["nvme1n1"]["filesystem"]["label"],
    ) == ("ext4", "keep")
    assert released["nvme0n1"]["partitions"][1]["filesystem"]["mount_point"] == "/"


def test_no_partition_table_on_a_logical_volume(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "s2")
    made = sapi.send("POST", f"nodes/{sid}/volume-groups/", name="vg0", block_devices="nvme1n1")
    lv = sapi.send(
        "POST",
        f"nodes/{sid}/volume-group/{made.json()['id']}/",
        "create_logical_volume",
        name="lv0",
    )
    assert lv.json()["name"] == "vg0-lv0"
    on_lv = sapi.send("POST", f"nodes/{sid}/blockdevices/{lv.json()['id']}/partitions/", size="1G")
    assert errors(on_lv) == {
        "block_device": ["Cannot create a partition table on a logical volume."]
    }

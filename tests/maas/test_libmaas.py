"""python-libmaas 0.6.8, the reference MAAS client, driving the simulator unchanged.

libmaas builds itself from the simulator's ``describe/`` document, signs with OAuth1 PLAINTEXT,
sends multipart bodies with base64 parts and type-checks every field it reads, so these tests
fail on any wire-format difference it would notice. Its sync facade needs no running event
loop; ``wait_interval`` is shortened because the ``sim`` fixture runs MAAS time 600x.
"""

from __future__ import annotations

from typing import Any

import maas.client
import pytest
import requests
from maas.client.bones import CallError
from maas.client.enum import LinkMode, NodeStatus, PowerState
from maas.client.viscera.events import Level
from maas.client.viscera.machines import (
    FailedCommissioning,
    FailedDeployment,
    FailedDiskErasing,
    MachineNotFound,
)

from tests.support.maas import API_KEY, Sim, make_sim

POLL = 0.02  # seconds between libmaas's status polls


@pytest.fixture
def client(sim: Sim) -> Any:
    return maas.client.connect(sim.url, apikey=API_KEY)


def test_connect_version_and_whoami(client: Any) -> None:
    version = client.version.get()
    assert version.version == "3.5.10"
    assert version.version_info[:3] == (3, 5, 10)  # parseable, unlike real version strings
    assert "authenticate-api" in version.capabilities
    me = client.users.whoami()
    assert (me.username, me.is_admin) == ("admin", True)
    # MAAS lists its own worker user first (recorded against MAAS 3.5.10)
    assert [u.username for u in client.users.list()] == ["MAAS", "admin"]


def test_commission_deploy_release(client: Any, sim: Sim) -> None:
    sid = sim.add(hostname="lm01", status="new", power_address="10.40.0.1")
    machine = client.machines.get(system_id=sid)
    assert (machine.status, machine.status_name, machine.hostname) == (
        NodeStatus.NEW,
        "New",
        "lm01",
    )
    assert machine.power_type == "ipmi" and machine.power_state == PowerState.OFF

    machine.commission(wait=True, wait_interval=POLL)
    assert (machine.status, machine.status_name) == (NodeStatus.READY, "Ready")
    assert machine.owner is None
    boot = machine.boot_interface
    assert [(link.mode, link.subnet.cidr) for link in boot.links] == [
        (LinkMode.AUTO, "10.20.0.0/16")
    ]

    cloud_config = b"#cloud-config\npackages: [ipmitool]\n"
    machine.deploy(distro_series="jammy", user_data=cloud_config, wait=True, wait_interval=POLL)
    assert (machine.status, machine.status_name) == (NodeStatus.DEPLOYED, "Deployed")
    reread = client.machines.get(system_id=sid)
    assert (reread.osystem, reread.distro_series, reread.owner.username) == (
        "ubuntu",
        "jammy",
        "admin",
    )
    assert machine.power_state == PowerState.ON
    served = requests.get(f"{sim.control}machines/{sid}/user-data", timeout=5)
    assert served.content == cloud_config  # libmaas's base64.encodebytes() was decoded

    machine.release(erase=True, quick_erase=True, wait=True, wait_interval=POLL)
    assert (machine.status, machine.owner, machine.osystem) == (NodeStatus.READY, None, "")
    assert sim.mutations(sid) == ["machine.commission", "machine.deploy", "machine.release"]


def test_events_query_and_paging(client: Any, sim: Sim) -> None:
    sid = sim.add(hostname="lm02", status="ready")
    client.machines.get(system_id=sid).deploy(wait=True, wait_interval=POLL)
    events = client.events.query(system_ids=[sid], limit=4)
    assert len(events) == 4
    newest = events[0]
    assert (newest.event_type, newest.system_id, newest.hostname) == ("Deployed", sid, "lm02")
    assert newest.level == Level.INFO
    assert newest.created.tzinfo is not None  # parsed with "%a, %d %b. %Y %H:%M:%S"
    older = events.prev()
    assert len(older) == 4 and older[0].event_id < events[-1].event_id
    debug = client.events.query(system_ids=[sid], level=Level.DEBUG, limit=1000)
    assert "Node changed status" in {e.event_type for e in debug}
    assert "Node changed status" not in {e.event_type for e in events}
    # walking back page by page (prev_uri) visits every INFO event exactly once
    walked = list(client.events.query(system_ids=[sid], limit=3).backwards())
    every_info = client.events.query(system_ids=[sid], limit=1000)
    assert [e.event_id for e in walked] == [e.event_id for e in every_info]
    assert walked[-1].event_type == "Deploying"


def test_failures_raise_libmaas_errors(client: Any, sim: Sim) -> None:
    commissioning = sim.add(hostname="lm03", status="new", faults={"commission_failure": [1]})
    with pytest.raises(FailedCommissioning):
        client.machines.get(system_id=commissioning).commission(wait=True, wait_interval=POLL)

    curtin = sim.add(hostname="lm04", status="ready", faults={"deploy_curtin_failure": [1]})
    with pytest.raises(FailedDeployment) as failed:
        client.machines.get(system_id=curtin).deploy(wait=True, wait_interval=POLL)
    assert failed.value.obj.status_name == "Failed deployment"
    assert failed.value.obj.status_message.startswith("Marking node failed - Installation failed")

    erase = sim.add(hostname="lm05", status="deployed", faults={"erase_failure": [1]})
    with pytest.raises(FailedDiskErasing):
        client.machines.get(system_id=erase).release(erase=True, wait=True, wait_interval=POLL)


def test_refusals_are_call_errors_with_maas_status(client: Any, sim: Sim) -> None:
    new = client.machines.get(system_id=sim.add(hostname="lm06", status="new"))
    with pytest.raises(CallError) as deploy:
        new.deploy()
    assert deploy.value.status == 409
    assert b"Can't deploy a machine that is in the 'New' state" in deploy.value.content
    with pytest.raises(CallError) as abort:
        new.abort()
    assert abort.value.status == 409
    with pytest.raises(CallError) as broken:
        new.mark_broken(comment="not mine")
    assert (broken.value.status, broken.value.content) == (403, b"")
    with pytest.raises(MachineNotFound):
        client.machines.allocate(hostname="no-such-host")


def test_listing_allocation_and_power(client: Any, sim: Sim) -> None:
    a = sim.add(hostname="lm07", status="ready", power_address="10.40.0.7")
    sim.add(hostname="lm08", status="ready", power_address="10.40.0.8")
    assert [m.system_id for m in client.machines.list(hostnames=["lm07"])] == [a]
    assert len(client.machines.list()) == 2
    params = client.machines.get_power_parameters_for([a])
    assert params == {a: {"power_address": "10.40.0.7", "power_driver": "LAN_2_0"}}
    allocated = client.machines.allocate(hostname="lm07")
    assert (allocated.system_id, allocated.status) == (a, NodeStatus.ALLOCATED)
    assert allocated.query_power_state() == PowerState.OFF
    allocated.power_on()
    assert allocated.power_state == PowerState.ON
    allocated.power_off()
    assert allocated.query_power_state() == PowerState.OFF
    assert allocated.get_power_parameters()["power_address"] == "10.40.0.7"


def test_create_machine_commissions_it(client: Any, sim: Sim) -> None:
    created = client.machines.create(
        "amd64",
        ["52:54:00:40:00:09"],
        "ipmi",
        {"power_address": "10.40.0.9", "power_user": "maas", "power_pass": "secret"},
        hostname="lm09",
    )
    assert (created.hostname, created.architecture) == ("lm09", "amd64/generic")
    assert created.status == NodeStatus.COMMISSIONING  # an admin's create commissions at once
    assert sim.model.machines[created.system_id].power_parameters["power_user"] == "maas"
    assert created.interfaces[0].mac_address == "52:54:00:40:00:09"


def test_interface_links(client: Any, sim: Sim) -> None:
    sid = sim.add(hostname="lm10", status="ready")
    machine = client.machines.get(system_id=sid)
    boot = machine.boot_interface
    boot.links[0].delete()
    boot.refresh()
    assert [link.mode for link in boot.links] == [LinkMode.LINK_UP]
    storage = client.subnets.get(2)
    link = boot.links.create(LinkMode.DHCP, subnet=storage, force=True)
    assert (link.mode, link.subnet.cidr) == (LinkMode.DHCP, "10.30.0.0/24")
    machine.refresh()
    assert [lk.mode for lk in machine.boot_interface.links] == [LinkMode.DHCP]
    machine.deploy()
    with pytest.raises(CallError) as refused:
        machine.boot_interface.links.create(LinkMode.AUTO, subnet=storage)
    assert refused.value.status == 409


def test_lock_and_site_reads(client: Any, sim: Sim) -> None:
    machine = client.machines.get(system_id=sim.add(hostname="lm11", status="deployed"))
    machine.lock(comment="in production")
    assert machine.locked is True
    with pytest.raises(CallError) as refused:
        machine.release()
    assert refused.value.status == 403
    machine.unlock()
    assert machine.locked is False
    assert client.maas.get_default_distro_series() == "jammy"
    assert ("ubuntu/jammy", "amd64/ga-22.04") in {
        (b.name, b.architecture) for b in client.boot_resources.list()
    }
    assert [s.cidr for s in client.subnets.list()] == ["10.20.0.0/16", "10.30.0.0/24"]
    assert {f.name for f in client.fabrics.list()} == {"fabric-1", "fabric-2"}
    assert [z.name for z in client.zones.list()] == ["default"]


def test_allocation_with_constraints_and_owner_data(sims: list[Sim]) -> None:
    sim = make_sim({"tags": [{"name": "h100"}], "zones": [{"name": "az2"}]})
    sims.append(sim)
    client = maas.client.connect(sim.url, apikey=API_KEY)
    small = sim.add(hostname="lm12", status="ready", cpu_count=16, memory=65536)
    big = sim.add(hostname="lm13", status="ready", cpu_count=224, tags=["h100"], zone="az2")
    allocated = client.machines.allocate(
        cpus=64, memory=1024 * 1024, tags=["h100"], zone="az2", agent_name="juju-1"
    )
    assert (allocated.system_id, allocated.status) == (big, NodeStatus.ALLOCATED)
    assert allocated.owner.username == "admin"
    assert [m.system_id for m in client.machines.list()] == [small, big]
    with pytest.raises(MachineNotFound) as none:
        client.machines.allocate(cpus=100000)
    conflict = none.value.__cause__
    assert isinstance(conflict, CallError) and conflict.status == 409
    assert b"No available machine matches constraints: [('cpu_count', ['100000'])]" in (
        conflict.content
    )
    smallest = client.machines.allocate(architectures=["amd64/generic"], not_tags=["h100"])
    assert smallest.system_id == small
    # agent_name is a list filter, never shown on the machine
    tagged = client._origin.Machines._handler.read(agent_name=["juju-1"])
    assert [m["system_id"] for m in tagged] == [big]


def test_storage_reads(client: Any, sim: Sim) -> None:
    sid = sim.add(hostname="lm14", status="ready")
    machine = client.machines.get(system_id=sid)
    devices = machine.block_devices
    assert [(d.name, d.type.value, d.size) for d in devices] == [
        ("nvme0n1", "physical", 960_197_124_096),
        ("nvme1n1", "physical", 7_681_501_126_656),
    ]
    boot = machine.boot_disk
    assert (boot.name, boot.model, boot.tags) == ("nvme0n1", "SAMSUNG MZ1L2960HCJR-00A07", ["ssd"])
    efi, root = boot.partitions
    assert (efi.size, efi.filesystem.fstype, efi.filesystem.mount_point) == (
        512 * 1024 * 1024,
        "fat32",
        "/boot/efi",
    )
    assert (root.path, root.filesystem.mount_point) == ("/dev/disk/by-dname/nvme0n1-part2", "/")
    again = client._origin.Partition.read(machine, boot.id, root.id)
    assert (again.id, again.size) == (root.id, root.size)
    assert client._origin.BlockDevice.read(machine, devices[1].id).used_for == "Unused"
    client._origin.Machine._handler.set_storage_layout(system_id=sid, storage_layout="lvm")
    machine.refresh()
    [vg] = machine.volume_groups
    vg.refresh()
    assert (vg.name, vg.available_size) == ("vgroot", 0)
    [lv] = vg.logical_volumes
    assert (lv.name, lv.size) == ("vgroot-lvroot", vg.size)
    assert [v.name for v in client._origin.VolumeGroups.read(machine)] == ["vgroot"]


def test_network_reads(client: Any, sim: Sim) -> None:
    sid = sim.add(hostname="lm15", status="ready")
    fabrics = client.fabrics.list()
    assert [(f.id, f.name) for f in fabrics] == [(1, "fabric-1"), (2, "fabric-2")]
    [vlan] = client.fabrics.get(2).vlans
    assert (vlan.id, vlan.vid, vlan.name, vlan.mtu) == (5002, 0, "untagged", 1500)
    machine = client.machines.get(system_id=sid)
    boot, second = machine.interfaces
    assert (boot.name, boot.vlan.id, boot.vlan.fabric.id) == ("eno1", 5001, 1)
    assert second.vlan.id == 5002 and [lk.mode for lk in second.links] == [LinkMode.LINK_UP]
    assert [s.name for s in client.spaces.list()] == ["undefined"]
    assert len(client.static_routes.list()) == 0
    assert [d.name for d in client.domains.list()] == ["maas"]
    rack = client.rack_controllers.get("rack01")
    assert sorted(i.vlan.id for i in rack.interfaces) == [5001, 5002]
    machine.deploy(wait=True, wait_interval=POLL)
    machine.refresh()
    [address] = machine.ip_addresses
    assert address.startswith("10.20.") and machine.boot_interface.links[0].ip_address == address


def test_bulk_release(client: Any, sim: Sim) -> None:
    a = sim.add(hostname="lm16", status="deployed", power_type="manual")
    b = sim.add(hostname="lm17", status="allocated")
    ready = sim.add(hostname="lm18", status="ready")
    released = client._origin.Machines._handler.release(
        machines=[a, b, ready], comment="job finished"
    )
    assert released == [a, b]
    assert {client.machines.get(system_id=s).status for s in (a, b)} == {NodeStatus.READY}
    new = sim.add(hostname="lm19", status="new")
    with pytest.raises(CallError) as refused:
        client._origin.Machines._handler.release(machines=[new])
    assert refused.value.status == 409


def test_account_tokens(client: Any, sim: Sim) -> None:
    credentials = client.account.create_credentials()
    other = maas.client.connect(sim.url, apikey=str(credentials))
    assert other.users.whoami().username == "admin"
    client.account.delete_credentials(credentials)
    with pytest.raises(CallError) as refused:
        other.users.whoami()
    assert refused.value.status == 401


# -- hardware: node devices, scripts, results (libmaas has no objects for them: its bones) -------


def test_describe_advertises_the_hardware_handlers_with_exact_paths(sim: Sim) -> None:
    body = requests.get(sim.url + "api/2.0/describe/", timeout=10).json()
    handlers = {h["name"]: h for h in body["handlers"]}
    expected = {
        "NodeDevicesHandler": ("/MAAS/api/2.0/nodes/{system_id}/devices/", {("read", None)}),
        "NodeDeviceHandler": (
            "/MAAS/api/2.0/nodes/{system_id}/devices/{id}/",
            {("read", None), ("delete", None)},
        ),
        "NodeScriptsHandler": ("/MAAS/api/2.0/scripts/", {("read", None)}),
        # the one path without a trailing slash, as MAAS routes it
        "NodeScriptHandler": (
            "/MAAS/api/2.0/scripts/{name}",
            {("read", None), ("download", "download")},
        ),
        "NodeScriptResultsHandler": ("/MAAS/api/2.0/nodes/{system_id}/results/", {("read", None)}),
        "NodeScriptResultHandler": (
            "/MAAS/api/2.0/nodes/{system_id}/results/{id}/",
            {("read", None), ("download", "download")},
        ),
    }
    for name, (path, actions) in expected.items():
        assert handlers[name]["path"] == path, name
        assert {(a["name"], a["op"]) for a in handlers[name]["actions"]} == actions, name
    machine = {(a["name"], a["op"]) for a in handlers["MachineHandler"]["actions"]}
    assert {("test", "test"), ("override_failed_testing", "override_failed_testing")} <= machine


def test_libmaas_bones_reach_devices_scripts_and_results(sim: Sim) -> None:
    sid = sim.add(hostname="lb1", status="ready", faults={"gpu_missing": 1})
    session = maas.client.connect(sim.url, apikey=API_KEY)._origin.session
    devices = session.NodeDevices.read(system_id=sid)
    gpus = [d for d in devices if d["hardware_type"] == 5 and d["vendor_id"] == "10de"]
    assert len(gpus) == 7
    one = session.NodeDevice.read(system_id=sid, id=gpus[0]["pci_address"])
    assert one["id"] == gpus[0]["id"]
    assert session.NodeScript.read(name="smartctl-validate")["timeout"] == "0:05:00"
    assert "7z" in [s["name"] for s in session.NodeScripts.read(type="testing")]
    testing = session.Machine.test(system_id=sid, testing_scripts="7z")
    assert testing["status_name"] == "Testing"
    sim.advance(60)
    run = session.NodeScriptResult.read(system_id=sid, id="current-testing")
    assert [(r["name"], r["status_name"]) for r in run["results"]] == [("7z", "Passed")]
    with pytest.raises(CallError) as refused:
        session.Machine.override_failed_testing(system_id=sid)
    assert refused.value.status == 409

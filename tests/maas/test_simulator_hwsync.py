"""Hardware sync over HTTP, as a drift detector reads it: ``op=deploy`` with ``enable_hw_sync``,
the machine's sync fields in MAAS's formats, the syncs on the simulator clock with their INFO
events, what a sync re-reads, release clearing it all, and the faults ``gpu_lost_after_deploy``
and ``hw_sync_stops`` (docs/simulator.md, "Hardware sync")."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import pytest

from tests.support.maas import Api, Sim

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$")
DEPLOYED_AFTER = 300  # MAAS seconds: a deploy ends at 260


@pytest.fixture
def sim(clock_sim: Sim) -> Sim:
    """The clock moves only through ``advance``: each sync happens when the test says."""
    return clock_sim


@pytest.fixture
def api(clock_sim: Sim) -> Api:
    return Api(clock_sim)


def deployed(api: Api, sim: Sim, hostname: str, *, sync: bool = True, **spec: Any) -> str:
    sid = sim.add(hostname=hostname, status="ready", **spec)
    form = {"distro_series": "jammy"} | ({"enable_hw_sync": "true"} if sync else {})
    answer = api.ok(sid, "deploy", **form)
    assert answer["status_name"] == "Deploying"
    sim.advance(DEPLOYED_AFTER)
    assert api.status(sid) == "Deployed"
    return sid


def stamp(value: str) -> datetime:
    assert ISO_MS.match(value), value
    return datetime.fromisoformat(value)


def sync_events(api: Api, sid: str) -> list[tuple[str, str]]:
    events = api.events(sid, level="INFO")
    return [(e["type"], e["description"]) for e in events if "hardware sync" in e["type"]]


def nvidia_gpus(api: Api, sid: str) -> int:
    return len(api.get(f"nodes/{sid}/devices/", hardware_type="gpu", vendor_id="10de").json())


def region_now(api: Api) -> datetime:
    """The region's clock, as its ``Date`` header gives it (naive, as ``last_sync`` is)."""
    return parsedate_to_datetime(api.get("version/").headers["Date"]).replace(tzinfo=None)


def test_deploy_with_hardware_sync_sets_the_fields(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="hs1", status="ready")
    answer = api.ok(sid, "deploy", distro_series="jammy", enable_hw_sync="true")
    assert (answer["enable_hw_sync"], answer["sync_interval"]) == (True, 900)
    assert (answer["last_sync"], answer["next_sync"]) == (None, None)  # stamped once deployed
    sim.advance(DEPLOYED_AFTER)
    machine = api.machine(sid)
    last, following = stamp(machine["last_sync"]), stamp(machine["next_sync"])
    assert following - last == timedelta(seconds=900)
    plain = sim.add(hostname="hs2", status="ready")
    answer = api.ok(plain, "deploy", distro_series="jammy")
    sim.advance(DEPLOYED_AFTER)
    machine = api.machine(plain)
    assert (machine["enable_hw_sync"], machine["sync_interval"]) == (False, None)
    assert (machine["last_sync"], machine["next_sync"]) == (None, None)


def test_a_synced_machine_reports_every_interval_with_maas_events(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hs3")
    first = stamp(api.machine(sid)["last_sync"])
    assert sync_events(api, sid) == []  # the deploy's stamp is not a sync
    sim.advance(900)
    machine = api.machine(sid)
    assert stamp(machine["last_sync"]) - first == timedelta(seconds=900)
    assert stamp(machine["next_sync"]) - first == timedelta(seconds=1800)
    # every disk and NIC is "updated" on every sync; PCI devices only when something changed
    assert sorted(sync_events(api, sid)) == [
        (
            "Node Block Device hardware sync state change",
            f"block device nvme{n}n1 was updated on node {sid}",
        )
        for n in (0, 1)
    ] + [
        ("Node Interface hardware sync state change", f"interface eno{n} was updated on node {sid}")
        for n in (1, 2)
    ]
    sim.advance(1800)
    assert stamp(api.machine(sid)["last_sync"]) - first == timedelta(seconds=2700)
    assert len(sync_events(api, sid)) == 12
    # the region's clock has not passed last_sync + 1.5 x interval: a healthy sync
    machine = api.machine(sid)
    assert region_now(api) <= stamp(machine["last_sync"]) + timedelta(seconds=1350)
    # the deploy-info outputs of the current commissioning run are overwritten in place
    results = api.get(f"nodes/{sid}/results/current-commissioning/").json()["results"]
    hook = next(r for r in results if r["name"] == "50-maas-01-commissioning")
    assert hook["updated"] != hook["ended"]


def test_without_hardware_sync_nothing_reports(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hs4", sync=False, faults={"gpu_lost_after_deploy": 1})
    sim.advance(3600)
    machine = api.machine(sid)
    assert (machine["last_sync"], sync_events(api, sid)) == (None, [])
    assert nvidia_gpus(api, sid) == 8  # nobody looked


def test_the_interval_comes_from_config_when_deployed(api: Api, sim: Sim) -> None:
    sim.post("config", {"hardware_sync_interval": "5m"})
    sid = deployed(api, sim, "hs5")
    assert api.machine(sid)["sync_interval"] == 300
    sim.post("config", {"hardware_sync_interval": "1h"})  # not applied to a deployed machine
    first = stamp(api.machine(sid)["last_sync"])
    sim.advance(300)
    machine = api.machine(sid)
    assert (machine["sync_interval"], stamp(machine["last_sync"]) - first) == (
        300,
        timedelta(seconds=300),
    )


def test_gpu_lost_after_deploy_the_first_sync_finds_a_gpu_gone(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hs6", faults={"gpu_lost_after_deploy": 1})
    assert nvidia_gpus(api, sid) == 8  # commissioning and the deploy saw them all
    sim.advance(900)
    assert nvidia_gpus(api, sid) == 7
    removed = [e for e in sync_events(api, sid) if e[0].startswith("Node PCI Device")]
    # MAAS names the device by its device *number* (every GPU here is at xx:00.0)
    assert removed == [
        ("Node PCI Device hardware sync state change", f"pci device 0 was removed on node {sid}")
    ]
    found = api.get("events/", op="query", id=sid, level="INFO").json()["events"]
    pci = next(e for e in found if e["type"].startswith("Node PCI Device"))
    assert (pci["level"], pci["node"]) == ("INFO", sid)
    sim.advance(900)  # the next sync finds nothing new
    assert [e for e in sync_events(api, sid) if e[0].startswith("Node PCI")] == removed
    # the GPU stays gone: a release and a commissioning find it missing too
    api.ok(sid, "release")
    sim.advance(30)
    api.ok(sid, "commission")
    sim.advance(130)
    assert nvidia_gpus(api, sid) == 7
    sim.post(f"machines/{sid}/faults", {"gpu_lost_after_deploy": 0})  # reseated
    api.ok(sid, "commission")
    sim.advance(130)
    assert nvidia_gpus(api, sid) == 8


def test_hw_sync_stops_leaves_a_stale_last_sync(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hs7", faults={"hw_sync_stops": True})
    machine = api.machine(sid)
    last = stamp(machine["last_sync"])
    assert machine["enable_hw_sync"] is True
    sim.advance(3 * 900)
    machine = api.machine(sid)
    assert stamp(machine["last_sync"]) == last  # never moves after the deploy's stamp
    assert stamp(machine["next_sync"]) == last + timedelta(seconds=900)
    assert sync_events(api, sid) == []
    # stale as the UI judges it: the region's clock is past last_sync + 1.5 x interval
    assert region_now(api) > last + timedelta(seconds=1.5 * machine["sync_interval"])


def test_a_later_slow_link_shows_at_the_next_sync(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hs8")
    sim.post(f"machines/{sid}/faults", {"nic_slow": {"eno1": 10000}})
    assert api.machine(sid)["interface_set"][0]["link_speed"] == 25000
    sim.advance(900)
    eno1 = api.machine(sid)["interface_set"][0]
    assert (eno1["link_speed"], eno1["interface_speed"]) == (10000, 25000)


def test_release_clears_the_sync_fields_and_the_syncs_stop(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hs9")
    released = api.ok(sid, "release")
    assert (released["enable_hw_sync"], released["sync_interval"]) == (False, None)
    assert (released["last_sync"], released["next_sync"]) == (None, None)
    before = len(sync_events(api, sid))
    sim.advance(3600)
    assert len(sync_events(api, sid)) == before


def test_a_tested_deployed_machine_keeps_syncing(api: Api, sim: Sim) -> None:
    sid = deployed(api, sim, "hsa")
    api.ok(sid, "test", testing_scripts="smartctl-validate")
    sim.advance(60)
    machine = api.machine(sid)
    assert machine["status_name"] == "Deployed"
    back = stamp(machine["last_sync"])  # the runner's signal is contact too
    sim.advance(900)
    assert stamp(api.machine(sid)["last_sync"]) - back == timedelta(seconds=900)

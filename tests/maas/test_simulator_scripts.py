"""Testing scripts and their results over HTTP, as a MAAS client sees them: the script catalogue
(``scripts/``), ``op=test`` with its form and model refusals, the run on the machine and where it
lands, ``op=override_failed_testing``, the results (``nodes/{id}/results/``) with their exact key
sets, filters and refusals, and the script faults (docs/simulator.md, "Testing scripts and
results")."""

from __future__ import annotations

import base64
import io
import tarfile
from typing import Any

import pytest
import requests

from tests.support.maas import Api, Sim, make_sim

ALICE_KEY = "AliceConsumerKey12:AliceTokenKey12345:AliceTokenSecretABCDEFGHIJKLMNOP"
GPU_BURN = {
    "name": "infra-gpu-burn",
    "title": "GPU burn-in",
    "description": "Burn every GPU in.",
    "tags": ["infra-gpu", "storage"],  # another hardware type's label is dropped
    "hardware_type": "gpu",
    "timeout": "1:00:00",
    "parameters": {"duration": {"type": "runtime"}},
    "for_hardware": ["pci:10de:2330"],
    "results": {"gflops_min": {"title": "Minimum GFLOPS"}},
}
NCCL = {
    "name": "infra-nccl",
    "tags": ["infra-gpu"],
    "hardware_type": 5,
    "timeout": 1800,
    "parameters": {
        "min_busbw": {"type": "string"},
        "duration": {"type": "runtime", "default": 60},
        "token": {"type": "password"},
    },
}
B200_ONLY = {"name": "infra-b200", "hardware_type": "gpu", "for_hardware": ["pci:10de:2901"]}
DELL_ONLY = {"name": "infra-dell", "for_hardware": ["system_vendor:Dell Inc."]}
SCRIPT_KEYS = {
    "id",
    "name",
    "title",
    "description",
    "tags",
    "type",
    "type_name",
    "hardware_type",
    "hardware_type_name",
    "parallel",
    "parallel_name",
    "results",
    "parameters",
    "packages",
    "timeout",
    "destructive",
    "for_hardware",
    "may_reboot",
    "recommission",
    "history",
    "default",
    "apply_configured_networking",
    "resource_uri",
}
SET_KEYS = {
    "id",
    "system_id",
    "type",
    "type_name",
    "last_ping",
    "status",
    "status_name",
    "started",
    "ended",
    "runtime",
    "results",
    "resource_uri",
}
RESULT_KEYS = {
    "id",
    "created",
    "updated",
    "name",
    "status",
    "status_name",
    "exit_status",
    "started",
    "ended",
    "runtime",
    "starttime",
    "endtime",
    "estimated_runtime",
    "parameters",
    "script_id",
    "script_revision_id",
    "suppressed",
}
OUTPUT_KEYS = {"output", "stdout", "stderr", "result"}
BUILTIN_TESTS = [
    "smartctl-validate",
    "smartctl-short",
    "smartctl-long",
    "smartctl-conveyance",
    "memtester",
    "stress-ng-cpu-long",
    "stress-ng-cpu-short",
    "stress-ng-memory-long",
    "stress-ng-memory-short",
    "ntp",
    "badblocks",
    "badblocks-destructive",
    "7z",
    "fio",
    "internet-connectivity",
    "gateway-connectivity",
    "rack-controller-connectivity",
]


@pytest.fixture
def lab(sims: list[Sim]) -> Sim:
    """A site with infra-owned GPU scripts uploaded and a non-admin user."""
    s = make_sim(
        {
            "users": [{"username": "alice", "is_superuser": False, "api_key": ALICE_KEY}],
            "scripts": [GPU_BURN, NCCL, B200_ONLY, DELL_ONLY],
        },
        scale=1.0,  # the clock moves only through advance: a run's steps when the test says
    )
    sims.append(s)
    return s


def refused(response: Any, status: int, body: Any) -> None:
    if isinstance(body, dict):
        assert (response.status_code, response.json()) == (status, body)
    else:
        assert (response.status_code, response.text) == (status, body)
        # MAAS's own refusals carry a charset; piston's 404 for an object not found is bare
        # (recorded against MAAS 3.5.10)
        bare = status == 404 and str(body).endswith("matches the given query.")
        assert response.headers["Content-Type"] == (
            "text/plain" if bare else "text/plain; charset=utf-8"
        )


def current(api: Api, sid: str, **query: Any) -> dict[str, Any]:
    response = api.get(f"nodes/{sid}/results/current-testing/", **query)
    assert response.status_code == 200, response.text
    return dict(response.json())


def text(result: dict[str, Any], key: str = "output") -> str:
    return base64.b64decode(result[key]).decode()


def names(results: list[dict[str, Any]]) -> list[str]:
    return [r["name"] for r in results]


# -- the catalogue ------------------------------------------------------------------------------


def test_the_catalogue_lists_maas_builtin_testing_scripts_and_the_uploaded_ones(
    lab: Sim,
) -> None:
    api = Api(lab)
    listed = api.get("scripts/", type="testing").json()
    uploaded = ["infra-gpu-burn", "infra-nccl", "infra-b200", "infra-dell"]
    assert names(listed) == [*BUILTIN_TESTS, *uploaded]
    assert all(set(s) == SCRIPT_KEYS for s in listed)
    validate = listed[0]
    assert validate["tags"] == ["commissioning", "storage"]  # the only commissioning-tagged one
    assert [s["name"] for s in listed if "commissioning" in s["tags"]] == ["smartctl-validate"]
    assert (validate["type"], validate["type_name"]) == (2, "Testing script")
    assert (validate["hardware_type"], validate["hardware_type_name"]) == (3, "Storage")
    assert (validate["parallel"], validate["parallel_name"]) == (
        1,
        "Run along other instances of this script",  # SCRIPT_PARALLEL_CHOICES' label
    )
    assert validate["timeout"] == "0:05:00" and validate["default"] is True
    assert validate["parameters"] == {"storage": {"type": "storage", "argument_format": "{path}"}}
    assert validate["resource_uri"] == "/MAAS/api/2.0/scripts/smartctl-validate"
    [history] = validate["history"]
    assert set(history) == {"id", "comment", "created"} and history["created"].endswith("-0000")
    fio = next(s for s in listed if s["name"] == "fio")
    assert (fio["destructive"], fio["tags"]) == (True, ["storage", "destructive"])
    long = next(s for s in listed if s["name"] == "stress-ng-cpu-long")
    assert long["timeout"] == "14:00:00"
    burn = next(s for s in listed if s["name"] == "infra-gpu-burn")
    assert burn["tags"] == ["infra-gpu", "gpu"]  # its type's label added, "storage" dropped
    assert (burn["hardware_type_name"], burn["timeout"], burn["default"]) == (
        "GPU",
        "1:00:00",
        False,
    )
    assert burn["for_hardware"] == ["pci:10de:2330"]
    assert burn["results"] == {"gflops_min": {"title": "Minimum GFLOPS"}}
    [wipe] = api.get("scripts/", type="release").json()
    assert (wipe["name"], wipe["type_name"], wipe["tags"]) == (
        "wipe-disks",
        "Release script",
        ["wipe", "disk", "node"],
    )


def test_script_list_filters(lab: Sim) -> None:
    api = Api(lab)
    for value in ("testing", "test", "2"):
        assert len(api.get("scripts/", type=value).json()) == 21
    for value in ("release", "3"):
        assert names(api.get("scripts/", type=value).json()) == ["wipe-disks"]
    # MAAS 3.5's 13 commissioning scripts (recorded against MAAS 3.5.10, site-reads step 40)
    commissioning = api.get("scripts/", type="commissioning").json()
    assert [s["id"] for s in commissioning] == list(range(1, 14))
    assert {s["type_name"] for s in commissioning} == {"Commissioning script"}
    assert names(api.get("scripts/", hardware_type="gpu").json()) == [
        "infra-gpu-burn",
        "infra-nccl",
        "infra-b200",
    ]
    assert len(api.get("scripts/", hardware_type="4").json()) == 4  # ntp and 3 connectivity
    # a name or any tag
    assert names(api.get("scripts/", filters="infra-gpu,7z").json()) == [
        "7z",
        "infra-gpu-burn",
        "infra-nccl",
    ]
    assert names(api.get("scripts/", filters="destructive").json()) == [
        "badblocks-destructive",
        "fio",
    ]
    plain = api.get("scripts/", filters="infra-nccl").json()[0]["history"][0]
    assert "data" not in plain
    data = api.get("scripts/", filters="infra-nccl", include_script="0").json()[0]
    script = base64.b64decode(data["history"][0]["data"]).decode()
    assert "--- Start MAAS 1.0 script metadata ---" in script and "name: infra-nccl" in script


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"type": "tests"}, "Script type must be commissioning, testing or release"),
        ({"type": "1"}, "Invalid script type numeric value."),
        ({"hardware_type": "fpga"}, "Hardware type must be node, cpu, memory, storage, or gpu"),
    ],
)
def test_script_list_refusals(api: Api, sim: Sim, query: dict[str, str], message: str) -> None:
    refused(api.get("scripts/", **query), 400, message)


def test_one_script_by_name_or_id_without_a_trailing_slash(lab: Sim) -> None:
    api = Api(lab)
    by_name = api.get("scripts/infra-nccl")
    assert by_name.status_code == 200
    script = by_name.json()
    assert api.get(f"scripts/{script['id']}").json() == script
    assert script["parameters"]["duration"] == {"type": "runtime", "default": 60}
    assert script["timeout"] == "0:30:00"
    # MAAS routes ^scripts/(?P<name>[^/]+)$: the slash makes another URL
    refused(
        api.get("scripts/infra-nccl/"),
        404,
        "Unknown API endpoint: /MAAS/api/2.0/scripts/infra-nccl/.",
    )
    refused(api.get("scripts/no-such-script"), 404, "No Script matches the given query.")
    refused(api.get("scripts/99999"), 404, "No Script matches the given query.")
    download = api.get("scripts/infra-nccl", op="download")
    assert download.headers["Content-Type"] == "application/binary"
    assert download.text.startswith("#!/bin/bash\n# --- Start MAAS 1.0 script metadata ---")


def test_bad_scripts_in_a_scenario_are_refused() -> None:
    for spec, error in [
        ({"name": "x", "colour": "red"}, "unknown script fields"),
        ({"name": "smartctl-short"}, "already exists"),
        ({"name": "x", "hardware_type": "fpga"}, "Hardware type must be node"),
        ({"name": "x", "parameters": {"n": {"type": "number"}}}, "needs a type"),
        ({"name": "x", "for_hardware": ["10de:2330"]}, "must start with pci:"),
        ({"name": "x", "timeout": "half an hour"}, "must be seconds or H:MM:SS"),
    ]:
        with pytest.raises(ValueError, match=error):
            make_sim({"scripts": [spec]})


# -- op=test: what is selected, with which parameters --------------------------------------------


def test_without_testing_scripts_the_commissioning_tag_runs_once_per_disk(
    clock_sim: Sim,
) -> None:
    sim, api = clock_sim, Api(clock_sim)
    sid = sim.add(hostname="tt1", status="ready")
    answer = api.op(sid, "test")
    assert answer.status_code == 200
    machine = answer.json()
    assert (machine["status"], machine["status_name"]) == (21, "Testing")
    assert (machine["testing_status"], machine["testing_status_name"]) == (0, "Pending")
    pending = current(api, sid)
    assert machine["current_testing_result_id"] == pending["id"]
    assert (pending["status_name"], pending["started"], pending["ended"], pending["runtime"]) == (
        "Pending",
        None,
        None,
        "",
    )
    sim.advance(60)
    done = current(api, sid, include_output="1")
    assert set(done) == SET_KEYS
    assert (done["type"], done["type_name"], done["status"], done["status_name"]) == (
        2,
        "Testing",
        2,
        "Passed",
    )
    assert done["resource_uri"] == f"/MAAS/api/2.0/nodes/{sid}/results/{done['id']}/"
    disks = {d["id"]: d for d in api.machine(sid)["physicalblockdevice_set"]}
    assert len(done["results"]) == len(disks) == 2
    for result in done["results"]:
        assert set(result) == RESULT_KEYS | OUTPUT_KEYS
        assert (result["name"], result["status_name"], result["exit_status"]) == (
            "smartctl-validate",
            "Passed",
            0,
        )
        value = result["parameters"]["storage"]["value"]
        disk = disks[value["id"]]
        assert value == {k: disk[k] for k in ("id", "name", "id_path", "model", "serial")}
        assert result["parameters"]["storage"]["argument_format"] == "{path}"
        assert f"/dev/{disk['name']}" in text(result)
        assert isinstance(result["starttime"], float) and result["runtime"] == "0:00:05"
        assert result["started"].endswith(" -0000") and result["ended"].endswith(" -0000")
    machine = api.machine(sid)
    assert (machine["status_name"], machine["power_state"], machine["owner"]) == (
        "Ready",
        "off",
        None,
    )
    assert (machine["testing_status_name"], machine["storage_test_status_name"]) == (
        "Passed",
        "Passed",
    )
    assert machine["cpu_test_status_name"] == "Unknown"  # no CPU test ever ran


def test_a_tag_selects_every_script_carrying_it(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tt2", status="ready")
    here = sim.control + "state"  # internet-connectivity really fetches its URLs
    api.ok(sid, "test", testing_scripts="network-validation", url=here)
    # the three interface scripts, each on the one configured interface (eno1 is AUTO,
    # eno2 only LINK_UP)
    results = current(api, sid)["results"]
    assert names(results) == [
        "gateway-connectivity",
        "internet-connectivity",
        "rack-controller-connectivity",
    ]
    boot = api.machine(sid)["boot_interface"]
    for result in results:
        assert result["parameters"]["interface"]["value"] == {
            "id": boot["id"],
            "name": "eno1",
            "mac_address": boot["mac_address"],
            "vendor": "Intel Corporation",
            "product": "Ethernet Controller E810-XXV for SFP",
        }
    url = next(r for r in results if r["name"] == "internet-connectivity")["parameters"]["url"]
    assert (url["value"], url["allow_list"]) == (here, True)
    declared = api.get("scripts/internet-connectivity").json()["parameters"]["url"]
    assert declared["default"] == "https://connectivity-check.ubuntu.com"
    sim.advance(60)
    assert api.status(sid) == "Ready"


def test_per_script_and_bare_parameters_unknown_ones_dropped(lab: Sim) -> None:
    api = Api(lab)
    sid = lab.add(hostname="tp1", status="ready")
    answer = api.op(
        sid,
        "test",
        testing_scripts="infra-gpu-burn,infra-nccl,smartctl-short",
        **{
            "infra-gpu-burn_duration": "0:02:00",
            "min_busbw": "180",  # bare: every selected script declaring it
            "smartctl-short_storage": "nvme1n1",
            "token": "s3cret",
            "no_such_parameter": "x",
        },
    )
    assert answer.status_code == 200, answer.text
    results = {r["name"]: r for r in current(api, sid)["results"]}
    assert set(results) == {"infra-gpu-burn", "infra-nccl", "smartctl-short"}
    assert results["infra-gpu-burn"]["parameters"] == {
        "duration": {"type": "runtime", "value": 120}
    }
    nccl = results["infra-nccl"]["parameters"]
    assert nccl["min_busbw"] == {"type": "string", "value": "180"}
    assert nccl["duration"] == {"type": "runtime", "default": 60, "value": 60}
    assert nccl["token"] == {"type": "password", "value": "REDACTED"}
    assert results["smartctl-short"]["parameters"]["storage"]["value"]["name"] == "nvme1n1"
    # a script runs for its runtime parameter
    lab.advance(100)
    assert current(api, sid)["status_name"] == "Running"
    lab.advance(60)
    assert current(api, sid)["status_name"] == "Passed"
    assert results["infra-gpu-burn"]["estimated_runtime"] == "1:00:00"  # its timeout, no history
    burn = next(r for r in current(api, sid)["results"] if r["name"] == "infra-gpu-burn")
    assert burn["runtime"] == burn["estimated_runtime"] == "0:02:00"


def test_for_hardware_scripts_run_only_where_the_hardware_matches(lab: Sim) -> None:
    api = Api(lab)
    h100 = lab.add(hostname="fh1", status="ready")
    refused(api.op(h100, "test", testing_scripts="infra-b200"), 400, "No testing scripts found!")
    refused(api.op(h100, "test", testing_scripts="infra-dell"), 400, "No testing scripts found!")
    assert api.status(h100) == "Ready"
    # selected with another script, it is silently left out
    api.ok(h100, "test", testing_scripts="infra-b200,infra-gpu-burn")
    assert names(current(api, h100)["results"]) == ["infra-gpu-burn"]
    nogpu = lab.add(hostname="fh2", status="ready", gpus={"count": 0})
    refused(
        api.op(nogpu, "test", testing_scripts="infra-gpu-burn"), 400, "No testing scripts found!"
    )
    # the tag still selects the GPU script without for_hardware
    api.ok(nogpu, "test", testing_scripts="infra-gpu")
    assert names(current(api, nogpu)["results"]) == ["infra-nccl"]
    dell = lab.add(hostname="fh3", status="ready", hardware_info={"system_vendor": "Dell Inc."})
    api.ok(dell, "test", testing_scripts="infra-dell")
    assert names(current(api, dell)["results"]) == ["infra-dell"]


# -- op=test: refusals ----------------------------------------------------------------------------


def test_unknown_scripts_and_bad_parameter_values_are_form_errors(lab: Sim) -> None:
    api = Api(lab)
    sid = lab.add(hostname="tr1", status="ready")
    choice = "Select a valid choice. {} is not one of the available choices."
    refused(
        api.op(sid, "test", testing_scripts="smartctl-validate,infra-reachh,nope"),
        400,
        {"testing_scripts": [choice.format("infra-reachh")]},
    )
    refused(
        api.op(sid, "test", testing_scripts="smartctl-short", **{"smartctl-short_storage": "sdz"}),
        400,
        {"smartctl-short_storage": [choice.format("sdz")]},
    )
    refused(
        api.op(sid, "test", testing_scripts="infra-gpu-burn", duration="soon"),
        400,
        {"duration": ["Enter a valid duration."]},
    )
    assert api.status(sid) == "Ready"


def test_testing_is_refused_in_a_status_that_does_not_allow_it(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tr2", status="deploying")
    refused(
        api.op(sid, "test", testing_scripts="bogus"),
        400,
        {
            "testing_scripts": [
                "Select a valid choice. bogus is not one of the available choices."
            ],
            "__all__": ["Test is not available because of the current state of the node."],
        },
    )
    refused(
        api.op(sid, "test"),
        400,
        {"__all__": ["Test is not available because of the current state of the node."]},
    )


def test_a_new_machine_that_never_commissioned_cannot_be_tested(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tr3", status="new")
    refused(
        api.op(sid, "test"),
        400,
        "Unable to start machine testing; this node has never been commissioned. Please use "
        "the 'Commission' action to commission & test this machine.",
    )


def test_destructive_scripts_are_refused_on_a_deployed_machine(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tr4", status="deployed")
    destructive = {"testing_scripts": ["Destructive tests may only be run on undeployed machines."]}
    refused(api.op(sid, "test", testing_scripts="fio"), 400, destructive)
    # by tag too: "storage" includes fio and badblocks-destructive
    refused(api.op(sid, "test", testing_scripts="storage"), 400, destructive)
    assert api.status(sid) == "Deployed"
    # a non-destructive one is fine; the same run on a Ready machine may destroy
    api.ok(sid, "test", testing_scripts="smartctl-validate")
    ready = sim.add(hostname="tr5", status="ready")
    api.ok(ready, "test", testing_scripts="storage")
    assert "fio" in names(current(api, ready)["results"])


def test_a_network_test_needs_a_configured_interface(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tr6", status="ready", faults={"pxe_unlinked": True})
    before = api.get(f"nodes/{sid}/results/", type="testing").json()
    refused(
        api.op(sid, "test", testing_scripts="gateway-connectivity"),
        400,
        "An interface must be configured to run network testing!",
    )
    assert api.get(f"nodes/{sid}/results/", type="testing").json() == before  # nothing new


def test_testing_is_an_admin_operation(lab: Sim) -> None:
    sid = lab.add(hostname="tr7", status="ready")
    alice = Api(lab, ALICE_KEY)
    assert (alice.op(sid, "test").status_code, alice.op(sid, "test").text) == (403, "")
    assert alice.op(sid, "override_failed_testing").status_code == 403


# -- the run: where the machine lands ---------------------------------------------------------


def test_a_deployed_machine_is_rebooted_into_testing_and_back(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tl1", status="deployed")
    api.ok(sid, "test", testing_scripts="smartctl-validate")
    sim.advance(5)
    types = [e["type"] for e in api.events(sid)]
    assert "Powering on" in types and types[-1] == "Testing"
    sim.advance(60)
    back = api.machine(sid)
    assert (back["status_name"], back["power_state"], back["osystem"], back["owner"]) == (
        "Deployed",
        "on",  # it was on: rebooted into its OS, not powered off
        "ubuntu",
        "admin",
    )


def test_tests_from_failed_testing_or_broken_end_in_ready(api: Api, sim: Sim) -> None:
    for status in ("broken", "failed_testing", "failed_deployment"):
        sid = sim.add(hostname=f"tl-{status}", status=status)
        api.ok(sid, "test", testing_scripts="smartctl-validate")
        sim.advance(60)
        assert api.status(sid) == "Ready", status
    allocated = sim.add(hostname="tl-alloc", status="allocated")
    api.ok(allocated, "test", testing_scripts="smartctl-validate")
    sim.advance(60)
    assert api.status(allocated) == "Allocated"


def test_enable_ssh_leaves_the_machine_on(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tl2", status="ready")
    api.ok(sid, "test", testing_scripts="smartctl-validate", enable_ssh="1")
    sim.advance(60)
    assert (api.status(sid), api.machine(sid)["power_state"]) == ("Ready", "on")


def test_script_fails_fails_one_device_and_the_machine_fails_testing(lab: Sim) -> None:
    api = Api(lab)
    sid = lab.add(
        hostname="tf1",
        status="ready",
        faults={"script_fails": ["smartctl-validate", "infra-gpu-burn"]},
    )
    api.ok(sid, "test", testing_scripts="smartctl-validate,infra-gpu-burn", duration="30")
    lab.advance(120)
    failed = api.machine(sid)
    assert (failed["status"], failed["status_name"]) == (22, "Failed testing")
    assert failed["error_description"] == "2 test scripts failed to run"
    assert failed["status_message"] == "Failed testing"
    assert (failed["testing_status_name"], failed["storage_test_status_name"]) == (
        "Failed",
        "Failed",
    )
    # GPU tests count only in testing_status
    assert failed["other_test_status_name"] == "Unknown"
    results = current(api, sid, include_output="1")
    assert results["status_name"] == "Failed"
    by_device = {
        (r["name"], (r["parameters"].get("storage") or {}).get("value", {}).get("name")): r
        for r in results["results"]
    }
    first, second = (
        by_device[("smartctl-validate", "nvme0n1")],
        by_device[("smartctl-validate", "nvme1n1")],
    )
    assert (first["status_name"], first["exit_status"]) == ("Failed", 1)
    assert "SMART overall-health self-assessment test result: FAILED!" in text(first)
    assert (second["status_name"], second["exit_status"]) == ("Passed", 0)
    gpu = by_device[("infra-gpu-burn", None)]
    assert gpu["status_name"] == "Failed"
    assert "GPU 3: Xid 79 fallen off the bus" in text(gpu)
    events = [(e["type"], e["description"]) for e in api.events(sid)]
    assert ("Script", "smartctl-validate on nvme0n1 failed") in events
    assert ("Script", "infra-gpu-burn failed") in events


def test_script_hangs_is_timed_out_by_the_reaper(lab: Sim) -> None:
    api = Api(lab)
    sid = lab.add(hostname="th1", status="ready", faults={"script_hangs": ["infra-nccl"]})
    api.ok(sid, "test", testing_scripts="infra-nccl,smartctl-validate", duration="600")
    lab.advance(300)
    running = current(api, sid)
    # one result still running outranks the others at set level
    assert (running["status"], running["status_name"]) == (1, "Running")
    assert api.status(sid) == "Testing"
    lab.advance(600)  # at 900: started at 25, + its timeout (the runtime, 10 min), + 5 min is 925
    assert api.status(sid) == "Testing"
    lab.advance(30)
    failed = api.machine(sid)
    assert failed["status_name"] == "Failed testing"
    assert failed["error_description"] == "infra-nccl has run past it's timeout(0:10:00)"
    assert failed["status_message"] == (
        "Marking node failed - infra-nccl has run past it's timeout(0:10:00)"
    )
    results = {r["name"]: r for r in current(api, sid)["results"]}
    assert (results["infra-nccl"]["status"], results["infra-nccl"]["status_name"]) == (
        4,
        "Timed out",
    )
    assert results["infra-nccl"]["exit_status"] is None
    assert results["smartctl-validate"]["status_name"] == "Passed"
    set_ = current(api, sid)
    assert (set_["status"], set_["status_name"]) == (3, "Failed")  # Timed out is 3 at set level


def test_override_failed_testing(api: Api, sim: Sim) -> None:
    ready = sim.add(hostname="to1", status="ready", faults={"script_fails": ["smartctl-validate"]})
    deployed = sim.add(hostname="to2", status="deployed", faults={"script_fails": ["memtester"]})
    api.ok(ready, "test", testing_scripts="smartctl-validate")
    api.ok(deployed, "test", testing_scripts="memtester")
    sim.advance(60)
    assert api.status(ready) == api.status(deployed) == "Failed testing"
    # a machine tested from Deployed keeps Deployed as its previous status
    refused(
        api.op(deployed, "test", testing_scripts="fio"),
        400,
        "Unable to run destructive test while deployed!",
    )
    overridden = api.ok(ready, "override_failed_testing", comment="known bad disk")
    assert (overridden["status_name"], overridden["error_description"]) == ("Ready", "")
    assert api.ok(deployed, "override_failed_testing")["status_name"] == "Deployed"
    request = next(
        e for e in api.events(ready, level="DEBUG") if e["type"].startswith("User overrode")
    )
    assert (request["type"], request["description"]) == (
        "User overrode 'Failed testing' status",
        "(admin) - known bad disk",
    )
    refused(
        api.op(ready, "override_failed_testing"),
        409,
        "Unable to override node status. Node is not in 'Failed testing' status.",
    )


def test_commissioning_tests_can_fail(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="tc1", status="new", faults={"script_fails": ["smartctl-validate"]})
    api.ok(sid, "commission")
    sim.advance(130)
    machine = api.machine(sid)
    assert (machine["status_name"], machine["commissioning_status_name"]) == (
        "Failed testing",
        "Passed",
    )
    assert machine["testing_status_name"] == "Failed"


# -- results --------------------------------------------------------------------------------------


def test_result_filters_and_ids(lab: Sim) -> None:
    api = Api(lab)
    sid = lab.add(hostname="rf1", status="ready")
    api.ok(sid, "test", testing_scripts="infra-gpu-burn,smartctl-validate,7z", duration="10")
    lab.advance(60)
    every = api.get(f"nodes/{sid}/results/").json()
    # seeded past commissioning: its commissioning run and commissioning's tests, then ours
    assert [s["type_name"] for s in every] == ["Commissioning", "Testing", "Testing"]
    assert names(every[1]["results"]) == ["smartctl-validate"] * 2
    for value in ("testing", "test", "2"):
        listed = api.get(f"nodes/{sid}/results/", type=value).json()
        assert [s["type"] for s in listed] == [2, 2]
    assert api.get(f"nodes/{sid}/results/", type="release").json() == []
    tests = current(api, sid)
    assert names(tests["results"]) == [
        "7z",
        "infra-gpu-burn",
        "smartctl-validate",
        "smartctl-validate",
    ]
    assert all(set(r) == RESULT_KEYS for r in tests["results"])  # no output unless asked
    gpu = current(api, sid, hardware_type="gpu")["results"]
    assert names(gpu) == ["infra-gpu-burn"]
    assert names(current(api, sid, hardware_type="3")["results"]) == ["smartctl-validate"] * 2
    # commissioning outputs stored by name only have no script: a hardware_type drops them
    listed = api.get(f"nodes/{sid}/results/", hardware_type="cpu").json()
    assert [names(s["results"]) for s in listed] == [[], [], ["7z"]]
    # filters: names, tags, result ids
    assert names(current(api, sid, filters="infra-gpu")["results"]) == ["infra-gpu-burn"]
    seven = next(r for r in tests["results"] if r["name"] == "7z")
    assert names(current(api, sid, filters=f"{seven['id']},7z")["results"]) == ["7z", "7z"]
    by_id = api.get(f"nodes/{sid}/results/{tests['id']}/")
    assert by_id.json()["id"] == tests["id"]
    with_output = current(api, sid, include_output="0")  # any value turns it on
    assert all(set(r) == RESULT_KEYS | OUTPUT_KEYS for r in with_output["results"])


def test_result_refusals(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="rr1", status="new")  # known as enlisted, never commissioned
    path = f"nodes/{sid}/results/"
    refused(api.get(path, type="tests"), 400, "Invalid result type name")
    refused(api.get(path, type="7"), 400, "Invalid result type numeric value.")
    refused(
        api.get(path, hardware_type="fpga"),
        400,
        "Hardware type must be node, cpu, memory, storage, or gpu",
    )
    unknown = (
        'Unknown id "{}" must be current-commissioning, current-testing, current-installation, '
        "or the id number of a specific result."
    )
    refused(api.get(path + "current-release/"), 400, unknown.format("current-release"))
    # nothing run yet: the aliases have no set, and MAAS answers the same 400
    refused(api.get(path + "current-testing/"), 400, unknown.format("current-testing"))
    refused(api.get(path + "current-commissioning/"), 400, unknown.format("current-commissioning"))
    refused(api.get(path + "999999/"), 404, "No ScriptSet matches the given query.")
    refused(api.get("nodes/nosuch/results/"), 404, "No Node matches the given query.")
    ready = sim.add(hostname="rr2", status="ready")
    commissioning = api.get(f"nodes/{ready}/results/current-commissioning/").json()
    assert commissioning["type_name"] == "Commissioning"
    assert all(r["script_id"] in range(1, 14) for r in commissioning["results"])


def test_results_download(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="rd1", status="ready")
    api.ok(sid, "test", testing_scripts="smartctl-validate,7z")
    sim.advance(60)
    path = f"nodes/{sid}/results/current-testing/"
    single = api.get(path, op="download", filters="7z")
    assert single.headers["Content-Type"] == "application/binary"
    assert single.text == (  # the one file, raw
        "stress-ng: info:  [1842] dispatching hogs: 224 cpu\n"
        "stress-ng: info:  [1842] successful run completed\n"
    )
    several = api.get(path, op="download", filters="smartctl-validate").text
    assert "- smartctl-validate - /dev/nvme0n1 -" in several
    assert "- smartctl-validate - /dev/nvme1n1 -" in several
    archive = api.get(path, op="download", filetype="tar.xz")
    assert archive.headers["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:xz") as tar:
        members = sorted(tar.getnames())
    root = f"rd1-testing-{current(api, sid)['id']}"
    assert members == sorted(
        [f"{root}/7z", f"{root}/smartctl-validate-nvme0n1", f"{root}/smartctl-validate-nvme1n1"]
    )
    refused(
        api.get(path, op="download", filetype="zip"),
        400,
        'Unknown filetype "zip" must be txt or tar.xz',
    )


def test_testing_results_are_kept_ten_per_script(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="rk1", status="ready")
    for _ in range(11):
        api.ok(sid, "test", testing_scripts="7z")
        sim.advance(60)
    sets = api.get(f"nodes/{sid}/results/", type="testing").json()
    runs = [s for s in sets if names(s["results"]) == ["7z"]]
    assert len(runs) == 10  # the oldest, emptied, is gone
    assert len(sets) == 11  # commissioning's smartctl-validate run is another script's


def test_scripts_can_be_uploaded_through_the_control_endpoint(api: Api, sim: Sim) -> None:
    added = sim.post("scripts", {"scripts": [{"name": "infra-late", "hardware_type": "gpu"}]})
    assert added == {"scripts": ["infra-late"]}
    script = api.get("scripts/infra-late").json()
    assert (script["hardware_type_name"], script["tags"], script["default"]) == (
        "GPU",
        ["gpu"],
        False,
    )
    again = requests.post(
        sim.control + "scripts", json={"scripts": [{"name": "infra-late"}]}, timeout=10
    )
    assert again.status_code == 400 and "already exists" in again.json()["error"]


def test_a_machine_seeded_past_commissioning_passed_its_commissioning_tests(
    api: Api, sim: Sim
) -> None:
    sid = sim.add(hostname="sd1", status="ready")
    tests = current(api, sid)
    assert (tests["status_name"], names(tests["results"])) == (
        "Passed",
        ["smartctl-validate", "smartctl-validate"],
    )
    machine = api.machine(sid)
    assert machine["current_testing_result_id"] == tests["id"]
    assert (machine["testing_status_name"], machine["storage_test_status_name"]) == (
        "Passed",
        "Passed",
    )


def test_op_test_needs_a_power_type_and_valid_parameter_values(api: Api, sim: Sim) -> None:
    unpowered = sim.add(hostname="tu1", status="ready", power_type="")
    refused(
        api.op(unpowered, "test"),
        500,
        "Unconfigured power type. Please configure the power type and try again.",
    )
    sid = sim.add(hostname="tu2", status="ready")
    # ParametersForm: each value checked against the script's declaration
    refused(
        api.op(sid, "test", testing_scripts="infra-reach", url="http://not a url"),
        400,
        {"url": ["Invalid URL"]},
    )
    assert api.status(sid) == "Ready"

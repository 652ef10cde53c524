"""Disk erase evidence over HTTP, as a decommission audit reads it. MAAS 3.5 keeps what the
node reports only for a release that runs in Releasing: a release whose script list is more than
``wipe-disks`` alone (here ``scripts=wipe``, the script's tag, plus an erase flag). That run
(type 3) has one ``wipe-disks`` result whose output has a line per disk for the mode, read back
with ``results/?type=release&include_output=1``; the ``erase_fails`` fault shows each of MAAS's
outcomes (a failed quick wipe that still passes among them). A release whose only script is
``wipe-disks`` runs in Disk erasing, where MAAS stores nothing: the result stays Pending with no
output (the recorded release-erase scenario). Config-forced erasing and the release form
(docs/simulator.md, "Disk erase evidence")."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.support.maas import Api, Sim

NVME = ["nvme0n1", "nvme1n1"]
SATA_AND_NVME = [
    {
        "name": "sda",
        "size": 480_103_981_056,
        "model": "MZ7L3480",
        "serial": "S6KN0",
        "tags": ["ssd"],
    },
    {"name": "nvme0n1", "size": 960_197_124_096, "model": "SAMSUNG MZ1L2960", "serial": "S665"},
]


@pytest.fixture
def sim(clock_sim: Sim) -> Sim:
    """The clock moves only through ``advance``."""
    return clock_sim


@pytest.fixture
def api(clock_sim: Sim) -> Api:
    return Api(clock_sim)


def release_runs(api: Api, sid: str) -> list[dict[str, Any]]:
    response = api.get(f"nodes/{sid}/results/", type="release", include_output="1")
    assert response.status_code == 200, response.text
    return list(response.json())


def wipe(api: Api, sid: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The newest release run, its one wipe-disks result and that result's output lines."""
    run = max(release_runs(api, sid), key=lambda r: r["id"])
    [result] = run["results"]
    assert result["name"] == "wipe-disks"
    return run, result, base64.b64decode(result["output"]).decode().splitlines()


def released(
    api: Api, sim: Sim, hostname: str, seconds: int, spec: dict[str, Any] | None = None, **form: str
) -> str:
    """A deployed machine released with ``form`` plus ``scripts=wipe``: Releasing, the path
    whose results MAAS keeps."""
    sid = sim.add(hostname=hostname, status="deployed", **(spec or {}))
    answer = api.ok(sid, "release", scripts="wipe", **form)
    assert (answer["status"], answer["status_name"]) == (12, "Releasing")
    sim.advance(seconds)
    return sid


def test_quick_erase_one_wipe_disks_result_with_a_line_per_disk(api: Api, sim: Sim) -> None:
    sid = released(api, sim, "er1", 50, erase="true", quick_erase="true")
    run, result, lines = wipe(api, sid)
    assert (run["type"], run["type_name"], run["status_name"]) == (3, "Release", "Passed")
    assert (result["status"], result["status_name"], result["exit_status"]) == (2, "Passed", 0)
    script = api.get("scripts/wipe-disks").json()
    assert (result["script_id"], result["script_revision_id"]) == (
        script["id"],
        script["history"][0]["id"],
    )
    # the request's own true flag replaced erase's input: quick_erase alone
    assert result["parameters"] == {
        "quick_erase": {"type": "boolean", "argument_format": "--quick-erase", "value": True}
    }
    assert lines == [
        "nvme0n1, nvme1n1 to be wiped.",
        "nvme0n1: starting quick wipe.",
        "nvme0n1: successfully quickly wiped.",
        "nvme1n1: starting quick wipe.",
        "nvme1n1: successfully quickly wiped.",
        "All disks have been successfully wiped.",
    ]
    machine = api.machine(sid)
    assert (machine["status_name"], machine["owner"]) == ("Ready", None)
    types = [e["type"] for e in api.events(sid)]
    assert "Release scripts executed successfully." in types and "Disks erased" not in types
    plain = api.get(f"nodes/{sid}/results/{run['id']}/", op="download", filters="wipe-disks")
    assert plain.text.splitlines() == lines


def test_zeroing_is_the_default_erase_nvme_with_write_zeroes(api: Api, sim: Sim) -> None:
    sid = released(api, sim, "er2", 140, erase="true", spec={"disks": SATA_AND_NVME})
    _, result, lines = wipe(api, sid)
    assert result["parameters"] == {
        "secure_erase": {"type": "boolean", "argument_format": "--secure-erase", "value": False},
        "quick_erase": {"type": "boolean", "argument_format": "--quick-erase", "value": False},
    }
    assert lines == [
        "sda, nvme0n1 to be wiped.",
        "sda: started zeroing.",
        "sda: successfully zeroed.",
        "nvme0n1: successfully zeroed (using write-zeroes).",
        "All disks have been successfully wiped.",
    ]
    assert api.status(sid) == "Ready"


def test_secure_erase_formats_nvme_and_zeroes_what_cannot_be_securely_erased(
    api: Api, sim: Sim
) -> None:
    sid = released(
        api, sim, "er3", 200, erase="true", secure_erase="true", spec={"disks": SATA_AND_NVME}
    )
    _, result, lines = wipe(api, sid)
    assert result["parameters"] == {
        "secure_erase": {"type": "boolean", "argument_format": "--secure-erase", "value": True}
    }
    assert lines == [
        "sda, nvme0n1 to be wiped.",
        "sda: drive does not support secure erase.",
        "sda: started zeroing.",
        "sda: successfully zeroed.",
        "Secure erase was successful on NVMe drive nvme0n1",
        "All disks have been successfully wiped.",
    ]


def test_a_failed_quick_wipe_still_passes(api: Api, sim: Sim) -> None:
    sid = released(
        api, sim, "ef1", 50, erase="true", quick_erase="true",
        spec={"faults": {"erase_fails": ["nvme1n1"]}},
    )  # fmt: skip
    run, result, lines = wipe(api, sid)
    # MAAS's trap: the disk was not wiped, the script says all were, and the result passed
    assert (run["status_name"], result["status_name"], result["exit_status"]) == (
        "Passed",
        "Passed",
        0,
    )
    assert "nvme1n1: failed to be quickly wiped." in lines
    assert "nvme1n1: successfully quickly wiped." not in lines
    assert lines[-1] == "All disks have been successfully wiped."
    assert api.status(sid) == "Ready"


def test_a_failed_zeroing_fails_the_wipe_and_the_machine(api: Api, sim: Sim) -> None:
    sid = released(
        api, sim, "ef2", 140, erase="true", spec={"faults": {"erase_fails": ["nvme1n1"]}}
    )
    run, result, lines = wipe(api, sid)
    assert (run["status"], result["status"], result["status_name"], result["exit_status"]) == (
        3,
        3,
        "Failed",
        1,
    )
    assert lines[:2] == [
        "nvme0n1, nvme1n1 to be wiped.",
        "nvme0n1: successfully zeroed (using write-zeroes).",
    ]
    assert lines[-1] == "OSError: [Errno 5] Input/output error: '/dev/nvme1n1'"
    assert "All disks have been successfully wiped." not in lines
    machine = api.machine(sid)
    assert (machine["status"], machine["status_name"]) == (13, "Releasing failed")
    assert machine["error_description"] == "Failed to release machine."
    assert machine["status_message"] == "Marking node failed - Failed to release machine."
    assert machine["owner"] == "admin"  # the release itself never ran


def test_a_failed_secure_erase_falls_back(api: Api, sim: Sim) -> None:
    faults = {"faults": {"erase_fails": ["nvme0n1"]}}
    quick = released(api, sim, "ef3", 200, secure_erase="true", quick_erase="true", spec=faults)
    _, result, lines = wipe(api, quick)
    assert lines[1:5] == [
        "Error with format command (1)",
        "nvme0n1: starting quick wipe.",
        "nvme0n1: wipefs failed (1)",
        "nvme0n1: OS error while wiping beginning/end of disk (Input/output error)",
    ]
    assert "Secure erase was successful on NVMe drive nvme1n1" in lines
    assert result["status_name"] == "Passed"
    zeroed = released(api, sim, "ef4", 200, secure_erase="true", spec=faults)
    _, result, lines = wipe(api, zeroed)
    assert lines[1:3] == ["Error with format command (1)", "Error with write-zeroes command (1)"]
    assert result["status_name"] == "Failed"
    assert api.status(zeroed) == "Releasing failed"


def test_the_erase_failure_fault_still_fails_that_release(api: Api, sim: Sim) -> None:
    sid = released(
        api, sim, "ef5", 50, erase="true", quick_erase="true",
        spec={"faults": {"erase_failure": [1]}},
    )  # fmt: skip
    _, result, _ = wipe(api, sid)
    assert (result["status_name"], api.status(sid)) == ("Failed", "Releasing failed")
    api.ok(sid, "release", scripts="wipe", erase="true", quick_erase="true")  # the second wipes
    sim.advance(50)
    assert api.status(sid) == "Ready"
    assert [r["results"][0]["status_name"] for r in release_runs(api, sid)] == ["Failed", "Passed"]


def test_disk_erasing_keeps_no_evidence_of_the_erase(api: Api, sim: Sim) -> None:
    """``wipe-disks`` alone: Disk erasing, where MAAS 3.5's _process_disk_erasing stores nothing
    the node reports (recorded: onboarding-sequence, the release-erase steps)."""
    sid = sim.add(hostname="ed1", status="deployed")
    answer = api.ok(sid, "release", erase="true", quick_erase="true")
    assert (answer["status"], answer["status_name"]) == (14, "Disk erasing")
    sim.advance(50)
    run, result, lines = wipe(api, sid)
    assert (api.status(sid), run["status_name"], result["status_name"]) == (
        "Ready",
        "Pending",
        "Pending",
    )
    assert (lines, result["exit_status"], result["started"]) == ([], None, None)
    types = [e["type"] for e in api.events(sid)]
    assert "Disks erased" in types  # the one trace: an event for the machine, none per disk
    assert "Release scripts executed successfully." not in types
    # a failed erase fails the machine; the result still says nothing
    failing = sim.add(hostname="ed2", status="deployed", faults={"erase_fails": ["nvme1n1"]})
    api.ok(failing, "release", erase="true")
    sim.advance(140)
    machine = api.machine(failing)
    assert (machine["status"], machine["status_name"]) == (15, "Failed disk erasing")
    assert machine["error_description"] == "Failed to erase disks."
    assert machine["owner"] == "admin"  # the release itself never ran
    _, result, lines = wipe(api, failing)
    assert (result["status_name"], lines) == ("Pending", [])


def test_the_three_newest_release_runs_are_kept(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="ek1", status="deployed")
    ids = []
    for _ in range(4):
        api.ok(sid, "release", scripts="wipe", erase="true", quick_erase="true")
        sim.advance(50)
        ids.append(wipe(api, sid)[0]["id"])
        allocated = api.post("machines/", "allocate", data={"system_id": sid})
        assert allocated.status_code == 200
    assert [r["id"] for r in release_runs(api, sid)] == ids[1:]


def test_release_without_erase_runs_no_script(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="en1", status="deployed")
    assert api.ok(sid, "release", erase="false")["status_name"] == "Releasing"
    sim.advance(15)
    assert (api.status(sid), release_runs(api, sid)) == ("Ready", [])


def test_erase_is_a_django_checkbox_where_0_means_true(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="en2", status="deployed")
    assert api.ok(sid, "release", erase="0")["status_name"] == "Disk erasing"


def test_config_forced_erasing_replaces_the_requests_flags(api: Api, sim: Sim) -> None:
    sim.post("config", {"enable_disk_erasing_on_release": True})
    quiet = sim.add(hostname="ec1", status="deployed")
    # an explicit "no erase" does not stop it; config's secure erase (its default) is used
    assert api.ok(quiet, "release", erase="false", quick_erase="false")["status_name"] == (
        "Disk erasing"
    )
    sim.advance(200)
    _, result, lines = wipe(api, quiet)
    assert result["parameters"] == {
        "secure_erase": {"type": "boolean", "argument_format": "--secure-erase", "value": True},
        "quick_erase": {"type": "boolean", "argument_format": "--quick-erase", "value": False},
    }
    assert (result["status_name"], lines) == ("Pending", [])  # Disk erasing keeps nothing
    # an explicit erase on top makes the list [wipe-disks, wipe-disks]: Releasing, not erasing
    both = sim.add(hostname="ec2", status="deployed")
    assert api.ok(both, "release", erase="true")["status_name"] == "Releasing"
    sim.advance(200)
    assert api.status(both) == "Ready"
    assert "Release scripts executed successfully." in [e["type"] for e in api.events(both)]
    assert len(wipe(api, both)[0]["results"]) == 1


def test_the_release_form_takes_release_scripts_by_name_or_tag(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="es1", status="deployed")
    bad = api.op(sid, "release", scripts="wipe-everything")
    assert (bad.status_code, bad.json()) == (
        400,
        {
            "scripts": [
                "Select a valid choice. wipe-everything is not one of the available choices."
            ]
        },
    )
    assert api.status(sid) == "Deployed"
    # by its tag: the list is not literally [wipe-disks], so MAAS shows Releasing, not erasing
    assert api.ok(sid, "release", scripts="wipe")["status_name"] == "Releasing"
    sim.advance(140)
    assert api.status(sid) == "Ready"
    _, result, lines = wipe(api, sid)
    assert (result["parameters"], lines[1]) == (
        {},
        "nvme0n1: successfully zeroed (using write-zeroes).",
    )
    other = sim.add(hostname="es2", status="deployed")
    assert api.ok(other, "release", scripts="none")["status_name"] == "Releasing"

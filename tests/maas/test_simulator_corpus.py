"""What the recorded MAAS 3.5.10 region showed (tests/data/maas-transcripts/) and the simulator
now does too, one behaviour per test, each naming its recorded steps: a region without a rack
controller, the install log gone after release, commissioning refused from Failed testing, a
``url`` parameter without ``allow_list``, a manual machine without a MAC, an abort's answer
(docs/simulator.md, "Known differences from MAAS 3.5")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.maas import INFRA_REACH, Api, Sim, make_sim

IPMI = {
    "power_address": "10.30.0.41",
    "power_user": "maas",
    "power_pass": "not-a-real-password",
    "power_driver": "LAN_2_0",
}


@pytest.fixture
def capi(clock_sim: Sim) -> Iterator[Api]:
    client = Api(clock_sim)
    yield client
    client.session.close()


def started(sims: list[Sim], data: dict[str, Any]) -> tuple[Sim, Api]:
    s = make_sim(data, scale=1.0)
    sims.append(s)
    return s, Api(s)


def test_a_region_without_a_rack_answers_503_and_keeps_what_it_did(sims: list[Sim]) -> None:
    """errors.jsonl 155-161, onboarding-sequence 13-18: no rack reaches a BMC. The 503 is a
    PowerProblem, plain text and without Retry-After; a create with commission=true has made the
    machine before it fails; a commission is taken back to New with its WARNING events."""
    sim, api = started(sims, {"rack_controller": False})
    created = api.post(
        "machines/",
        data={
            "hostname": "err-ipmi-commission",
            "architecture": "amd64/generic",
            "power_type": "ipmi",
            "power_parameters": json.dumps(IPMI),
            "commission": "true",
        },
    )
    text = "No rack controllers can access the BMC of node err-ipmi-commission"
    assert (created.status_code, created.text) == (503, text)
    assert created.headers["Content-Type"].startswith("text/plain")
    assert "Retry-After" not in created.headers
    [machine] = api.get("machines/", hostname="err-ipmi-commission").json()
    assert (machine["status_name"], machine["power_type"]) == ("New", "ipmi")

    sid = machine["system_id"]
    again = api.op(sid, "commission", enable_ssh="true", skip_bmc_config="true")
    assert (again.status_code, "Retry-After" in again.headers) == (503, False)
    after = api.machine(sid)
    assert (after["status_name"], after["owner"]) == ("New", "admin")  # the owner stays
    warnings = [e["description"] for e in api.events(sid, level="WARNING")]
    assert warnings[0].endswith(
        "Aborting COMMISSIONING and reverting to NEW. Unable to power control the node. "
        "Please check power credentials."
    )
    assert "INFO" in {e["level"] for e in api.events(sid, level="INFO")}  # "Commissioning"
    # a power query goes to a rack even for a manual machine; a manual commission needs none
    manual = sim.add(hostname="man1", status="new", power_type="manual")
    assert api.get(f"machines/{manual}/", op="query_power_state").status_code == 503
    assert api.ok(manual, "commission")["status_name"] == "Commissioning"
    assert api.get("rackcontrollers/").json() == []


def test_current_installation_is_gone_after_release(capi: Api, clock_sim: Sim) -> None:
    """onboarding-sequence 159: release clears current_installation_result_id, so the install
    log of the last deployment is no longer the current one."""
    sid = clock_sim.add(hostname="ci1", status="deployed")
    assert capi.get(f"nodes/{sid}/results/current-installation/").status_code == 200
    capi.ok(sid, "release")
    clock_sim.advance(60)
    assert capi.machine(sid)["current_installation_result_id"] is None
    gone = capi.get(f"nodes/{sid}/results/current-installation/", include_output="1")
    assert gone.status_code == 400
    assert gone.text.startswith('Unknown id "current-installation" must be')
    # the run itself is still listed
    assert [r["type_name"] for r in capi.get(f"nodes/{sid}/results/").json()].count(
        "Installation"
    ) == 1


def test_commission_from_failed_testing_is_refused(api: Api, sim: Sim) -> None:
    """onboarding-sequence 192-195: Failed testing is not a status commission starts from;
    override_failed_testing clears it (to Ready, as the machine has no OS)."""
    sid = sim.add(hostname="ft1", status="failed_testing")
    refused = api.op(
        sid, "commission", enable_ssh="true", skip_networking="false", skip_storage="false"
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "__all__": ["Commission is not available because of the current state of the node."]
    }
    assert api.status(sid) == "Failed testing"
    assert api.ok(sid, "override_failed_testing")["status_name"] == "Ready"
    assert api.ok(sid, "commission")["status_name"] == "Commissioning"


def test_a_url_parameter_without_allow_list_takes_one_url(sims: list[Sim]) -> None:
    """onboarding-sequence 129-135: without ``allow_list`` a ``url`` parameter is one URL, and
    Django's URLValidator refuses two joined by a comma (a comma is no part of a host or a port);
    with ``allow_list`` (MAAS's internet-connectivity) the list is accepted."""
    single = {
        **INFRA_REACH,
        "name": "infra-reachability",
        "parameters": {"url": {"type": "url"}},
    }
    sim, api = started(sims, {"scripts": [single, INFRA_REACH]})
    sid = sim.add(hostname="url1", status="ready")
    joined = "http://10.20.0.1:8080,http://10.20.0.1:8443"
    refused = api.op(
        sid, "test", testing_scripts="infra-reachability", **{"infra-reachability_url": joined}
    )
    assert (refused.status_code, refused.json()) == (400, {"url": ["Invalid URL"]})
    assert refused.headers["Content-Type"] == "application/json"
    assert api.status(sid) == "Ready"
    with_paths = "http://10.20.0.1:8080/healthz,http://10.20.0.1:8443/bundle.tgz"
    accepted = api.op(
        sid, "test", testing_scripts="infra-reachability", **{"infra-reachability_url": with_paths}
    )
    assert accepted.status_code == 200  # a comma in a path is a valid URL: MAAS took it
    api.ok(sid, "abort")
    sim.advance(10)
    listed = api.op(sid, "test", testing_scripts="infra-reach", **{"infra-reach_url": joined})
    assert listed.status_code == 200, listed.text


def test_a_manual_machine_needs_a_mac(api: Api) -> None:
    """onboarding-sequence 19: without a MAC MAAS refuses a manual machine, for both reasons."""
    refused = api.post(
        "machines/",
        data={
            "hostname": "gpu-h100-bmc-manual",
            "architecture": "amd64/generic",
            "power_type": "manual",
            "power_parameters": "{}",
            "commission": "false",
        },
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "mac_addresses": ["This field is required."],
        "power_type": ["Can't set power type to manual without network interfaces"],
    }
    assert api.get("machines/", hostname="gpu-h100-bmc-manual").json() == []


def test_aborting_the_commissioning_of_a_ready_machine_leaves_it_new(
    capi: Api, clock_sim: Sim
) -> None:
    """onboarding-sequence 197-201: the answer shows the status before the abort; an aborted
    commissioning lands in New even when the machine had been Ready."""
    sid = clock_sim.add(hostname="ab1", status="ready")
    capi.ok(sid, "commission", enable_ssh="false", skip_bmc_config="true")
    answer = capi.ok(sid, "abort", comment="restart-clean of onboarding 1")
    assert (answer["status_name"], answer["owner"]) == ("Commissioning", None)
    assert capi.status(sid) == "New"


def test_the_legacy_commissioning_scripts_list_is_sorted_by_name(api: Api) -> None:
    """site-reads 48: MAAS 3.5's 13 commissioning scripts, by name."""
    names = api.get("commissioning-scripts/").json()
    assert len(names) == 13 and names == sorted(names)
    assert names[:4] == [
        "20-maas-01-install-lldpd",
        "20-maas-02-dhcp-unconfigured-ifaces",
        "20-maas-03-machine-resources",
        "30-maas-01-bmc-config",
    ]

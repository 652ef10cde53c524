"""Allocation with constraints and owner data, machine list filters, bulk release, tags, account
tokens and the other resources clients read while bootstrapping (MAAS 3.5's ``machines.py``,
``node_constraint_filter_forms.py``, ``tags.py``, ``account.py``, ``results.py``)."""

from __future__ import annotations

from typing import Any

import bson
import pytest
import requests

from tests.support.maas import API_KEY, Api, Sim, make_sim

ALICE_KEY = "AliceConsumerKey12:AliceTokenKey12345:AliceTokenSecretABCDEFGHIJKLMNOP"
FLEET: dict[str, Any] = {
    "users": [{"username": "alice", "is_superuser": False, "api_key": ALICE_KEY}],
    "zones": [{"name": "az1"}, {"name": "az2"}],
    "pools": [{"name": "gpu"}],
    "tags": [{"name": "h100"}, {"name": "a100"}, {"name": "infiniband"}],
    "machines": [
        {"hostname": "small", "status": "ready", "cpu_count": 16, "memory": 65536, "zone": "az1"},
        {
            "hostname": "h100a",
            "status": "ready",
            "cpu_count": 224,
            "memory": 2097152,
            "zone": "az2",
            "pool": "gpu",
            "tags": ["h100", "infiniband"],
        },
        {
            "hostname": "h100b",
            "status": "ready",
            "cpu_count": 112,
            "memory": 1048576,
            "zone": "az1",
            "pool": "gpu",
            "tags": ["h100"],
        },
        {
            "hostname": "arm",
            "status": "ready",
            "architecture": "arm64/generic",
            "cpu_count": 64,
            "memory": 262144,
        },
        {"hostname": "busy", "status": "deployed", "cpu_count": 999, "memory": 9999999},
    ],
}


@pytest.fixture
def fleet(sims: list[Sim]) -> Sim:
    s = make_sim(FLEET)
    sims.append(s)
    return s


@pytest.fixture
def fapi(fleet: Sim) -> Api:
    return Api(fleet)


def sid_of(sim: Sim, hostname: str) -> str:
    return next(m.system_id for m in sim.model.machines.values() if m.hostname == hostname)


def allocate(api: Api, **form: Any) -> requests.Response:
    return api.post("machines/", "allocate", data=form)


def test_allocation_honours_each_constraint(fapi: Api, fleet: Sim) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"cpu_count": "100"}, "h100b"),  # the cheapest that is big enough
        ({"mem": "1500000"}, "h100a"),
        ({"arch": "arm64"}, "arm"),
        ({"arch": "amd64/generic", "cpu_count": "20"}, "h100b"),
        ({"zone": "az2"}, "h100a"),
        ({"not_in_zone": ["az1", "default"]}, "h100a"),
        ({"pool": "gpu", "not_tags": "infiniband"}, "h100b"),
        ({"tags": ["h100", "infiniband"]}, "h100a"),
        ({"tags": "h100,infiniband"}, "h100a"),  # the legacy comma-separated form
        ({"not_in_pool": "default", "zone": "az1"}, "h100b"),
        ({"system_id": "SID:small"}, "small"),
    ]
    for form, expected in cases:
        form = {k: (sid_of(fleet, "small") if v == "SID:small" else v) for k, v in form.items()}
        answer = allocate(fapi, **form)
        assert answer.status_code == 200, (form, answer.text)
        got = answer.json()
        assert got["hostname"] == expected, form
        assert (got["status_name"], got["owner"]) == ("Allocated", "admin")
        assert got["constraints_by_type"] == {}
        fapi.ok(got["system_id"], "release")


def test_no_match_answers_maas_409_texts(fapi: Api, fleet: Sim) -> None:
    huge = allocate(fapi, cpu_count="100000")
    assert (huge.status_code, huge.text) == (
        409,
        "No available machine matches constraints: [('cpu_count', ['100000'])] "
        '(resolved to "cpu_count=100000.0")',
    )
    assert huge.headers["Content-Type"] == "text/plain; charset=utf-8"
    both = allocate(fapi, tags="a100", zone="az1", agent_name="juju")
    assert both.text == (
        "No available machine matches constraints: [('tags', ['a100']), ('zone', ['az1']), "
        "('agent_name', ['juju'])] (resolved to \"tags=a100 zone=az1\")"
    )
    busy = allocate(fapi, system_id=sid_of(fleet, "busy"))
    assert busy.text == f"No machine with system ID {sid_of(fleet, 'busy')} available."
    # nothing was allocated by the refusals
    assert all(m.status.label != "Allocated" for m in fleet.model.machines.values())


def test_bad_constraints_are_form_errors(fapi: Api) -> None:
    cases: list[tuple[dict[str, Any], dict[str, list[str]]]] = [
        ({"cpu_count": "many"}, {"cpu_count": ["Invalid CPU count: number required."]}),
        ({"mem": "lots"}, {"mem": ["Invalid memory: number of MiB required."]}),
        ({"tags": ["h100", "nope", "zzz"]}, {"tags": ["No such tag(s): 'nope', 'zzz'."]}),
        ({"zone": "az9"}, {"zone": ["No such zone(s): az9."]}),
        ({"pool": "cpu"}, {"pool": ["No such pool(s): cpu."]}),
        ({"arch": "riscv"}, {"arch": ["Architecture not recognised."]}),
        ({"colour": "blue"}, {"colour": ["No such constraint."]}),
        ({"storage": "root:ten"}, {"storage": ['Malformed storage constraint, "root:ten".']}),
        ({"subnets": "99"}, {"subnets": ["No matching subnets found."]}),
        (
            {"interfaces": "eth0"},
            {
                "interfaces": [
                    "Malformed constraint: 'eth0' (required format: "
                    "'<label>:<key>=<value>[,<key2>=<value2>[,...]]')"
                ]
            },
        ),
        (
            {"interfaces": "a:colour=red"},
            {"interfaces": ["Unknown interfaces constraint: 'colour"]},
        ),
    ]
    for form, errors in cases:
        answer = allocate(fapi, **form)
        assert (answer.status_code, answer.json()) == (400, errors), form


def test_storage_and_interface_constraints(fapi: Api, fleet: Sim) -> None:
    sid = sid_of(fleet, "small")
    disks = {d["name"]: d["id"] for d in fapi.machine(sid)["physicalblockdevice_set"]}
    got = allocate(fapi, storage="root:900,data:7000(ssd)", system_id=sid).json()
    assert got["constraints_by_type"]["storage"] == {
        "root": [disks["nvme0n1"]],
        "data": [disks["nvme1n1"]],
    }
    fapi.ok(sid, "release")
    too_big = allocate(fapi, storage="root:2000", system_id=sid)
    assert too_big.status_code == 409
    nics = {i["name"]: i["id"] for i in fapi.machine(sid)["interface_set"]}
    got = allocate(
        fapi, interfaces="pxe:subnet=cidr:10.20.0.0/16;san:fabric=fabric-2", system_id=sid
    )
    assert got.json()["constraints_by_type"]["interfaces"] == {
        "pxe": [nics["eno1"]],
        "san": [nics["eno2"]],
    }
    fapi.ok(sid, "release")
    assert allocate(fapi, interfaces="x:vid=7", system_id=sid).status_code == 409
    assert allocate(fapi, interfaces="x:link_speed=fast", system_id=sid).status_code == 409
    assert allocate(fapi, devices="vendor_id=10de", system_id=sid).status_code == 409
    assert allocate(fapi, pod="kvm01").status_code == 409  # no machine is in a VM host


def test_agent_name_is_kept_filtered_on_and_cleared_at_release(fapi: Api, fleet: Sim) -> None:
    got = allocate(fapi, cpu_count="200", agent_name="juju-model-1", comment="for the model").json()
    sid = got["system_id"]
    assert "agent_name" not in got  # MAAS never shows it, it only filters on it
    listed = fapi.get("machines/", agent_name="juju-model-1").json()
    assert [m["system_id"] for m in listed] == [sid]
    others = fapi.get("machines/", not_agent_name="juju-model-1").json()
    assert sid not in {m["system_id"] for m in others} and len(others) == 4
    events = fapi.events(sid, level="DEBUG")
    assert any(
        e["type"] == "User acquiring node" and e["description"] == "(admin) - for the model"
        for e in events
    )
    # deploy from Ready takes the agent name too; release forgets it
    fapi.ok(sid, "release")
    assert fapi.get("machines/", agent_name="juju-model-1").json() == []
    small = sid_of(fleet, "small")
    fapi.ok(small, "deploy", distro_series="jammy", agent_name="k8s")
    assert [m["hostname"] for m in fapi.get("machines/", agent_name="k8s").json()] == ["small"]


def test_dry_run_and_permissions(fleet: Sim, fapi: Api) -> None:
    alice = Api(fleet, ALICE_KEY)
    dry = allocate(alice, tags="infiniband", dry_run="true").json()
    assert dry["hostname"] == "h100a" and dry["status_name"] == "Ready"
    mine = allocate(alice, tags="infiniband").json()
    assert mine["owner"] == "alice"
    # an admin's allocation cannot take alice's machine, and alice cannot take a locked one
    assert allocate(fapi, tags="infiniband").status_code == 409
    small = sid_of(fleet, "small")
    fleet.model.machines[small].locked = True
    assert allocate(alice, system_id=small).status_code == 409


def test_machine_list_filters(fapi: Api, fleet: Sim) -> None:
    def hostnames(**query: Any) -> list[str]:
        answer = fapi.get("machines/", **query)
        assert answer.status_code == 200, answer.text
        return [m["hostname"] for m in answer.json()]

    assert hostnames(status="deployed") == ["busy"]
    assert hostnames(status="=ready", zone="az1") == ["small", "h100b"]
    assert hostnames(not_status="ready") == ["busy"]
    assert hostnames(simple_status="deployed") == ["busy"]
    assert hostnames(tags="h100", not_hostname="h100a") == ["h100b"]
    assert hostnames(pool="gpu", arch="amd64") == ["h100a", "h100b"]
    assert hostnames(hostname=["arm", "small"]) == ["small", "arm"]  # by id, not by query
    assert hostnames(mac_address="00:00:00:00:00:00") == []
    assert hostnames(owner="admin") == ["busy"]
    bad = fapi.get("machines/", status="sleeping")
    assert bad.json() == {
        "status": ["Select a valid choice. sleeping is not one of the available choices."]
    }
    mac = fapi.get("machines/", mac_address="not-a-mac")
    assert mac.json() == {"mac_address": ["'not-a-mac' is not a valid MAC address."]}
    assert fapi.get("machines/", flavour="large").json() == {"flavour": ["No such constraint."]}


def test_bulk_release(fleet: Sim, fapi: Api) -> None:
    deployed = fleet.add(hostname="bulk1", status="deployed", power_type="manual")
    allocated = fleet.add(hostname="bulk2", status="allocated")
    ready = sid_of(fleet, "small")
    released = fapi.post(
        "machines/",
        "release",
        data={"machines": [deployed, allocated, ready], "comment": "end of job"},
    )
    assert (released.status_code, released.json()) == (200, [deployed, allocated])
    assert fapi.status(deployed) == "Ready" and fapi.status(allocated) == "Ready"
    events = fapi.events(deployed, level="DEBUG")
    assert any(
        e["type"] == "User releasing node" and e["description"] == "(admin) - end of job"
        for e in events
    )
    assert fapi.post("machines/", "release", data={}).json() == []


def test_bulk_release_is_all_or_nothing(fleet: Sim, fapi: Api) -> None:
    deployed = fleet.add(hostname="bulk3", status="deployed")
    new = fleet.add(hostname="bulk4", status="new")
    unknown = fapi.post("machines/", "release", data={"machines": [deployed, "zzzzzz"]})
    assert (unknown.status_code, unknown.text) == (400, "Unknown machine(s): zzzzzz.")
    conflict = fapi.post("machines/", "release", data={"machines": [deployed, new]})
    assert (conflict.status_code, conflict.text) == (
        409,
        f"Machine(s) cannot be released in their current state: {new} ('New').",
    )
    alice = Api(fleet, ALICE_KEY)
    denied = alice.post("machines/", "release", data={"machines": [deployed]})
    assert (denied.status_code, denied.text) == (
        403,
        f"You don't have the required permission to release the following machine(s): {deployed}.",
    )
    fapi.ok(deployed, "lock")
    locked = fapi.post("machines/", "release", data={"machines": [deployed]})
    assert locked.status_code == 403  # edit permission excludes a locked machine
    assert fapi.status(deployed) == "Deployed"
    assert [fleet.count("machines.release", status=code) for code in (400, 403, 409)] == [1, 2, 1]
    assert fleet.mutations(deployed) == ["machine.lock"]  # the refused bulk calls name no machine


def test_tags_and_their_machines(fleet: Sim, fapi: Api) -> None:
    assert [t["name"] for t in fapi.get("tags/").json()] == ["a100", "h100", "infiniband"]
    tag = fapi.get("tags/h100/").json()
    assert tag == {
        "name": "h100",
        "definition": "",
        "comment": "",
        "kernel_opts": "",
        "resource_uri": "/MAAS/api/2.0/tags/h100/",
    }
    machines = fapi.get("tags/h100/", op="machines").json()
    assert [m["hostname"] for m in machines] == ["h100a", "h100b"]
    assert machines[0]["tag_names"] == ["h100", "infiniband"]
    created = fapi.post("tags/", data={"name": "gb200", "comment": "Grace Blackwell"})
    assert created.json()["comment"] == "Grace Blackwell"
    assert fapi.post("tags/", data={"name": "gb200"}).json() == {
        "name": ["Tag with this Name already exists."]
    }
    for hostile in ("bad tag", "x\ny", "../etc", "gpu;rm"):
        assert fapi.post("tags/", data={"name": hostile}).json() == {
            "name": ["Invalid character in the tag name."]
        }
    assert fapi.post("tags/", data={"name": " spaced\n"}).json()["name"] == "spaced"
    small, arm = sid_of(fleet, "small"), sid_of(fleet, "arm")
    updated = fapi.post("tags/gb200/", "update_nodes", data={"add": [small, arm, "zzzzzz"]})
    assert updated.json() == {"added": 2, "removed": 0}
    assert allocate(fapi, tags="gb200", arch="arm64").json()["hostname"] == "arm"
    assert fapi.post("tags/gb200/", "update_nodes", data={"remove": [arm]}).json() == {
        "added": 0,
        "removed": 1,
    }
    assert [m["hostname"] for m in fapi.get("tags/gb200/", op="nodes").json()] == ["small"]
    alice = Api(fleet, ALICE_KEY)
    assert (alice.post("tags/gb200/", "update_nodes", data={"add": [arm]}).status_code) == 403
    assert alice.post("tags/", data={"name": "mine"}).status_code == 403
    assert fapi.session.delete(fapi.root + "tags/gb200/", timeout=5).status_code == 204
    assert fapi.machine(small)["tag_names"] == []
    assert fapi.get("tags/gb200/").text == "No Tag matches the given query."


def test_account_tokens_are_minted_used_and_deleted(sim: Sim, api: Api) -> None:
    minted = api.post("account/", "create_authorisation_token", data={"name": "ci"})
    assert minted.status_code == 200
    token = minted.json()
    assert set(token) == {"token_key", "token_secret", "consumer_key", "name"}
    assert (len(token["consumer_key"]), len(token["token_key"]), len(token["token_secret"])) == (
        18,
        18,
        32,
    )
    assert token["name"] == "ci"
    listed = api.get("account/", op="list_authorisation_tokens").json()
    key = f"{token['consumer_key']}:{token['token_key']}:{token['token_secret']}"
    assert listed == [{"name": "MAAS consumer", "token": API_KEY}, {"name": "ci", "token": key}]
    second = Api(sim, key)
    assert second.get("users/", op="whoami").json()["username"] == "admin"
    assert api.post("account/", "delete_authorisation_token").text == "No provided token_key!"
    gone = api.post("account/", "delete_authorisation_token", data={"token_key": "nosuchkey"})
    assert (gone.status_code, gone.text) == (404, "No Token matches the given query.")
    deleted = api.post(
        "account/", "delete_authorisation_token", data={"token_key": token["token_key"]}
    )
    assert (deleted.status_code, deleted.content) == (204, b"")
    refused = second.get("users/", op="whoami")
    assert (refused.status_code, refused.text) == (401, "Authorization Error: Invalid API key.")
    assert api.get("account/", op="list_authorisation_tokens").json() == [
        {"name": "MAAS consumer", "token": API_KEY}
    ]
    doc = requests.get(sim.url + "api/2.0/describe/", timeout=5).json()
    account = next(r for r in doc["resources"] if r["name"] == "AccountHandler")
    assert {a["name"] for a in account["auth"]["actions"]} >= {
        "create_authorisation_token",
        "delete_authorisation_token",
        "list_authorisation_tokens",
    }


def test_details_is_bson_with_the_commissioning_xml(sim: Sim, api: Api) -> None:
    sid = sim.add(hostname="dt01", status="ready")
    answer = api.get(f"machines/{sid}/", op="details")
    assert answer.headers["Content-Type"] == "application/bson"
    details = bson.decode(answer.content)
    assert set(details) == {"lshw", "lldp"}
    assert b"<logicalname>/dev/nvme0n1</logicalname>" in details["lshw"]
    assert details["lldp"].startswith(b"<?xml")
    created = api.post(
        "machines/",
        data={
            "architecture": "amd64",
            "mac_addresses": "52:54:00:99:00:01",
            "power_type": "manual",
            "commission": "0",
        },
    ).json()
    assert bson.decode(api.get(f"machines/{created['system_id']}/", op="details").content) == {
        "lshw": None,
        "lldp": None,
    }


# MAAS 3.5's commissioning scripts, in the order the region made them (recorded against MAAS
# 3.5.10)
COMMISSIONING_NAMES = list(
    [
        "20-maas-01-install-lldpd",
        "20-maas-02-dhcp-unconfigured-ifaces",
        "30-maas-01-bmc-config",
        "20-maas-03-machine-resources",
        "40-maas-01-machine-config-hints",
        "50-maas-01-commissioning",
        "maas-support-info",
        "maas-lshw",
        "maas-list-modaliases",
        "maas-get-fruid-api-data",
        "maas-kernel-cmdline",
        "maas-serial-ports",
        "maas-capture-lldpd",
    ]
)


def test_commissioning_results_the_legacy_way(sim: Sim, api: Api) -> None:
    a = sim.add(hostname="cr01", status="ready")
    sim.add(hostname="cr02", status="ready")
    results = api.get("commissioning-results/", system_id=a).json()
    # the current commissioning run, then the current testing run (commissioning's tests)
    assert [(r["name"], r["result_type"]) for r in results] == [
        *((name, 0) for name in COMMISSIONING_NAMES),
        ("smartctl-validate", 2),
        ("smartctl-validate", 2),
    ]
    first = results[0]
    assert first["node"] == {"system_id": a} and first["result_type"] == 0
    assert (
        first["script_result"] == 0
        and first["resource_uri"] == "/MAAS/api/2.0/commissioning-scripts/"
    )
    assert len(api.get("installation-results/").json()) == 30
    assert api.get("commissioning-results/", name="maas-lshw").json()[0]["name"] == "maas-lshw"
    assert api.get("commissioning-results/", result_type="1").json() == []


def test_urls_maas_has_but_the_simulator_does_not_simulate(sim: Sim, api: Api) -> None:
    for path in ("pods/", "ipaddresses/", "nodes/", "dhcp-snippets/", "account/prefs/sslkeys/"):
        answer = api.get(path)
        assert (answer.status_code, answer.text) == (
            400,
            "Unrecognised signature: method=GET op=None",
        ), path
    assert Api(sim, key=None).get("pods/").status_code == 401
    assert api.get("no-such-thing/").status_code == 404

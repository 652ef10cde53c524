"""The MAAS simulator over raw HTTP: what a MAAS user would see (docs/maas-api.md §1-§12).

Requests are signed like the real clients sign them (OAuth1 PLAINTEXT, empty consumer secret)
and bodies are multipart with base64 parts or urlencoded. Timelines run on the simulator's clock:
``clock_sim`` runs at real speed and is moved with ``advance`` so each step is deterministic.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from maas_client.client import MaasClient
from maas_simulator import scenario
from maas_simulator.model import Simulator
from tests.support.maas import API_KEY, Api, Sim, b64_multipart, make_sim

ALICE_KEY = "AliceConsumerKey12:AliceTokenKey12345:AliceTokenSecretABCDEFGHIJKLMNOP"
BOB_KEY = "BobConsumerKey1234:BobTokenKey1234567:BobTokenSecretABCDEFGHIJKLMNOPQR"
EVENT_TIME = "%a, %d %b. %Y %H:%M:%S"

# NODE_STATUS numbers and their exact status_name labels (docs/maas-api.md §4.1).
STATUS_LABELS = {
    "new": (0, "New"),
    "commissioning": (1, "Commissioning"),
    "failed_commissioning": (2, "Failed commissioning"),
    "missing": (3, "Missing"),
    "ready": (4, "Ready"),
    "reserved": (5, "Reserved"),
    "deployed": (6, "Deployed"),
    "retired": (7, "Retired"),
    "broken": (8, "Broken"),
    "deploying": (9, "Deploying"),
    "allocated": (10, "Allocated"),
    "failed_deployment": (11, "Failed deployment"),
    "releasing": (12, "Releasing"),
    "failed_releasing": (13, "Releasing failed"),
    "disk_erasing": (14, "Disk erasing"),
    "failed_disk_erasing": (15, "Failed disk erasing"),
    "rescue_mode": (16, "Rescue mode"),
    "entering_rescue_mode": (17, "Entering rescue mode"),
    "failed_entering_rescue_mode": (18, "Failed to enter rescue mode"),
    "exiting_rescue_mode": (19, "Exiting rescue mode"),
    "failed_exiting_rescue_mode": (20, "Failed to exit rescue mode"),
    "testing": (21, "Testing"),
    "failed_testing": (22, "Failed testing"),
}


@pytest.fixture
def capi(clock_sim: Sim) -> Iterator[Api]:
    client = Api(clock_sim)
    yield client
    client.session.close()


def multi_user_sim(sims: list[Sim]) -> Sim:
    s = make_sim(
        {
            "users": [
                {"username": "alice", "is_superuser": False, "api_key": ALICE_KEY},
                {"username": "bob", "is_superuser": False, "api_key": BOB_KEY},
            ]
        }
    )
    sims.append(s)
    return s


# -- authentication (§1) ------------------------------------------------------------------------


def test_version_and_describe_are_anonymous(sim: Sim) -> None:
    anon = Api(sim, key=None)
    version = anon.get("version/")
    assert version.status_code == 200
    assert version.headers["Content-Type"].startswith("application/json")
    assert version.json()["capabilities"][-1] == "authenticate-api"
    assert version.json()["subversion"] == ""
    # version/ is not authenticated at all: a bad key is not even looked at
    assert Api(sim, key="no:such:key").get("version/").status_code == 200

    describe = anon.get("describe/")
    assert describe.status_code == 200
    assert describe.headers["Content-Type"] == "application/json"
    doc = describe.json()
    assert doc["doc"] == "MAAS API" and doc["hash"]
    resources = {r["name"]: r for r in doc["resources"]}
    machines = resources["MachinesHandler"]
    assert machines["auth"]["path"] == "/MAAS/api/2.0/machines/"
    assert machines["anon"]["name"] == "AnonMachinesHandler"
    assert {a["name"] for a in machines["anon"]["actions"]} == {"create", "is_registered"}
    machine = resources["MachineHandler"]
    assert machine["anon"] is None
    assert machine["auth"]["params"] == ["system_id"]
    deploy = next(a for a in machine["auth"]["actions"] if a["name"] == "deploy")
    assert (deploy["method"], deploy["op"], deploy["restful"]) == ("POST", "deploy", False)
    assert resources["VersionHandler"]["auth"] is None
    assert resources["InterfaceHandler"]["auth"]["params"] == ["system_id", "id"]


def test_anonymous_machine_listing_is_routed_to_the_anonymous_handler(sim: Sim) -> None:
    sim.add(hostname="anon1", status="ready")
    anon = Api(sim, key=None)
    response = anon.get("machines/")
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.text == "Unrecognised signature: method=GET op=None"
    # the anonymous handler's own ops do answer
    mac = Api(sim).get("machines/").json()[0]["interface_set"][0]["mac_address"]
    registered = anon.get("machines/", op="is_registered", mac_address=mac)
    assert (registered.status_code, registered.json()) == (200, True)


def test_anonymous_request_without_an_anonymous_handler_is_401(sim: Sim) -> None:
    sid = sim.add(hostname="anon2", status="ready")
    anon = Api(sim, key=None)
    for response in (anon.get("events/", op="query"), anon.get(f"machines/{sid}/")):
        assert response.status_code == 401
        assert response.text == "Forbidden"  # piston's rc.FORBIDDEN is a 401
        assert "WWW-Authenticate" not in response.headers


def test_unknown_consumer_key_is_an_invalid_api_key(sim: Sim) -> None:
    response = Api(sim, key="nosuchconsumer:nosuchtoken:nosecret").get("machines/")
    assert response.status_code == 401
    assert response.text == "Authorization Error: Invalid API key."
    assert response.headers["WWW-Authenticate"] == 'OAuth realm="OAuth"'


def test_unknown_token_and_wrong_secret_are_401(sim: Sim) -> None:
    ck, tk, ts = API_KEY.split(":")
    token = Api(sim, key=f"{ck}:UnknownToken123456:{ts}").get("users/", op="whoami")
    assert token.status_code == 401
    assert token.text == "Authorization Error: 'Invalid access token: UnknownToken123456'"
    assert token.headers["WWW-Authenticate"] == 'OAuth realm="OAuth"'
    secret = Api(sim, key=f"{ck}:{tk}:NotTheSecret").get("users/", op="whoami")
    assert secret.status_code == 401
    assert secret.text.startswith("Authorization Error: 'Invalid signature")
    ok = Api(sim).get("users/", op="whoami")
    assert (ok.status_code, ok.json()["username"], ok.json()["is_superuser"]) == (
        200,
        "admin",
        True,
    )


def test_non_admin_users_meet_maas_permissions(sims: list[Sim]) -> None:
    s = multi_user_sim(sims)
    sid = s.add(hostname="perm1", status="ready")
    alice, bob, admin = Api(s, ALICE_KEY), Api(s, BOB_KEY), Api(s)
    assert alice.get("users/", op="whoami").json()["is_superuser"] is False
    # an @admin_method
    denied = alice.get("machines/", op="power_parameters")
    assert denied.status_code == 403
    assert denied.text == "This method is reserved for admin users."
    # an admin permission on the machine: PermissionDenied, empty body
    commission = alice.op(sid, "commission")
    assert (commission.status_code, commission.text) == (403, "")
    # a user may take and deploy a free machine; then it is hers
    deployed = alice.ok(sid, "deploy", distro_series="jammy")
    assert (deployed["status"], deployed["owner"]) == (9, "alice")
    assert bob.op(sid, "release").status_code == 403  # no edit permission on alice's machine
    assert (bob.op(sid, "abort").status_code, bob.op(sid, "abort").text) == (403, "")
    # nor may bob see it: a user sees free machines and their own (NodePermission.view)
    assert (bob.get(f"machines/{sid}/").status_code, bob.get("machines/").json()) == (403, [])
    assert [m["system_id"] for m in alice.get("machines/").json()] == [sid]
    assert admin.ok(sid, "abort")["status_name"] == "Deploying"  # admins may edit anything
    assert admin.status(sid) == "Allocated"  # the change follows the answer
    assert alice.ok(sid, "release")["status_name"] == "Ready"
    assert [m["system_id"] for m in bob.get("machines/").json()] == [sid]


# -- wire format (§2) ---------------------------------------------------------------------------


def test_unknown_paths_are_404_text(api: Api) -> None:
    for path in ("nosuch/", "machines", "machines/abc/extra/"):
        response = api.get(path)
        assert response.status_code == 404
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert response.text == f"Unknown API endpoint: /MAAS/api/2.0/{path}."
    missing = api.get("machines/zzzzzz/")
    assert (missing.status_code, missing.text) == (404, "No Machine matches the given query.")
    iface = api.get("nodes/zzzzzz/interfaces/")
    assert (iface.status_code, iface.text) == (404, "No Node matches the given query.")


def test_wrong_op_is_unrecognised_signature(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="sig1", status="ready")
    cases = [
        (api.get(f"machines/{sid}/", op="deploy"), "method=GET op=deploy"),
        (api.post("machines/", "foo"), "method=POST op=foo"),
        (api.post(f"machines/{sid}/"), "method=POST op=None"),
        (api.get("events/"), "method=GET op=None"),
    ]
    for response, signature in cases:
        assert response.status_code == 400
        assert response.text == f"Unrecognised signature: {signature}"
    assert api.status(sid) == "Ready"


def test_wrong_method_is_405_with_the_allowed_methods(api: Api, sim: Sim) -> None:
    """piston refuses a method its handler does not serve before looking at ``op``."""
    sid = sim.add(hostname="sig2", status="ready")
    cases = [
        (api.session.put(api.root + "events/", timeout=5), "GET"),
        (api.session.delete(api.root + "events/", params={"op": "query"}, timeout=5), "GET"),
        (api.session.put(api.root + "machines/", timeout=5), "GET, POST"),
        (api.session.patch(api.root + f"machines/{sid}/", timeout=5), "DELETE, GET, POST, PUT"),
        (api.session.delete(api.root + "account/", timeout=5), "GET, POST"),
        (api.session.put(api.root + f"nodes/{sid}/blockdevices/", timeout=5), "GET"),
    ]
    for response, allowed in cases:
        assert response.status_code == 405, response.request.url
        assert response.headers["Allow"] == allowed
        assert response.content == b""
        assert response.headers["X-MAAS-API-Hash"]
    assert api.status(sid) == "Ready"
    # an anonymous request with a method the anonymous handler does not serve is challenged
    anon = Api(sim, key=None)
    assert (anon.session.delete(api.root + "machines/", timeout=5).status_code) == 401


def test_api_version_path_and_retired_api(sim: Sim) -> None:
    version = requests.get(sim.url + "api/version/", timeout=5)
    assert (version.status_code, version.text) == (200, "2.0")
    assert version.headers["Content-Type"].startswith("text/plain")
    old = requests.get(sim.url + "api/1.0/nodes/", timeout=5)
    assert old.status_code == 410
    assert old.text == "The 1.0 API is no longer available. Please use API version 2.0."


def test_multipart_parts_in_base64_are_decoded(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="mp1", status="ready")
    cloud_config = b"#cloud-config\nruncmd: [touch /root/ok]\n"
    # python-libmaas: user_data is base64.encodebytes() (with a line break), and then every
    # multipart part is base64-encoded once more for transport.
    body, content_type = b64_multipart(
        [("distro_series", b"noble"), ("user_data", base64.encodebytes(cloud_config))]
    )
    response = api.post(
        f"machines/{sid}/", "deploy", data=body, headers={"Content-Type": content_type}
    )
    assert response.status_code == 200, response.text
    assert response.json()["distro_series"] == "noble"
    served = requests.get(f"{sim.control}machines/{sid}/user-data", timeout=5)
    assert served.content == cloud_config  # what cloud-init on the node receives


def test_plain_user_data_is_served_as_is(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="mp2", status="ready")
    plain = "#!/bin/sh\necho not base64\n"
    assert api.ok(sid, "deploy", user_data=plain)["status_name"] == "Deploying"
    served = requests.get(f"{sim.control}machines/{sid}/user-data", timeout=5)
    assert served.content == plain.encode()


def test_urlencoded_bodies_and_repeated_keys(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="ue1", status="ready")
    body = "distro_series=jammy&comment=urlencoded+deploy"
    response = api.post(
        f"machines/{sid}/",
        "deploy",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200
    assert response.json()["distro_series"] == "jammy"
    annotated = api.ok(sid, "set_workload_annotations", rack="r07", slot="31")
    assert annotated["workload_annotations"] == {"rack": "r07", "slot": "31"}
    assert annotated["owner_data"] == {"rack": "r07", "slot": "31"}
    other = sim.add(hostname="ue2", status="new")
    listed = api.get("machines/", hostname=["ue1", "ue2"])
    assert sorted(m["system_id"] for m in listed.json()) == sorted([sid, other])


def test_a_body_sent_with_get_is_ignored(api: Api, sim: Sim) -> None:
    """Drydock sends filters as a multipart body on GET; MAAS reads only the query string."""
    sim.add(hostname="gb1", status="ready")
    sim.add(hostname="gb2", status="ready")
    body, content_type = b64_multipart([("hostname", b"gb1")])
    response = api.session.request(
        "GET",
        api.root + "machines/",
        data=body,
        headers={"Content-Type": content_type},
        timeout=5,
    )
    assert sorted(m["hostname"] for m in response.json()) == ["gb1", "gb2"]


def test_status_numbers_and_labels(api: Api, sim: Sim) -> None:
    ids = {name: sim.add(hostname=f"st-{n}", status=name) for n, name in enumerate(STATUS_LABELS)}
    for name, sid in ids.items():
        machine = api.machine(sid)
        assert (machine["status"], machine["status_name"]) == STATUS_LABELS[name]
    assert api.machine(ids["failed_releasing"])["status_name"] == "Releasing failed"
    ready = api.get("machines/", status="ready").json()
    assert [m["system_id"] for m in ready] == [ids["ready"]]


def test_machine_object_types_and_delete(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="ty1", status="ready", power_address="10.9.0.1")
    response = api.get(f"machines/{sid}/")
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert response.headers["X-MAAS-API-Hash"]
    m = response.json()
    assert (m["osystem"], m["distro_series"], m["power_state"]) == ("", "", "off")
    assert isinstance(m["cpu_count"], int) and isinstance(m["memory"], int)
    assert m["locked"] is False and m["netboot"] is True and m["node_type"] == 0
    assert m["resource_uri"] == f"/MAAS/api/2.0/machines/{sid}/"
    assert m["fqdn"] == "ty1.maas"
    assert re.fullmatch(r"[a-z0-9]{6}", sid)
    deleted = api.session.delete(api.root + f"machines/{sid}/", timeout=5)
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert api.get(f"machines/{sid}/").status_code == 404


# -- operations refused and allowed (§3.5, §11) ---------------------------------------------------


def test_commission_from_deployed_is_a_json_form_error(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="c1", status="deployed")
    response = api.op(sid, "commission")
    assert response.status_code == 400
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json() == {
        "__all__": ["Commission is not available because of the current state of the node."]
    }


@pytest.mark.parametrize(
    ("status", "label"),
    [("new", "New"), ("deployed", "Deployed"), ("failed_deployment", "Failed deployment")],
)
def test_deploy_refused_with_409_text(api: Api, sim: Sim, status: str, label: str) -> None:
    sid = sim.add(hostname=f"d-{status}", status=status)
    response = api.op(sid, "deploy", distro_series="jammy")
    assert response.status_code == 409
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.text == f"Can't deploy a machine that is in the '{label}' state"


def test_deploy_refuses_an_unknown_series(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="d-series", status="ready")
    response = api.op(sid, "deploy", distro_series="trusty")
    assert response.status_code == 400
    assert response.json()["distro_series"][0].startswith("'trusty' is not a valid distro_series.")
    assert api.status(sid) == "Ready"


def test_release_from_ready_is_a_no_op_and_from_new_a_conflict(api: Api, sim: Sim) -> None:
    ready = sim.add(hostname="r1", status="ready")
    assert api.ok(ready, "release")["status_name"] == "Ready"
    assert not [e for e in api.events(ready, level="DEBUG") if e["type"] == "User releasing node"]
    new = sim.add(hostname="r2", status="new")
    response = api.op(new, "release")
    assert response.status_code == 409
    assert response.text == "Machine cannot be released in its current state ('New')."


def test_abort_is_refused_outside_running_operations(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="a1", status="ready")
    response = api.op(sid, "abort")
    assert response.status_code == 409
    assert response.text == f"Cannot abort in current state: node {sid} is in state Ready."


def test_abort_lands_where_maas_puts_each_operation(capi: Api, clock_sim: Sim) -> None:
    """MAAS answers abort with the status the machine had (the owner of a commissioning is
    cleared at once); the new status follows once the power-off went out."""
    commissioning = clock_sim.add(hostname="ab1", status="new")
    assert capi.ok(commissioning, "commission")["status_name"] == "Commissioning"
    aborted = capi.ok(commissioning, "abort", comment="wrong rack")
    assert (aborted["status_name"], aborted["owner"]) == ("Commissioning", None)
    assert aborted["status_message"] == "Powering off"
    assert aborted["commissioning_status_name"] == "Pending"  # the scripts had not run yet
    after = capi.machine(commissioning)
    assert (after["status_name"], after["owner"], after["power_state"]) == ("New", None, "off")
    # MAAS leaves aborted results out of the status fields (LP:1724235): nothing is left
    assert (after["commissioning_status"], after["commissioning_status_name"]) == (-1, "Unknown")
    events = capi.events(commissioning, level="DEBUG")
    assert events[0]["type"] == "Node changed status"
    request = next(e for e in events if e["type"] == "User aborting node commissioning")
    assert request["description"] == "(admin) - wrong rack"
    # the rack reports the power-off after the abort itself
    assert capi.machine(commissioning)["status_message"] == "Powering off"

    deploying = clock_sim.add(hostname="ab2", status="ready")
    capi.ok(deploying, "deploy")
    assert capi.ok(deploying, "abort")["status_name"] == "Deploying"
    assert capi.status(deploying) == "Allocated"

    erasing = clock_sim.add(hostname="ab3", status="deployed")
    assert capi.ok(erasing, "release", erase="true")["status"] == 14
    assert capi.ok(erasing, "abort")["status"] == 14
    failed = capi.machine(erasing)
    assert (failed["status"], failed["status_name"]) == (15, "Failed disk erasing")

    testing = clock_sim.add(hostname="ab4", status="new")
    capi.ok(testing, "commission")
    clock_sim.advance(90)
    assert capi.status(testing) == "Testing"
    assert capi.ok(testing, "abort")["status_name"] == "Testing"
    assert capi.status(testing) == "Ready"  # tests right after commissioning


def test_mark_broken_needs_ownership_and_mark_fixed_needs_broken(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="b1", status="ready")
    unowned = api.op(sid, "mark_broken", comment="fan")
    assert (unowned.status_code, unowned.text) == (403, "")  # even for an admin
    fixed = api.op(sid, "mark_fixed")
    assert (fixed.status_code, fixed.text) == (409, "Can't mark a non-broken node as 'Ready'.")
    api.ok(sid, "deploy", distro_series="jammy")  # now the admin owns it
    broken = api.ok(sid, "mark_broken", comment="bad DIMM")
    assert (broken["status_name"], broken["error_description"]) == ("Broken", "bad DIMM")
    assert (broken["owner"], broken["osystem"]) == (None, "")  # released first
    ready = api.ok(sid, "mark_fixed")
    assert (ready["status_name"], ready["error_description"]) == ("Ready", "")


def test_set_storage_layout_only_when_ready(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="sl1", status="allocated")
    response = api.op(sid, "set_storage_layout", storage_layout="zfs")  # state checked first
    assert response.status_code == 409
    assert response.text == "Cannot change the storage layout on a machine that is not Ready."
    ready = sim.add(hostname="sl2", status="ready")
    bad = api.op(ready, "set_storage_layout", storage_layout="zfs")
    assert bad.status_code == 400
    assert bad.json() == {
        "storage_layout": [
            "'zfs' is not a valid storage_layout.  It should be one of: 'bcache', 'blank', "
            "'custom', 'flat', 'lvm', 'vmfs6', 'vmfs7'."
        ]
    }
    assert api.ok(ready, "set_storage_layout", storage_layout="lvm")["status_name"] == "Ready"


def test_interface_edits_only_in_allowed_states(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="if1", status="ready")
    boot = api.machine(sid)["boot_interface"]
    path = f"nodes/{sid}/interfaces/{boot['id']}/"
    # the boot NIC is on the PXE subnet's VLAN: only that VLAN's subnets are offered
    other_vlan = api.post(path, "link_subnet", data={"mode": "DHCP", "subnet": "2"})
    assert (other_vlan.status_code, other_vlan.json()) == (
        400,
        {"subnet": ["None found with id=2."]},
    )
    linked = api.post(path, "link_subnet", data={"mode": "DHCP", "subnet": "1"})
    assert linked.status_code == 200
    assert [lk["mode"] for lk in linked.json()["links"]] == ["auto", "dhcp"]
    api.ok(sid, "deploy", distro_series="jammy")
    refused = api.post(path, "link_subnet", data={"mode": "auto", "subnet": "1"})
    assert refused.status_code == 409
    assert refused.text == (
        "Cannot link subnet interface because the machine is not New, Ready, Allocated, or Broken."
    )
    unlink = api.post(path, "unlink_subnet", data={"id": str(linked.json()["links"][0]["id"])})
    assert unlink.status_code == 409
    assert unlink.text.startswith("Cannot unlink subnet interface because")


def test_release_with_erase_goes_through_disk_erasing(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="er1", status="deployed")
    erasing = capi.ok(sid, "release", erase="true", quick_erase="true")
    assert (erasing["status"], erasing["status_name"]) == (14, "Disk erasing")
    assert erasing["owner"] == "admin" and erasing["osystem"] == "ubuntu"  # until wiped
    clock_sim.advance(35)
    released = capi.machine(sid)
    assert released["status_name"] in ("Releasing", "Ready")
    clock_sim.advance(15)
    released = capi.machine(sid)
    assert (released["status_name"], released["owner"], released["osystem"]) == ("Ready", None, "")
    types = [e["type"] for e in capi.events(sid)]
    assert types[:3] == ["Released", "Powering off", "Releasing"]
    assert "Disks erased" in types
    # MAAS 3.5's Disk erasing path keeps no files: the wipe-disks result stays Pending with no
    # output however the erase went (the recorded release-erase scenario; docs/simulator.md).
    wipe = capi.get(f"nodes/{sid}/results/", type="release", include_output="true").json()[-1]
    assert (wipe["type_name"], wipe["status_name"]) == ("Release", "Pending")
    assert [r["output"] for r in wipe["results"]] == [""]


def test_release_of_a_machine_that_never_commissioned_ends_in_new(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="nc1", status="new")
    sim.post(f"machines/{sid}/status", {"status": "allocated"})  # allocated without commissioning
    assert api.ok(sid, "release")["status_name"] == "New"
    commissioned = sim.add(hostname="nc2", status="allocated")
    assert api.ok(commissioned, "release")["status_name"] == "Ready"


def test_lock_refuses_edits(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="lk1", status="ready")
    assert api.op(sid, "lock").text == "Can't lock, node is not deployed or deploying"
    deployed = sim.add(hostname="lk2", status="deployed")
    assert api.ok(deployed, "lock")["locked"] is True
    assert api.op(deployed, "lock").text == "Machine is already locked"
    refused = api.op(deployed, "release")
    assert (refused.status_code, refused.text) == (403, "")
    assert api.ok(deployed, "unlock")["locked"] is False
    assert api.ok(deployed, "release")["status_name"] in ("Releasing", "Ready")


# -- machine-driven transitions on the clock (§4.3, §6, §7) ---------------------------------------


def test_commissioning_runs_tests_then_ready(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="cm1", status="new", power_address="10.1.0.1")
    started = capi.ok(sid, "commission")
    assert (started["status"], started["owner"], started["status_message"]) == (
        1,
        "admin",
        "Commissioning",
    )
    clock_sim.advance(60)
    assert capi.machine(sid)["status_message"] == "Gathering information"
    clock_sim.advance(25)
    testing = capi.machine(sid)
    assert (testing["status"], testing["status_name"]) == (21, "Testing")
    # smartctl-validate (tagged commissioning) runs once per disk: the default disks are NVMe
    assert testing["status_message"] == "Running test - smartctl-validate on nvme1n1"
    clock_sim.advance(40)
    ready = capi.machine(sid)
    assert (ready["status"], ready["owner"], ready["power_state"]) == (4, None, "off")
    assert ready["commissioning_status_name"] == "Passed"
    assert ready["testing_status_name"] == "Passed"
    # after commissioning: the boot NIC is AUTO on its PXE subnet, the others LINK_UP
    links = [[lk["mode"] for lk in i["links"]] for i in ready["interface_set"]]
    assert links == [["auto"], ["link_up"]]
    assert ready["boot_interface"]["links"][0]["subnet"]["cidr"] == "10.20.0.0/16"
    changes = [e["description"] for e in capi.events(sid, level="DEBUG") if "changed" in e["type"]]
    assert changes[::-1] == [
        "From 'New' to 'Commissioning'",
        "From 'Commissioning' to 'Testing'",
        "From 'Testing' to 'Ready'",
    ]


def test_commissioning_without_tests_skips_testing(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="cm2", status="new")
    capi.ok(sid, "commission", testing_scripts="none")
    clock_sim.advance(85)
    assert capi.status(sid) == "Ready"
    assert not any("Testing" in e["description"] for e in capi.events(sid, level="DEBUG"))


def test_deploy_timeline_and_status_message(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="dp1", status="ready")
    deploying = capi.ok(sid, "deploy", distro_series="jammy", enable_hw_sync="true")
    assert (deploying["status"], deploying["status_message"]) == (9, "Deploying")
    assert deploying["owner"] == "admin" and deploying["power_state"] == "on"
    clock_sim.advance(95)
    assert capi.machine(sid)["status_message"] == "Installing OS"
    clock_sim.advance(107)  # t=202: "Installation complete" is DEBUG, never a status_message
    at_202 = capi.machine(sid)
    assert (at_202["status_message"], at_202["netboot"]) == ("Configuring OS", False)
    clock_sim.advance(60)
    deployed = capi.machine(sid)
    assert (deployed["status"], deployed["status_name"]) == (6, "Deployed")
    assert deployed["status_message"] == "Deployed"
    assert (deployed["osystem"], deployed["distro_series"]) == ("ubuntu", "jammy")
    assert deployed["enable_hw_sync"] is True and deployed["sync_interval"] == 900
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}", deployed["last_sync"])
    info = [e["type"] for e in capi.events(sid)][::-1]
    assert info == [
        "Deploying",
        "Powering on",
        "Performing PXE boot",
        "Loading ephemeral",
        "Configuring storage",
        "Installing OS",
        "Configuring OS",
        "Rebooting",
        "Image Deployed",
        "Deployed",
    ]


def test_deploy_times_out_after_node_timeout(capi: Api, clock_sim: Sim) -> None:
    """The 30-minute deploy timeout, and config node_timeout changing it."""
    sid = clock_sim.add(
        hostname="to1", status="ready", faults={"deploy_datasource_failure": [1, 2]}
    )
    capi.ok(sid, "deploy")
    clock_sim.advance(29 * 60)
    assert capi.status(sid) == "Deploying"
    clock_sim.advance(61)
    failed = capi.machine(sid)
    assert failed["status_name"] == "Failed deployment"
    assert failed["status_message"] == (
        "Marking node failed - Node operation 'Deploying' timed out after 30 minutes."
    )
    assert failed["status_action"] == "mark_failed"
    assert failed["error_description"] == "Node operation 'Deploying' timed out after 30 minutes."

    clock_sim.post("config", {"node_timeout": 10})
    capi.ok(sid, "release")
    clock_sim.advance(20)
    capi.ok(sid, "deploy")
    clock_sim.advance(10 * 60 + 1)
    assert capi.machine(sid)["error_description"] == (
        "Node operation 'Deploying' timed out after 10 minutes."
    )


def test_events_query_paging_and_formats(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="ev1", status="ready")
    other = clock_sim.add(hostname="ev2", status="ready")
    capi.ok(sid, "deploy")
    capi.ok(other, "deploy")
    clock_sim.advance(300)
    every = capi.events(sid, level="DEBUG")
    ids = [e["id"] for e in every]
    assert ids == sorted(ids, reverse=True)  # newest first
    assert {e["node"] for e in every} == {sid} and {e["hostname"] for e in every} == {"ev1"}
    for e in every:
        datetime.strptime(e["created"], EVENT_TIME)  # python-libmaas parses it exactly so
        assert re.fullmatch(
            r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2}\. \d{4} \d\d:\d\d:\d\d", e["created"]
        )
    assert {e["level"] for e in every} >= {"DEBUG", "INFO"}
    user_request = next(e for e in every if e["type"] == "User starting deployment")
    assert (user_request["username"], user_request["description"]) == ("admin", "(admin)")
    assert next(e for e in every if e["type"] == "Rebooting")["username"] == "unknown"

    page = capi.get("events/", op="query", id=sid, level="DEBUG", limit=3).json()
    assert page["count"] == 3 and [e["id"] for e in page["events"]] == ids[:3]
    assert page["next_uri"].startswith("/MAAS/api/2.0/events/?")
    assert f"after={ids[0]}" in page["next_uri"] and f"id={sid}" in page["next_uri"]
    assert f"before={ids[2]}" in page["prev_uri"] and "op=query" in page["prev_uri"]
    older = capi.session.get(clock_sim.url.removesuffix("/MAAS/") + page["prev_uri"], timeout=5)
    assert [e["id"] for e in older.json()["events"]] == ids[3:6]
    after = capi.get("events/", op="query", id=sid, level="DEBUG", limit=2, after=ids[-1]).json()
    assert [e["id"] for e in after["events"]] == [ids[-3], ids[-2]]  # oldest above, newest first
    nothing = capi.get("events/", op="query", id=sid, after=ids[0]).json()
    assert (nothing["count"], nothing["prev_uri"]) == (
        0,
        f"/MAAS/api/2.0/events/?op=query&id={sid}&before={ids[0] + 1}",
    )
    empty = capi.get("events/", op="query", hostname="nosuchhost").json()
    assert (empty["events"], empty["prev_uri"]) == ([], None)
    info_only = capi.events(sid)
    assert "Node changed status" not in {e["type"] for e in info_only}  # DEBUG hidden
    assert capi.get("events/", op="query", limit=0).json()["count"] == 1

    too_many = capi.get("events/", op="query", limit=1001)
    assert (too_many.status_code, too_many.text) == (
        400,
        "Requested number of events 1001 is greater than limit: 1000",
    )
    assert capi.get("events/", op="query", limit=1000).status_code == 200
    both = capi.get("events/", op="query", before=5, after=1)
    assert both.status_code == 400 and "both `after` and `before`" in both.text
    level = capi.get("events/", op="query", level="LOUD")
    assert (level.status_code, level.text) == (400, "Unrecognised log level: LOUD")


def test_script_results_and_installation_log(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="sr1", status="new")
    capi.ok(sid, "commission")
    clock_sim.advance(130)
    capi.ok(sid, "deploy")
    clock_sim.advance(300)
    sets = capi.get(f"nodes/{sid}/results/", type="commissioning", include_output="1").json()
    assert [s["type_name"] for s in sets] == ["Commissioning"]
    commissioning = sets[0]
    assert (commissioning["type"], commissioning["status_name"]) == (0, "Passed")
    assert (
        commissioning["resource_uri"] == f"/MAAS/api/2.0/nodes/{sid}/results/{commissioning['id']}/"
    )
    # MAAS 3.5's 13 commissioning scripts, by name; the machine-resources JSON is what MAAS
    # parses (recorded against MAAS 3.5.10: onboarding-sequence.jsonl step 84)
    names = [r["name"] for r in commissioning["results"]]
    assert len(names) == 13 and names == sorted(names)
    result = next(
        r for r in commissioning["results"] if r["name"] == "20-maas-03-machine-resources"
    )
    assert result["status_name"] == "Passed" and result["exit_status"] == 0
    resources = json.loads(base64.b64decode(result["output"]))["resources"]
    assert (resources["cpu"]["total"], resources["gpu"]["total"]) == (128, 9)
    assert [d["id"] for d in resources["storage"]["disks"]] == ["nvme0n1", "nvme1n1"]
    assert email.utils.parsedate_to_datetime(result["started"])  # RFC 2822 dates
    assert re.fullmatch(r"\d+:\d\d:\d\d", result["runtime"])
    without_output = capi.get(f"nodes/{sid}/results/", type="commissioning").json()
    assert "output" not in without_output[0]["results"][0]

    install = capi.get(f"nodes/{sid}/results/current-installation/", include_output="1").json()
    assert (install["type_name"], install["status_name"]) == ("Installation", "Passed")
    log = install["results"][0]
    assert log["name"] == "/tmp/install.log"  # noqa: S108 (MAAS's name for the curtin log)
    assert b"Installation finished" in base64.b64decode(log["output"])
    assert capi.machine(sid)["current_installation_result_id"] == install["id"]
    bad = capi.get(f"nodes/{sid}/results/latest/")
    assert bad.status_code == 400
    assert bad.text == (
        'Unknown id "latest" must be current-commissioning, current-testing, '
        "current-installation, or the id number of a specific result."
    )


def test_site_level_reads(api: Api) -> None:
    resources = api.get("boot-resources/").json()
    assert {(r["name"], r["architecture"]) for r in resources} >= {
        ("ubuntu/jammy", "amd64/ga-22.04")
    }
    assert api.get("boot-resources/", op="is_importing").json() is False
    subnets = api.get("subnets/").json()
    assert [s["cidr"] for s in subnets] == ["10.20.0.0/16", "10.30.0.0/24"]
    assert api.get("subnets/2/").json()["name"] == "storage"
    config = api.get("maas/", op="get_config", name="default_distro_series")
    assert (config.status_code, config.json()) == (200, "jammy")
    assert api.get("maas/", op="get_config", name="node_timeout").json() == 30
    assert api.get("maas/", op="get_config").text == "No provided name!"
    unknown = api.get("maas/", op="get_config", name="colour")
    assert unknown.status_code == 400
    assert unknown.json()["colour"][0].startswith("colour is not a valid config setting")
    tokens = api.get("account/", op="list_authorisation_tokens").json()
    assert tokens[0]["token"] == API_KEY
    assert api.get("rackcontrollers/").json()[0]["service_set"]


# -- machine faults -------------------------------------------------------------------------------


def test_datasource_failure_on_first_deploy_then_success(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="ds1", status="ready", faults={"deploy_datasource_failure": [1]})
    capi.ok(sid, "deploy")
    clock_sim.advance(600)
    stuck = capi.machine(sid)
    assert stuck["status_name"] == "Deploying"
    assert stuck["status_message"] == "Rebooting"
    debug = capi.events(sid, level="DEBUG")
    assert (debug[0]["type"], debug[0]["description"]) == (
        "Node installation",
        "'cloudinit' searching for network data from DataSourceMAAS",
    )
    assert any(
        e["description"] == "/tmp/install.log changed status from 'Running' to 'Passed'"  # noqa: S108
        for e in debug
    )
    clock_sim.advance(1201)
    failed = capi.machine(sid)
    assert failed["status_name"] == "Failed deployment"
    assert failed["status_message"] == (
        "Marking node failed - Node operation 'Deploying' timed out after 30 minutes."
    )
    changed = [e["description"] for e in capi.events(sid, level="DEBUG")]
    assert "From 'Deploying' to 'Failed deployment'" in changed
    assert capi.op(sid, "deploy").status_code == 409  # release first, as Drydock does
    capi.ok(sid, "release")
    clock_sim.advance(15)
    assert capi.status(sid) == "Ready"
    capi.ok(sid, "deploy")  # deploy #2 is not listed in the fault
    clock_sim.advance(300)
    assert capi.status(sid) == "Deployed"


def test_curtin_failure(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="cu1", status="ready", faults={"deploy_curtin_failure": [1]})
    capi.ok(sid, "deploy")
    clock_sim.advance(125)
    failed = capi.machine(sid)
    assert (failed["status"], failed["status_name"]) == (11, "Failed deployment")
    assert failed["status_message"] == (
        "Marking node failed - Installation failed "
        "(refer to the installation log for more information)."
    )
    errors = capi.events(sid, level="ERROR")
    assert ("Node installation failure", "'curtin' command install") in {
        (e["type"], e["description"]) for e in errors
    }
    log = capi.get(f"nodes/{sid}/results/current-installation/", include_output="1").json()
    assert log["status_name"] == "Failed"
    assert b"sgdisk" in base64.b64decode(log["results"][0]["output"])


def test_commissioning_failure(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="cf1", status="new", faults={"commission_failure": [1]})
    capi.ok(sid, "commission")
    clock_sim.advance(75)
    failed = capi.machine(sid)
    assert (failed["status"], failed["status_name"]) == (2, "Failed commissioning")
    assert failed["status_message"] == (
        "Marking node failed - Commissioning failed, cloud-init reported a failure "
        "(refer to the event log for more information)"
    )
    assert failed["commissioning_status_name"] == "Failed"
    capi.ok(sid, "commission")  # allowed from Failed commissioning; the 2nd run is fine
    clock_sim.advance(130)
    assert capi.status(sid) == "Ready"


def test_erase_failure_on_release(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(hostname="ef1", status="deployed", faults={"erase_failure": [1]})
    capi.ok(sid, "release", erase="true")
    clock_sim.advance(125)
    failed = capi.machine(sid)
    assert (failed["status"], failed["status_name"]) == (15, "Failed disk erasing")
    assert failed["status_message"] == "Marking node failed - Failed to erase disks."
    assert failed["owner"] == "admin"  # release() never ran
    capi.ok(sid, "release", erase="true")  # releasable from Failed disk erasing; #2 wipes fine
    clock_sim.advance(135)
    assert capi.status(sid) == "Ready"


def test_a_stuck_release_times_out_only_without_scripts(capi: Api, clock_sim: Sim) -> None:
    """MAAS 3.5's start_releasing sets no status_expires: a release running scripts (Disk
    erasing, or Releasing with a release script) waits for the node for ever; a release
    without scripts fails 5 minutes after its power-off (docs/maas-api.md §4.3)."""
    erasing = clock_sim.add(hostname="st1", status="deployed", faults={"release_stuck": True})
    releasing = clock_sim.add(hostname="st2", status="deployed", faults={"release_stuck": True})
    scripted = clock_sim.add(hostname="st3", status="deployed", faults={"release_stuck": True})
    capi.ok(erasing, "release", erase="true")
    assert capi.ok(releasing, "release")["status_name"] == "Releasing"
    assert capi.ok(scripted, "release", erase="true", scripts="wipe")["status_name"] == (
        "Releasing"
    )
    clock_sim.advance(4 * 60)
    assert capi.status(releasing) == "Releasing"
    clock_sim.advance(61)
    stuck = capi.machine(releasing)
    assert (stuck["status"], stuck["status_name"]) == (13, "Releasing failed")
    assert stuck["error_description"] == "Node operation 'Releasing' timed out after 5 minutes."
    clock_sim.advance(6 * 3600)
    assert (capi.status(erasing), capi.status(scripted)) == ("Disk erasing", "Releasing")
    wipe = capi.get(f"nodes/{erasing}/results/", type="release").json()[-1]
    assert wipe["results"][0]["status_name"] == "Pending"
    # the fault lifted: the scripts run on and the release ends
    for sid in (erasing, scripted):
        clock_sim.post(f"machines/{sid}/faults", {"release_stuck": False})
    clock_sim.advance(200)
    assert (capi.status(erasing), capi.status(scripted)) == ("Ready", "Ready")


def test_bmc_unreachable(capi: Api, clock_sim: Sim) -> None:
    sid = clock_sim.add(
        hostname="bmc1", status="new", power_address="10.66.0.1", faults={"bmc_unreachable": True}
    )
    assert capi.ok(sid, "commission")["status_name"] == "Commissioning"
    clock_sim.advance(5)
    failed = capi.machine(sid)
    assert (failed["status_name"], failed["power_state"]) == ("Failed commissioning", "error")
    message = (
        "Power on for the node failed: Connection timed out while performing power action.  "
        "Check BMC configuration and connectivity and try again."
    )
    assert failed["status_message"] == f"Failed to power on node - {message}"
    assert failed["error_description"] == message
    query = capi.get(f"machines/{sid}/", op="query_power_state")
    assert query.status_code == 503
    assert capi.events(sid, level="WARNING")[0]["type"] == "Failed to query node's BMC"

    deployed = clock_sim.add(hostname="bmc2", status="deployed", faults={"bmc_unreachable": True})
    assert capi.op(deployed, "power_on").status_code == 200  # MAAS answers before the BMC does
    clock_sim.advance(5)
    after = capi.machine(deployed)
    assert (after["status_name"], after["power_state"]) == ("Deployed", "error")
    assert after["status_message"].startswith("Failed to power on node - Power on for the node")
    # power_on of an Allocated machine is Node.start: a deployment, which the BMC then fails
    allocated = clock_sim.add(hostname="bmc3", status="allocated", faults={"bmc_unreachable": True})
    assert capi.ok(allocated, "power_on")["status_name"] == "Deploying"
    clock_sim.advance(5)
    assert capi.status(allocated) == "Failed deployment"


def test_power_on_of_an_allocated_machine_deploys_it(capi: Api, clock_sim: Sim) -> None:
    """MAAS's power_on calls Node.start, which deploys an Allocated machine as it stands (no
    OS chosen: the default boots); abort takes it back to Allocated (errors.jsonl 167-170)."""
    sid = clock_sim.add(hostname="po1", status="allocated")
    answer = capi.ok(sid, "power_on", comment="x")
    assert (answer["status_name"], answer["osystem"]) == ("Deploying", "")
    assert answer["current_installation_result_id"] is not None
    types = [e["type"] for e in capi.events(sid, level="DEBUG")]
    assert "User starting deployment" in types and "User powering up node" not in types
    assert capi.ok(sid, "abort")["status_name"] == "Deploying"  # the answer: before the abort
    assert capi.status(sid) == "Allocated"
    capi.ok(sid, "power_on")
    clock_sim.advance(300)
    deployed = capi.machine(sid)
    assert (deployed["status_name"], deployed["osystem"]) == ("Deployed", "")
    assert "deployed ubuntu/jammy/amd64/generic" in [e["description"] for e in capi.events(sid)]


def test_duplicate_hostnames_and_shared_ipmi_address(sims: list[Sim]) -> None:
    with pytest.raises(ValueError, match="duplicate hostname"):
        scenario.load(
            Simulator(),
            {"machines": [{"hostname": "dup01"}, {"hostname": "dup01"}]},
            api_key=API_KEY,
        )
    s = make_sim(
        {
            "config": {"allow_duplicate_hostnames": True},
            "machines": [
                {"hostname": "dup01", "status": "ready", "power_address": "10.7.0.9"},
                {"hostname": "dup01", "status": "new", "power_address": "10.7.0.9"},
            ],
        }
    )
    sims.append(s)
    api = Api(s)
    twins = api.get("machines/", hostname="dup01").json()
    assert len(twins) == 2 and len({m["system_id"] for m in twins}) == 2
    params = api.get("machines/", op="power_parameters").json()
    shared = [sid for sid, p in params.items() if p["power_address"] == "10.7.0.9"]
    assert sorted(shared) == sorted(m["system_id"] for m in twins)


def test_pxe_interface_unlinked_or_on_the_wrong_subnet(capi: Api, clock_sim: Sim) -> None:
    unlinked = clock_sim.add(hostname="px1", status="new", faults={"pxe_unlinked": True})
    wrong = clock_sim.add(hostname="px2", status="new", faults={"pxe_wrong_subnet": 2})
    for sid in (unlinked, wrong):
        capi.ok(sid, "commission")
    clock_sim.advance(130)
    boot = capi.machine(unlinked)["boot_interface"]
    assert [lk["mode"] for lk in boot["links"]] == ["link_up"]
    assert "subnet" not in boot["links"][0]
    misplaced = capi.machine(wrong)["boot_interface"]["links"]
    assert [(lk["mode"], lk["subnet"]["cidr"]) for lk in misplaced] == [("auto", "10.30.0.0/24")]


def test_enlist_on_power_cycle_adds_a_stranger(api: Api, sim: Sim) -> None:
    sid = sim.add(
        hostname="en1",
        status="ready",
        power_address="10.8.0.1",
        faults={"enlist_on_power_cycle": True},
    )
    api.ok(sid, "deploy")
    machines = api.get("machines/").json()
    stranger = [m for m in machines if m["system_id"] != sid]
    assert [m["status_name"] for m in stranger] == ["New"]
    params = api.get("machines/", op="power_parameters").json()
    assert params[stranger[0]["system_id"]]["power_address"] == "10.8.0.1"


# -- request faults and counters -----------------------------------------------------------------


def test_bursts_of_503_with_retry_after(api: Api, sim: Sim) -> None:
    sim.faults({"kind": "503", "count": 2, "method": "GET", "retry_after": 7})
    answers = [api.get("machines/") for _ in range(3)]
    assert [r.status_code for r in answers] == [503, 503, 200]
    assert answers[0].headers["Retry-After"] == "7"
    assert answers[0].text == "Unable to connect to any rack controller."
    assert sim.count("machines.read", status=503) == 2
    assert sim.count("machines.read", status=200) == 1


def test_409_with_retry_after_and_502(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="rf1", status="ready")
    sim.faults({"kind": "409", "op": "deploy", "retry_after": 5})
    conflict = api.op(sid, "deploy")
    assert (conflict.status_code, conflict.headers["Retry-After"]) == (409, "5")
    assert conflict.headers["Content-Type"].startswith("text/html")
    assert api.status(sid) == "Ready"  # refused before anything happened
    sim.faults({"kind": "502", "method": "GET", "system_id": sid})
    assert api.get(f"machines/{sid}/").status_code == 502
    assert api.get(f"machines/{sid}/").status_code == 200


def test_slow_answer(api: Api, sim: Sim) -> None:
    sim.faults({"kind": "slow", "method": "GET", "delay": 0.5})
    with pytest.raises(requests.exceptions.ReadTimeout):
        api.session.get(api.root + "users/?op=whoami", timeout=0.1)
    # the fault was used up by the first request: nothing is left to slow the next one
    left = requests.get(sim.control + "faults", timeout=10).json()["faults"]
    assert [f for f in left if f["count"] > 0] == []
    assert api.get("users/", op="whoami").status_code == 200


def test_drop_after_apply_closes_the_connection_but_applies(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="dr1", status="ready")
    sim.faults({"kind": "drop_after_apply", "op": "deploy"})
    with pytest.raises(requests.exceptions.ConnectionError):
        api.op(sid, "deploy", distro_series="jammy")
    assert api.status(sid) == "Deploying"
    assert sim.count("machine.deploy") == 1


def test_counters_show_exactly_which_mutations_happened(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="cn1", status="ready")
    sim.reset_counters()
    api.machine(sid)
    api.ok(sid, "deploy")
    assert api.op(sid, "deploy").status_code == 409
    api.ok(sid, "release")
    assert sim.mutations(sid) == ["machine.deploy", "machine.deploy", "machine.release"]
    assert sim.count("machine.deploy", status=200) == 1
    assert sim.count("machine.deploy", status=409) == 1
    assert sim.count("machine.read") == 1
    state = requests.get(sim.control + "state", timeout=5).json()
    assert state["machines"] == 1 and state["scale"] == 600
    requests.delete(sim.control + "counters", timeout=5)
    assert sim.mutations() == []


def test_control_endpoint_edits_machines_and_refuses_bad_input(sim: Sim) -> None:
    added = sim.post("machines", {"machines": [{"hostname": "ctl1", "status": "ready"}]})
    sid = added["system_ids"][0]
    faults = sim.post(f"machines/{sid}/faults", {"erase_failure": [2]})["faults"]
    assert faults["erase_failure"] == [2] and faults["bmc_unreachable"] is False
    assert sim.post(f"machines/{sid}/status", {"status": "broken"})["status"] == "Broken"
    bad = requests.post(sim.control + f"machines/{sid}/faults", json={"nope": 1}, timeout=5)
    assert bad.status_code == 400 and "unknown machine faults" in bad.json()["error"]
    bad_kind = requests.post(sim.control + "faults", json={"faults": [{"kind": "x"}]}, timeout=5)
    assert bad_kind.status_code == 400
    assert requests.get(sim.control + "machines/zzzzzz", timeout=5).status_code == 404
    config = sim.post("config", {"enable_disk_erasing_on_release": True})
    assert config["enable_disk_erasing_on_release"] is True
    assert requests.post(sim.control + "config", json={"colour": 1}, timeout=5).status_code == 400


# -- scale ---------------------------------------------------------------------------------------


def test_ten_thousand_machines_are_listed(sims: list[Sim]) -> None:
    s = make_sim({"generate": {"count": 10_000}})
    sims.append(s)
    api = Api(s)
    machines = orjson.loads(api.get("machines/").content)
    assert len(machines) == 10_000
    assert len({m["system_id"] for m in machines}) == 10_000
    assert {m["status_name"] for m in machines} == {"Ready"}
    assert [m["hostname"] for m in api.get("machines/", hostname="gen09999").json()] == ["gen09999"]


def test_many_concurrent_clients(api: Api, sim: Sim) -> None:
    ids = [sim.add(hostname=f"cc{i:02d}", status="ready") for i in range(20)]
    results: dict[str, tuple[int, int]] = {}

    def client(sid: str) -> None:
        own = Api(sim)
        read = own.get(f"machines/{sid}/").status_code
        deployed = own.op(sid, "deploy", distro_series="jammy").status_code
        own.get("machines/")
        results[sid] = (read, deployed)

    threads = [threading.Thread(target=client, args=(sid,)) for sid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {sid: (200, 200) for sid in ids}
    assert sim.count("machine.deploy", status=200) == 20
    assert {api.machine(sid)["status_name"] for sid in ids} <= {"Deploying", "Deployed"}


# -- scenario files and the command --------------------------------------------------------------


SCENARIO_YAML = """
users:
  - {username: ops, is_superuser: false, api_key: "OpsConsumerKey1234:OpsTokenKey1234567:OpsSecret"}
subnets:
  - {id: 7, name: pxe-a, cidr: 10.50.0.0/16, vlan_id: 70, fabric_id: 3, gateway_ip: 10.50.0.1}
boot_resources:
  - {name: ubuntu/noble, architecture: amd64/ga-24.04}
config:
  default_distro_series: noble
machines:
  - hostname: c07u31
    status: ready
    power_address: 10.10.0.31
    mac_addresses: ["52:54:00:aa:00:01", "52:54:00:aa:00:02"]
    faults: {deploy_curtin_failure: [1]}
  - hostname: c07u32
    system_id: abc123
    interfaces:
      - {name: ens1f0, mac_address: "52:54:00:aa:01:01", subnet: 7}
generate: {count: 3, status: new, prefix: bulk}
request_faults:
  - {kind: "503", count: 1, method: GET, retry_after: 2}
"""


def test_scenario_yaml_file_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(SCENARIO_YAML)
    sim = Simulator()
    faults = scenario.load(sim, scenario.read_file(path), api_key=API_KEY)
    assert [f.kind for f in faults] == ["503"] and faults[0].retry_after == 2
    assert {u.username: u.is_superuser for u in sim.users.values()} == {"admin": True, "ops": False}
    assert [s.cidr for s in sim.subnets.values()] == ["10.50.0.0/16"]
    assert sim.config["default_distro_series"] == "noble"
    by_name = {m.hostname: m for m in sim.machines.values()}
    assert sorted(by_name) == ["bulk00000", "bulk00001", "bulk00002", "c07u31", "c07u32"]
    first = by_name["c07u31"]
    assert first.status.label == "Ready" and first.power_address == "10.10.0.31"
    assert [i.mac_address for i in first.interfaces] == ["52:54:00:aa:00:01", "52:54:00:aa:00:02"]
    assert first.faults.deploy_curtin_failure == [1]
    assert first.interfaces[0].links[0].subnet_id == 7
    second = by_name["c07u32"]
    assert second.system_id == "abc123" and second.interfaces[0].name == "ens1f0"
    json_path = tmp_path / "site.json"
    json_path.write_text(json.dumps({"generate": {"count": 2}}))
    assert scenario.read_file(json_path) == {"generate": {"count": 2}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"machnes": []}, "unknown scenario keys"),
        ({"machines": [{"hostname": "x", "faults": {"gremlins": True}}]}, "unknown machine faults"),
        ({"machines": [{"hostname": "x", "colour": "red"}]}, "unknown machine fields"),
        ({"machines": [{"status": "sleeping"}]}, "unknown machine status"),
        ({"request_faults": [{"kind": "418"}]}, "fault kind must be one of"),
        ({"request_faults": [{"kind": "503", "when": "now"}]}, "unknown request fault fields"),
        ({"config": {"colour": "red"}}, "unknown config fields"),
        ({"generate": {"count": 1, "speed": 2}}, "unknown generate fields"),
    ],
)
def test_scenario_mistakes_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scenario.load(Simulator(), data, api_key=API_KEY)


def test_scenario_file_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="must be a mapping"):
        scenario.read_file(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_simulate_maas_command(tmp_path: Path) -> None:
    port = _free_port()
    key_file = tmp_path / "maas.key"
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "simulate_maas",
            "--port",
            str(port),
            "--api-key-file",
            str(key_file),
            "--machines",
            "5",
            "--time-scale",
            "100",
        ],
        cwd=root,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = ""
        for _ in range(20):  # skip any warning printed before the banner
            line = process.stdout.readline()
            if not line or line.startswith("MAAS simulator on"):
                break
        assert line.startswith(f"MAAS simulator on http://127.0.0.1:{port}/MAAS/ (5 machines"), line
        assert "time scale 100x" in line
        key = key_file.read_text().strip()
        assert len(key.split(":")) == 3
        assert key_file.stat().st_mode & 0o777 == 0o600
        client = MaasClient(f"http://127.0.0.1:{port}/MAAS/", key, sleep=lambda s: None)
        machines = client.list_machines()
        assert [m.hostname for m in machines] == [f"gen{i:05d}" for i in range(5)]
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=10)

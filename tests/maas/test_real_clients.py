"""Where MAAS clients nobody here wrote broke on the simulator (Juju's gomaasapi, python-libmaas,
Drydock, MAAS's own CLI, gomaasclient under terraform-provider-maas, maas-client-go under
cluster-api-provider-maas): each rule as the recorded MAAS 3.5.10 region answered it
(tests/data/maas-transcripts/, the step named)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from maas_simulator import api as sim_api
from maas_simulator.model import Simulator
from maas_simulator.scenario import load as load_scenario
from tests.support.maas import API_KEY, Api, Sim, b64_multipart, make_sim
from tests.support.transcripts import load, oauth_header


def recorded(scenario: str, step: int) -> dict[str, Any]:
    line = next(x for x in load(scenario) if x["step"] == step)
    return dict(line["response"])


def hmac_request(
    sim: Sim,
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    form: list[tuple[str, str]] | None = None,
    multipart: bool = False,
    fields_signed: bool = True,
    key: str = API_KEY,
) -> requests.Response:
    """A request signed with HMAC-SHA1 as oauthlib signs it (maas-client-go, gomaasclient)."""
    url = f"{sim.url}api/2.0/{path}" + (f"?{urlencode(query)}" if query else "")
    headers: dict[str, str] = {}
    data: bytes | None = None
    if form is not None and multipart:
        data, headers["Content-Type"] = b64_multipart([(k, v.encode()) for k, v in form])
    elif form is not None:
        data = urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    signed = form if form and fields_signed else None
    headers["Authorization"] = oauth_header(key, method=method, url=url, hmac=True, body=signed)
    return requests.request(method, url, data=data, headers=headers, timeout=10)


# -- OAuth HMAC-SHA1 -------------------------------------------------------------------------------


def test_hmac_sha1_signatures_are_accepted(api: Api, sim: Sim) -> None:
    """errors.jsonl 191-193, 197: GET, GET with a query, a urlencoded POST (its fields in the
    base string, as OAuth 1.0 says), a multipart POST with its fields in the base string."""
    me = hmac_request(sim, "GET", "users/", query=[("op", "whoami")])
    assert (me.status_code, me.json()["username"]) == (200, "admin")
    sid = sim.add(hostname="hm1", status="ready")
    listed = hmac_request(sim, "GET", "machines/", query=[("hostname", "hm1")])
    assert [m["system_id"] for m in listed.json()] == [sid]
    api.ok(sid, "deploy", distro_series="jammy")  # owned by admin: mark_broken is allowed
    broken = hmac_request(
        sim,
        "POST",
        f"machines/{sid}/",
        query=[("op", "mark_broken")],
        form=[("comment", "hmac urlencoded")],
    )
    assert (broken.status_code, broken.json()["error_description"]) == (200, "hmac urlencoded")
    fixed = hmac_request(
        sim,
        "POST",
        f"machines/{sid}/",
        query=[("op", "mark_fixed")],
        form=[("comment", "hmac multipart")],
        multipart=True,
    )
    assert (fixed.status_code, fixed.json()["error_description"]) == (200, "")


def test_hmac_sha1_refusals_quote_the_base_string(sim: Sim) -> None:
    """errors.jsonl 195 and 199: a multipart body signed without its fields, and a wrong
    secret: 401 with piston's text quoting the base string MAAS expected (it holds no secret)."""
    sid = sim.add(hostname="hm2", status="broken")
    unsigned = hmac_request(
        sim,
        "POST",
        f"machines/{sid}/",
        query=[("op", "mark_fixed")],
        form=[("comment", "hmac multipart")],
        multipart=True,
        fields_signed=False,
    )
    maas = recorded("errors", 195)
    assert (unsigned.status_code, unsigned.headers["Content-Type"]) == (
        maas["status"],
        maas["content_type"],
    )
    assert unsigned.headers["WWW-Authenticate"] == maas["headers"]["WWW-Authenticate"]
    assert "&comment%3Dhmac%2520multipart%26oauth_consumer_key%3D" in unsigned.text
    assert unsigned.text.startswith(
        "Authorization Error: 'Invalid signature. Expected signature base string: POST&http%3A"
    )
    ck, tk, _ = API_KEY.split(":")
    wrong = hmac_request(
        sim, "GET", "users/", query=[("op", "whoami")], key=f"{ck}:{tk}:WrongSecret"
    )
    assert wrong.status_code == 401
    assert "WrongSecret" not in wrong.text and "SimTokenSecret" not in wrong.text
    shape = re.sub(r"%3D[^%]+%26", "%3DX%26", recorded("errors", 199)["body"])
    shown = re.sub(r"%3D[^%]+%26", "%3DX%26", wrong.text)
    assert re.sub(r"127\.0\.0\.1%3A\d+", "H", shown) == re.sub(r"127\.0\.0\.1%3A\d+", "H", shape)
    # the refused request changed nothing
    assert requests.get(sim.control + f"machines/{sid}", timeout=5).json()["status"] == "Broken"


# -- an empty op= ----------------------------------------------------------------------------------


def test_an_empty_op_is_no_op(api: Api, sim: Sim) -> None:
    """errors.jsonl 124-126: ``op=`` is MAAS's ``None``: POST machines/?op= creates, GET lists,
    and on a machine, where POST has no CRUD, it is the signature ``op=None``."""
    made = api.send(
        "POST",
        "machines/?op=",
        architecture="amd64/generic",
        mac_addresses="52:54:00:ee:00:20",
        power_type="manual",
        commission="false",
        hostname="err-emptyop",
    )
    assert (made.status_code, made.json()["hostname"]) == (200, "err-emptyop")
    listed = api.get("machines/", op="")
    assert listed.status_code == 200 and "err-emptyop" in [m["hostname"] for m in listed.json()]
    refused = api.send("POST", f"machines/{made.json()['system_id']}/", op="", hostname="x")
    assert (refused.status_code, refused.text) == (
        400,
        recorded("errors", 126)["body"],  # Unrecognised signature: method=POST op=None
    )


# -- node devices ----------------------------------------------------------------------------------


def test_node_devices_nest_the_interface_as_maas_does(api: Api, sim: Sim) -> None:
    """onboarding-sequence.jsonl 35: a NIC's node device holds the whole interface object (a
    client reading ``physical_interface["id"]`` broke on a bare id)."""
    sid = sim.add(hostname="nd", status="ready")
    nic = next(d for d in api.get(f"nodes/{sid}/devices/").json() if d["hardware_type"] == 4)
    maas = next(d for d in recorded("onboarding-sequence", 35)["body"] if d["hardware_type"] == 4)
    assert set(nic["physical_interface"]) == set(maas["physical_interface"])
    assert (
        nic["physical_interface"]["mac_address"]
        == api.machine(sid)["boot_interface"]["mac_address"]
    )


# -- a child interface re-sending its parent's MAC -------------------------------------------------


def test_a_vlan_interface_may_resend_its_parents_mac(sims: list[Sim]) -> None:
    """errors.jsonl 205-207: a VLAN interface PUT with its parent's MAC is accepted (clients
    re-send the whole object); a physical NIC with another machine's MAC is refused."""
    s = make_sim(
        {
            "fabrics": [{"id": 1}],
            "vlans": [
                {"id": 5001, "fabric_id": 1, "vid": 0},
                {"id": 5002, "fabric_id": 1, "vid": 100, "primary_rack": None},
            ],
            "subnets": [{"id": 1, "name": "pxe", "cidr": "10.20.0.0/16", "vlan_id": 5001}],
        }
    )
    sims.append(s)
    sapi = Api(s)
    other = s.add(hostname="err-new", status="ready", mac_addresses=["52:54:00:ee:00:01"])
    sid = s.add(hostname="err-deployed", status="allocated", mac_addresses=["52:54:00:ee:00:02"])
    boot = sapi.machine(sid)["boot_interface"]
    vlan = sapi.send(
        "POST", f"nodes/{sid}/interfaces/", "create_vlan", vlan=5002, parent=boot["id"]
    )
    assert vlan.status_code == 200, vlan.text
    again = sapi.send(
        "PUT", f"nodes/{sid}/interfaces/{vlan.json()['id']}/", mac_address=boot["mac_address"]
    )
    assert (again.status_code, again.json()["mac_address"]) == (200, boot["mac_address"])
    taken = sapi.send(
        "PUT", f"nodes/{sid}/interfaces/{boot['id']}/", mac_address="52:54:00:ee:00:01"
    )
    name = sapi.machine(other)["boot_interface"]["name"]
    assert (taken.status_code, taken.json()) == (
        400,
        {"mac_address": [f"This MAC address is already in use by {name} (physical) on err-new."]},
    )


# -- DHCP needs a dynamic range --------------------------------------------------------------------


def test_the_default_site_serves_dhcp_only_with_a_dynamic_range() -> None:
    """errors.jsonl 208-209: MAAS refuses DHCP on a VLAN without a dynamic range; the default
    site and the demo keep to it, and a scenario asking for it is refused."""
    for data in ({}, {"subnets": [{"id": 1, "name": "a", "cidr": "10.9.0.0/24", "vlan_id": 7}]}):
        model = Simulator()
        load_scenario(model, data)
        for vlan in model.net.vlans.values():
            ranges = [
                r
                for r in model.net.ranges.values()
                if r.type == "dynamic" and model.subnets[r.subnet_id].vlan_id == vlan.id
            ]
            assert vlan.dhcp_on == bool(ranges), vlan
    default = Simulator()
    load_scenario(default, {})
    assert [v.dhcp_on for v in sorted(default.net.vlans.values(), key=lambda v: v.id)] == [
        True,
        False,
    ]
    with pytest.raises(ValueError, match="dynamic IP range"):
        load_scenario(
            Simulator(),
            {
                "fabrics": [{"id": 1}],
                "vlans": [{"id": 9, "fabric_id": 1, "vid": 0, "dhcp_on": True}],
                "subnets": [{"id": 1, "name": "a", "cidr": "10.9.0.0/24", "vlan_id": 9}],
            },
        )


# -- events query ----------------------------------------------------------------------------------


def test_events_filters_and_together_and_refuse_a_bad_mac(api: Api, sim: Sim) -> None:
    """listings.jsonl 67-77 and errors.jsonl 117: repeated values are OR-ed, different filters
    AND-ed; zone, pool, agent_name and domain narrow too; a bad MAC is a 400."""
    a = sim.add(hostname="ev-a", status="ready", mac_addresses=["52:54:00:bb:00:03"])
    b = sim.add(
        hostname="ev-b", status="deployed", mac_addresses=["52:54:00:bb:00:04"], agent_name="x"
    )
    with sim.model.lock:
        for sid in (a, b):
            sim.model.event(sim.model.machines[sid], "INFO", "Filler", "an event")

    def nodes(**query: Any) -> set[str]:
        page = api.get("events/", op="query", level="DEBUG", **query)
        assert page.status_code == 200, page.text
        return {e["node"] for e in page.json()["events"]}

    assert nodes(id=[a, b]) == {a, b}
    assert nodes(id=a, hostname="ev-b") == set()  # AND, not OR (listings 69)
    assert nodes(id=b, hostname="ev-b") == {b}
    assert nodes(id=a, mac_address="52:54:00:bb:00:04") == set()  # listings 72
    assert nodes(mac_address="52:54:00:bb:00:04") == {b}
    assert nodes(zone="nosuchzone") == set()  # listings 73: no node, not an error
    assert nodes(zone="default", id=b) == {b}
    assert nodes(pool="default", id=b) == {b}
    assert nodes(domain="maas", id=b) == {b}
    assert nodes(agent_name="x") == {b} and nodes(agent_name="y") == set()
    bad = api.get("events/", op="query", mac_address="zz")
    maas = recorded("errors", 117)
    assert (bad.status_code, bad.text, bad.headers["Content-Type"]) == (
        maas["status"],
        maas["body"],
        maas["content_type"],
    )


# -- describe --------------------------------------------------------------------------------------


def test_describe_hash_is_the_api_hash_header_and_lists_what_is_served(sim: Sim) -> None:
    """MAAS's CLI caches the description and compares its hash with every answer's
    X-MAAS-API-Hash; it builds its commands from the handlers' actions."""
    described = requests.get(sim.url + "api/2.0/describe/", timeout=10)
    doc = described.json()
    other = requests.get(
        sim.url + "api/2.0/describe/", headers={"Host": "maas.example:5240"}, timeout=10
    ).json()
    answer = Api(sim).get("users/", op="whoami")
    assert doc["hash"] == other["hash"] == answer.headers["X-MAAS-API-Hash"]
    assert other["handlers"][0]["uri"].startswith("http://maas.example:5240/MAAS/api/2.0/")
    assert "X-MAAS-API-Hash" not in described.headers  # recorded: describe/ has none
    listed = {(h["path"], a["method"], a["op"]) for h in doc["handlers"] for a in h["actions"]}
    served = {(res.path, act.method, act.op) for res in sim_api.RESOURCES for act in res.actions}
    assert listed == served
    # every action listed is routed to a handler that serves it (not 404, not "Unrecognised")
    for path, method, op in sorted(listed, key=str):
        concrete = re.sub(r"{\w+}", "1", path)
        res = next(r for r in sim_api.RESOURCES if r.match(concrete) is not None)
        assert any(a.method == method and a.op == op for a in res.actions), (path, method, op)


# -- SSH keys, subnet addresses, DNS resources -----------------------------------------------------

ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDMl7AnBP2UyOXWfEUkIYhYD9ipMLpQEZXFlJqdUeG07 "
    "recorder@example"
)


def test_ssh_keys_are_created_as_maas_creates_them(api: Api, sim: Sim) -> None:
    """errors.jsonl 210-212."""
    made = api.send("POST", "account/prefs/sshkeys/", key=ED25519)
    maas = recorded("errors", 210)
    assert (made.status_code, made.headers["Content-Type"]) == (
        maas["status"],
        maas["content_type"],
    )
    assert made.json() == {**maas["body"], "id": made.json()["id"]}
    bad = api.send("POST", "account/prefs/sshkeys/", key="ssh-rsa not-a-key")
    assert (bad.status_code, bad.json()) == (400, recorded("errors", 211)["body"])
    assert api.send("POST", "account/prefs/sshkeys/", key=ED25519).json() == {
        "key": ["This key has already been added for this user."]
    }
    assert api.send("POST", "account/prefs/sshkeys/", key="onlyone").json() == {
        "key": [
            "Invalid SSH public key: Key should contain 2 or more space separated parts (key "
            "type, base64-encoded key, optional comments), not 1: onlyone"
        ]
    }
    listed = api.get("account/prefs/sshkeys/").json()
    assert [k["key"] for k in listed] == [ED25519]
    assert set(listed[0]) == set(recorded("errors", 212)["body"][0])


def test_subnet_ip_addresses_and_statistics(api: Api, sim: Sim) -> None:
    """site-reads.jsonl 13-14: the addresses in use on a subnet, and its usage."""
    before = api.get("subnets/2/", op="statistics").json()
    assert set(before) == set(recorded("site-reads", 14)["body"])
    assert (before["total_addresses"], before["first_address"]) == (254, "10.30.0.1")
    sid = sim.add(hostname="ip1", status="ready")
    api.ok(sid, "deploy", distro_series="jammy")
    addresses = api.get("subnets/1/", op="ip_addresses").json()
    mine = [a for a in addresses if a.get("node_summary", {}).get("system_id") == sid]
    assert len(mine) == 1 and mine[0]["alloc_type"] == 0 and mine[0]["user"] == "admin"
    assert mine[0]["node_summary"]["via"] == api.machine(sid)["boot_interface"]["name"]
    bare = api.get("subnets/1/", op="ip_addresses", with_summary="0").json()
    assert all("node_summary" not in a for a in bare)
    stats = api.get("subnets/1/", op="statistics").json()
    assert stats["num_unavailable"] >= len(addresses)


def test_dns_resources(api: Api, sim: Sim) -> None:
    """errors.jsonl 213-215: CAPMAAS's control-plane endpoint record."""
    assert api.get("dnsresources/").json() == []
    made = api.send("POST", "dnsresources/", fqdn="cp-endpoint.maas", ip_addresses="10.20.0.250")
    maas = recorded("errors", 214)["body"]
    assert made.status_code == 200, made.text
    body = made.json()
    assert set(body) == set(maas)
    assert set(body["ip_addresses"][0]) == set(maas["ip_addresses"][0])
    assert (body["fqdn"], body["ip_addresses"][0]["ip"], body["ip_addresses"][0]["alloc_type"]) == (
        "cp-endpoint.maas",
        "10.20.0.250",
        4,
    )
    assert [r["fqdn"] for r in api.get("dnsresources/").json()] == ["cp-endpoint.maas"]
    reserved = api.get("subnets/1/", op="ip_addresses").json()
    assert [a["dns_records"][0]["name"] for a in reserved if a["ip"] == "10.20.0.250"] == [
        "cp-endpoint"
    ]
    assert api.send("POST", "dnsresources/", fqdn="x.nosuch").status_code == 404
    operator = Api(sim, key=None)
    assert operator.get("dnsresources/").status_code == 401

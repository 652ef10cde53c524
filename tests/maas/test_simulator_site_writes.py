"""Site-preparation writes on the network: VLANs (create, update, delete, DHCP, racks, relay),
static routes, IP ranges, and the reads MAAS serves beside them (SSH keys, package
repositories), as MAAS 3.5's ``vlans.py``, ``staticroutes.py``, ``ipranges.py`` and their forms
answer them (docs/simulator.md, "Site network writes"). Each endpoint is driven by
python-libmaas where it has a verb, else by OAuth-signed multipart requests; each refusal has
its test."""

from __future__ import annotations

from typing import Any

import maas.client
import pytest
from maas.client.bones import CallError
from maas.client.enum import IPRangeType

from maas_simulator import scenario
from maas_simulator.model import Simulator
from tests.support.maas import API_KEY, Api, Sim, make_sim

OPS_KEY = "OpsConsumerKey1234:OpsTokenKey1234567:OpsTokenSecret0123456789abcdefgh"
SITE: dict[str, Any] = {
    "users": [
        {
            "username": "ops",
            "is_superuser": False,
            "api_key": OPS_KEY,
            "ssh_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@laptop"],
        }
    ],
    "spaces": [{"id": 1, "name": "storage"}],
    "fabrics": [{"id": 1, "name": "fabric-pxe"}, {"id": 2, "name": "fabric-data"}],
    "vlans": [
        {"id": 5001, "fabric_id": 1, "vid": 0},
        {"id": 5002, "fabric_id": 2, "vid": 0, "dhcp_on": False},
        {"id": 5003, "fabric_id": 2, "vid": 42, "dhcp_on": False, "primary_rack": None},
    ],
    "subnets": [
        {
            "id": 1,
            "name": "pxe",
            "cidr": "10.20.0.0/24",
            "vlan_id": 5001,
            "gateway_ip": "10.20.0.1",
        },
        {"id": 2, "name": "data", "cidr": "10.30.0.0/24", "vlan_id": 5002},
        {"id": 3, "name": "v6", "cidr": "fd00:30::/64", "vlan_id": 5002},
    ],
    "machines": [
        {
            "hostname": "w1",
            "status": "ready",
            "interfaces": [
                {"name": "eno1", "mac_address": "52:54:00:51:00:01", "subnet": 1},
                {"name": "ens1", "mac_address": "52:54:00:51:00:02", "subnet": 2},
            ],
        }
    ],
}


@pytest.fixture
def site(sims: list[Sim]) -> Sim:
    s = make_sim(SITE)
    sims.append(s)
    return s


@pytest.fixture
def sapi(site: Sim) -> Api:
    return Api(site)


@pytest.fixture
def lm(site: Sim) -> Any:
    return maas.client.connect(site.url, apikey=API_KEY)


def on_both(messages: list[str]) -> dict[str, list[str]]:
    """``IPRange``'s errors under both ``start_ip`` and ``end_ip``."""
    return {"start_ip": messages, "end_ip": list(messages)}


def errors(response: Any) -> Any:
    assert response.status_code == 400, response.text
    return response.json()


# -- VLANs ----------------------------------------------------------------------------------------


def test_vlan_create_with_libmaas(lm: Any, sapi: Api) -> None:
    fabric = lm.fabrics.get(2)
    vlan = lm._origin.Vlans.create(fabric, 100, name="storage-100", mtu=9000, space=1)
    assert (vlan.vid, vlan.name, vlan.mtu, vlan.dhcp_on) == (100, "storage-100", 9000, False)
    shown = sapi.get(f"vlans/{vlan.id}/").json()
    assert (shown["fabric"], shown["space"], shown["primary_rack"], shown["relay_vlan"]) == (
        "fabric-data",
        "storage",
        None,
        None,
    )
    assert shown["resource_uri"] == f"/MAAS/api/2.0/vlans/{vlan.id}/"
    unnamed = sapi.send("POST", "fabrics/2/vlans/", vid=101)
    assert unnamed.status_code == 200 and unnamed.json()["name"] is None  # VLAN.get_name
    assert [v["vid"] for v in sapi.get("fabrics/2/vlans/").json()] == [0, 42, 100, 101]


def test_vlan_create_refusals(sapi: Api, site: Sim) -> None:
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=42)) == {
        "__all__": ["A VLAN with the specified VID already exists in the destination fabric."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", name="x")) == {
        "vid": ["This field is required."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=5000)) == {
        "vid": ["VID must be between 0 and 4094."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=7, mtu=500)) == {
        "mtu": ["Ensure this value is greater than or equal to 552."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=7, mtu=70000)) == {
        "mtu": ["MTU must be between 552 and 65535."]
    }
    # A new VLAN has no VID yet, so no rack is one of its choices, and no dynamic range.
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=7, primary_rack="rack01")) == {
        "primary_rack": ["Select a valid choice. rack01 is not one of the available choices."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=7, dhcp_on="true")) == {
        "dhcp_on": ["dhcp can only be turned on when a dynamic IP range is defined."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=7, space="nowhere")) == {
        "space": ["Select a valid choice. That choice is not one of the available choices."]
    }
    assert errors(sapi.send("POST", "fabrics/2/vlans/", vid=7, name="bad name!")) == {
        "name": ["Enter a valid value."]
    }
    missing = sapi.send("POST", "fabrics/9/vlans/", vid=7)
    assert (missing.status_code, missing.text) == (404, "No Fabric matches the given query.")
    ops = Api(site, OPS_KEY).send("POST", "fabrics/2/vlans/", vid=7)
    assert (ops.status_code, ops.text) == (403, "")
    assert [v["vid"] for v in sapi.get("fabrics/2/vlans/").json()] == [0, 42]


def test_vlan_update_dhcp_racks_and_relay(lm: Any, sapi: Api, site: Sim) -> None:
    # DHCP needs a dynamic range on one of the VLAN's subnets (clean_dhcp_on).
    assert errors(sapi.send("PUT", "vlans/5002/", dhcp_on="true")) == {
        "dhcp_on": ["dhcp can only be turned on when a dynamic IP range is defined."]
    }
    made = sapi.send(
        "POST", "ipranges/", type="dynamic", start_ip="10.30.0.100", end_ip="10.30.0.150"
    )
    assert made.status_code == 200, made.text
    vlan = lm._origin.Vlan.read(2, 0)
    vlan.dhcp_on, vlan.mtu, vlan.name = True, 9000, "data"
    vlan.save()
    shown = sapi.get("vlans/5002/").json()
    assert (shown["dhcp_on"], shown["mtu"], shown["name"]) == (True, 9000, "untagged")
    # What interfaces show of the VLAN changes with it (the machine JSON is not stale).
    [machine] = sapi.get("machines/").json()
    ens1 = next(i for i in machine["interface_set"] if i["name"] == "ens1")
    assert (ens1["vlan"]["dhcp_on"], ens1["effective_mtu"]) == (True, 9000)
    # The tagged VLAN relays its DHCP to 5002 once it has a rack... a VLAN serving DHCP does
    # not relay, and relaying to itself is not a choice.
    assert errors(sapi.send("PUT", "vlans/5003/", relay_vlan=5003)) == {
        "relay_vlan": ["Select a valid choice. That choice is not one of the available choices."]
    }
    relayed = sapi.send("PUT", "fabrics/2/vlans/42/", relay_vlan=5002)
    assert relayed.status_code == 200, relayed.text
    assert relayed.json()["relay_vlan"]["id"] == 5002
    assert errors(sapi.send("PUT", "vlans/5002/", relay_vlan=5003)) == {
        "relay_vlan": ["Select a valid choice. That choice is not one of the available choices."]
    }
    cleared = sapi.send("PUT", "vlans/5003/", relay_vlan="")
    assert cleared.json()["relay_vlan"] is None
    # Racks: the one rack is the primary; it cannot also be the secondary; a VLAN without a
    # rack cannot serve DHCP; racks are the ones connected to a VLAN of that VID.
    assert errors(sapi.send("PUT", "vlans/5002/", secondary_rack="rack01")) == {
        "__all__": ["rack01 is already set as the primary rack controller"]
    }
    assert errors(sapi.send("PUT", "vlans/5003/", primary_rack="rack01")) == {
        "primary_rack": ["Select a valid choice. rack01 is not one of the available choices."]
    }
    assert errors(sapi.send("PUT", "vlans/5003/", primary_rack="nosuch")) == {
        "primary_rack": ["Select a valid choice. nosuch is not one of the available choices."]
    }
    # Dropping the primary of a VLAN serving DHCP is allowed (VLANForm.clean reads the old one).
    moved = sapi.send("PUT", "vlans/5001/", primary_rack="", space="storage", mtu="1400")
    assert moved.status_code == 200, moved.text
    assert (moved.json()["primary_rack"], moved.json()["space"], moved.json()["mtu"]) == (
        None,
        "storage",
        1400,
    )
    assert errors(sapi.send("PUT", "vlans/5001/", dhcp_on="true")) == {
        "dhcp_on": ["dhcp can only be turned on when a dynamic IP range is defined."]
    }
    assert errors(sapi.send("PUT", "vlans/5003/", vid=0)) == {
        "__all__": ["A VLAN with the specified VID already exists in the destination fabric."]
    }
    ops = Api(site, OPS_KEY).send("PUT", "vlans/5003/", mtu=9000)
    assert (ops.status_code, ops.text) == (403, "")
    assert sapi.send("PUT", "vlans/9999/", mtu=9000).status_code == 404


def test_vlan_delete(lm: Any, sapi: Api, site: Sim) -> None:
    made = lm._origin.Vlans.create(lm.fabrics.get(1), 300)
    sid = next(iter(site.model.machines))
    eno1 = next(i for i in sapi.machine(sid)["interface_set"] if i["name"] == "eno1")
    tagged = sapi.send(
        "POST", f"nodes/{sid}/interfaces/", "create_vlan", parent=eno1["id"], vlan=made.id
    )
    assert tagged.status_code == 200, tagged.text
    default = sapi.send("DELETE", "vlans/5001/")
    assert (default.status_code, default.text) == (
        400,
        "This VLAN is the default VLAN in the fabric, it cannot be deleted.",
    )
    made.delete()
    assert sapi.get(f"vlans/{made.id}/").status_code == 404
    names = [i["name"] for i in sapi.machine(sid)["interface_set"]]
    assert "eno1.300" not in names and "eno1" in names  # its VLAN interfaces go with it


# -- static routes --------------------------------------------------------------------------------


def test_static_routes_with_libmaas(lm: Any, sapi: Api, site: Sim) -> None:
    route = lm.static_routes.create(destination=2, source=1, gateway_ip="10.20.0.254", metric=5)
    assert (route.source.id, route.destination.id, route.gateway_ip, route.metric) == (
        1,
        2,
        "10.20.0.254",
        5,
    )
    assert lm.static_routes.get(route.id).gateway_ip == "10.20.0.254"
    assert [r.id for r in lm.static_routes.list()] == [route.id]
    by_name = sapi.send(
        "POST",
        "static-routes/",
        source="pxe",
        destination="cidr:10.30.0.0/24",
        gateway_ip="10.20.0.253",
    )
    assert by_name.status_code == 200 and by_name.json()["metric"] == 0
    moved = sapi.send("PUT", f"static-routes/{route.id}/", metric=20)
    assert (moved.json()["metric"], moved.json()["gateway_ip"]) == (20, "10.20.0.254")
    # The gateway of a route from a subnet is never handed out on it.
    subnet = site.model.subnets[1]
    taken = {subnet.allocate() for _ in range(300)} - {None}
    assert "10.20.0.254" not in taken and "10.20.0.253" not in taken
    route.delete()
    assert sapi.get(f"static-routes/{route.id}/").status_code == 404
    assert subnet.allocate() == "10.20.0.254"  # free again once the route is gone


def test_static_route_refusals(sapi: Api, site: Sim) -> None:
    assert errors(
        sapi.send("POST", "static-routes/", source=1, destination=2, gateway_ip="10.30.0.1")
    ) == {
        "gateway_ip": ["Enter an IP address in 10.20.0.0/24."],
        "__all__": ["gateway_ip must be with in the source subnet."],
    }
    assert errors(
        sapi.send("POST", "static-routes/", source=1, destination=1, gateway_ip="10.20.0.9")
    ) == {"__all__": ["source and destination cannot be the same subnet."]}
    assert errors(
        sapi.send("POST", "static-routes/", source=1, destination=3, gateway_ip="10.20.0.9")
    ) == {"__all__": ["source and destination must be the same IP version."]}
    assert errors(
        sapi.send("POST", "static-routes/", source=99, destination="x", gateway_ip="nope")
    ) == {
        "source": ["None found with id=99."],
        "destination": ["Select a valid choice. That choice is not one of the available choices."],
        "gateway_ip": ["Enter a valid IPv4 or IPv6 address."],
    }
    assert errors(sapi.send("POST", "static-routes/", source=1, destination=2)) == {
        "gateway_ip": ["This field is required."]
    }
    assert errors(
        sapi.send(
            "POST", "static-routes/", source=1, destination=2, gateway_ip="10.20.0.9", metric=-1
        )
    ) == {"metric": ["Ensure this value is greater than or equal to 0."]}
    first = sapi.send("POST", "static-routes/", source=1, destination=2, gateway_ip="10.20.0.9")
    assert first.status_code == 200
    assert errors(
        sapi.send("POST", "static-routes/", source=1, destination=2, gateway_ip="10.20.0.9")
    ) == {"__all__": ["Static route with this Source, Destination and Gateway IP already exists."]}
    ops = Api(site, OPS_KEY)
    denied = ops.send("POST", "static-routes/", source=1, destination=2, gateway_ip="10.20.0.8")
    assert (denied.status_code, denied.text) == (403, "This method is reserved for admin users.")
    assert ops.send("DELETE", f"static-routes/{first.json()['id']}/").status_code == 403
    assert len(sapi.get("static-routes/").json()) == 1


# -- IP ranges ------------------------------------------------------------------------------------


def test_ip_ranges_with_libmaas(lm: Any, sapi: Api, site: Sim) -> None:
    dynamic = lm.ip_ranges.create(
        "10.20.0.100", "10.20.0.199", type=IPRangeType.DYNAMIC, comment="pxe"
    )
    assert (dynamic.type, dynamic.subnet.id, dynamic.comment) == (IPRangeType.DYNAMIC, 1, "pxe")
    reserved = lm.ip_ranges.create("10.20.0.2", "10.20.0.20", subnet=1)
    assert [r.id for r in lm.ip_ranges.list()] == [dynamic.id, reserved.id]
    shown = sapi.get(f"ipranges/{reserved.id}/").json()
    assert (shown["type"], shown["user"]["username"], shown["subnet"]["cidr"]) == (
        "reserved",
        "admin",
        "10.20.0.0/24",
    )
    # Neither range is handed out: a STATIC link without an address, and a deploy's AUTO link.
    sid = next(iter(site.model.machines))
    eno1 = next(i for i in sapi.machine(sid)["interface_set"] if i["name"] == "eno1")
    static = sapi.send(
        "POST", f"nodes/{sid}/interfaces/{eno1['id']}/", "link_subnet", mode="static", subnet=1
    )
    # A reserved range may hold an address in use (the rack's .2); nothing new goes in it.
    assert static.json()["links"][-1]["ip_address"] == "10.20.0.21"
    inside = sapi.send(
        "POST",
        f"nodes/{sid}/interfaces/{eno1['id']}/",
        "link_subnet",
        mode="static",
        subnet=1,
        ip_address="10.20.0.150",
    )
    assert errors(inside) == {
        "ip_address": ["IP address is inside a dynamic range 10.20.0.100 to 10.20.0.199."]
    }
    lm.ip_ranges.get(reserved.id).delete()
    assert sapi.get(f"ipranges/{reserved.id}/").status_code == 404
    again = sapi.send(
        "POST",
        f"nodes/{sid}/interfaces/{eno1['id']}/",
        "link_subnet",
        mode="static",
        subnet=1,
        force="true",
    )
    assert again.json()["links"][-1]["ip_address"] == "10.20.0.3"  # free again
    widened = sapi.send("PUT", f"ipranges/{dynamic.id}/", end_ip="10.20.0.210", comment="wider")
    assert (widened.json()["end_ip"], widened.json()["comment"]) == ("10.20.0.210", "wider")


def test_ip_range_refusals(sapi: Api, site: Sim) -> None:
    def post(**fields: Any) -> Any:
        return errors(sapi.send("POST", "ipranges/", **fields))

    assert post(type="reserved", start_ip="10.20.0.50", end_ip="10.20.0.40") == {
        "end_ip": ["End IP address must not be less than Start IP address."]
    }
    assert post(type="reserved", start_ip="10.20.0.250", end_ip="10.30.0.5") == {
        "end_ip": ["End IP address must be within subnet: 10.20.0.0/24."]
    }
    assert post(type="reserved", start_ip="10.20.0.0", end_ip="10.20.0.5") == {
        "start_ip": ["Reserved network address cannot be included in IP range."]
    }
    assert post(type="reserved", start_ip="10.20.0.250", end_ip="10.20.0.255") == {
        "end_ip": ["Broadcast address cannot be included in IP range."]
    }
    assert post(type="reserved", start_ip="10.20.0.5", end_ip="10.20.0.6", subnet=2) == on_both(
        ["IP addresses must be within subnet: 10.30.0.0/24."]
    )
    assert post(type="sometimes", start_ip="10.20.0.5", end_ip="10.20.0.6") == {
        "type": ["Select a valid choice. sometimes is not one of the available choices."]
    }
    assert post(type="reserved", start_ip="192.168.9.1", end_ip="192.168.9.9") == {
        "subnet": ["This field is required."]
    }
    assert post(type="dynamic", start_ip="fd00:30::10", end_ip="fd00:30::20") == on_both(
        ["IPv6 dynamic range must be at least 256 addresses in size."]
    )
    assert post(type="reserved", start_ip="10.20.0.5") == {
        "end_ip": [
            "This field is required.",
            "Start IP address and end IP address are both required.",
        ],
        "start_ip": ["Start IP address and end IP address are both required."],
    }
    # A dynamic range may not hold an address in use (the gateway, the rack's); a reserved
    # one may, but no other range.
    assert post(type="dynamic", start_ip="10.20.0.1", end_ip="10.20.0.9") == on_both(
        ["Requested dynamic range conflicts with an existing IP address or range."]
    )
    assert (
        sapi.send(
            "POST", "ipranges/", type="reserved", start_ip="10.20.0.1", end_ip="10.20.0.9"
        ).status_code
        == 200
    )
    assert post(type="reserved", start_ip="10.20.0.9", end_ip="10.20.0.12") == on_both(
        ["Requested reserved range conflicts with an existing range."]
    )
    ops = Api(site, OPS_KEY)
    denied = ops.send(
        "POST", "ipranges/", type="dynamic", start_ip="10.20.0.100", end_ip="10.20.0.110"
    )
    assert (denied.status_code, denied.text) == (
        403,
        "Unable to create dynamic IP range. You don't have sufficient privileges.",
    )
    mine = ops.send(
        "POST", "ipranges/", type="reserved", start_ip="10.20.0.100", end_ip="10.20.0.110"
    )
    assert mine.status_code == 200 and mine.json()["user"]["username"] == "ops"
    admins = sapi.get("ipranges/").json()[0]
    refused = ops.send("DELETE", f"ipranges/{admins['id']}/")
    assert (refused.status_code, refused.text) == (
        403,
        "Unable to modify IP range. You don't own the IP range.",
    )
    assert ops.send("DELETE", f"ipranges/{mine.json()['id']}/").status_code == 204
    assert sapi.get("ipranges/9999/").status_code == 404


# -- reads MAAS serves beside them ----------------------------------------------------------------


def test_ssh_keys_and_package_repositories(site: Sim, sapi: Api) -> None:
    ops = maas.client.connect(site.url, apikey=OPS_KEY)
    [key] = ops.ssh_keys.list()
    assert key.key.startswith("ssh-ed25519 ") and key.keysource == ""
    assert ops.ssh_keys.get(key.id).key == key.key
    assert sapi.get("account/prefs/sshkeys/").json() == []  # the caller's own keys only
    refused = sapi.send("DELETE", f"account/prefs/sshkeys/{key.id}/")
    assert (refused.status_code, refused.text) == (403, "Can't delete a key you don't own.")
    assert Api(site, OPS_KEY).send("DELETE", f"account/prefs/sshkeys/{key.id}/").status_code == 204
    assert sapi.get(f"account/prefs/sshkeys/{key.id}/").status_code == 404
    repos = sapi.get("package-repositories/").json()
    assert [(r["id"], r["name"], r["enabled"]) for r in repos] == [
        (1, "main_archive", True),
        (2, "ports_archive", True),
    ]
    assert sapi.get("package-repositories/2/").json() == repos[1]
    assert sapi.get("package-repositories/3/").status_code == 404


def test_unsimulated_writes_beside_them_answer_405(sapi: Api) -> None:
    for method, path, allow in (
        ("PUT", "account/prefs/sshkeys/", "GET, POST"),
        ("POST", "package-repositories/", "GET"),
    ):
        answer = sapi.send(method, path, name="x")
        assert (answer.status_code, answer.headers["Allow"]) == (405, allow), path


# -- scenarios ------------------------------------------------------------------------------------


def test_scenario_declares_dhcp_racks_relays_and_ranges(sims: list[Sim]) -> None:
    data = {
        "fabrics": [{"id": 1}],
        "vlans": [
            {"id": 5001, "fabric_id": 1, "vid": 0},
            {"id": 5002, "fabric_id": 1, "vid": 20, "dhcp_on": False, "relay_vlan": 5001},
        ],
        "subnets": [{"id": 1, "name": "pxe", "cidr": "10.20.0.0/24", "vlan_id": 5001}],
        "ip_ranges": [
            {"type": "dynamic", "start_ip": "10.20.0.2", "end_ip": "10.20.0.99"},
            {
                "type": "reserved",
                "start_ip": "10.20.0.100",
                "end_ip": "10.20.0.110",
                "comment": "bmc",
            },
        ],
        "machines": [{"hostname": "r1", "status": "deployed"}],
    }
    s = make_sim(data)
    sims.append(s)
    api = Api(s)
    assert api.get("vlans/5002/").json()["relay_vlan"]["id"] == 5001
    assert [(r["type"], r["comment"]) for r in api.get("ipranges/").json()] == [
        ("dynamic", ""),
        ("reserved", "bmc"),
    ]
    [machine] = api.get("machines/").json()
    # The rack and the deployed machine took addresses outside both ranges.
    assert machine["ip_addresses"] == ["10.20.0.111"]  # the rack holds .1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"ip_ranges": [{"type": "dynamic", "start_ip": "10.20.0.9", "end_ip": "10.20.0.1"}]},
            "End IP address",
        ),
        (
            {
                "ip_ranges": [
                    {
                        "type": "reserved",
                        "start_ip": "10.20.0.9",
                        "end_ip": "10.20.0.10",
                        "user": "nobody",
                    }
                ]
            },
            "unknown user",
        ),
        (
            {"ip_ranges": [{"type": "reserved", "start_ip": "10.20.0.9", "end": "x"}]},
            "unknown IP range fields",
        ),
        ({"vlans": [{"id": 5001, "fabric_id": 1, "vid": 0, "relay_vlan": 5001}]}, "relay_vlan"),
        (
            {"vlans": [{"id": 5001, "fabric_id": 1, "vid": 0, "primary_rack": "rack99"}]},
            "primary_rack",
        ),
    ],
)
def test_scenario_refuses_bad_site_declarations(change: dict[str, Any], message: str) -> None:
    data: dict[str, Any] = {
        "fabrics": [{"id": 1}],
        "vlans": [{"id": 5001, "fabric_id": 1, "vid": 0}],
        "subnets": [{"id": 1, "name": "pxe", "cidr": "10.20.0.0/24", "vlan_id": 5001}],
        "users": [{"username": "admin", "is_superuser": True, "api_key": API_KEY}],
        **change,
    }
    with pytest.raises(ValueError, match=message):
        scenario.load(Simulator(), data)


def test_libmaas_sees_refusals_as_call_errors(lm: Any) -> None:
    with pytest.raises(CallError) as refused:
        lm.static_routes.create(destination=2, source=2, gateway_ip="10.30.0.9", metric=0)
    assert refused.value.status == 400


def test_vlan_update_promotes_the_secondary_rack_and_moves_fabric(sims: list[Sim]) -> None:
    data = {
        "fabrics": [{"id": 1}, {"id": 2}],
        "vlans": [
            {
                "id": 5001,
                "fabric_id": 1,
                "vid": 0,
                "primary_rack": None,
                "secondary_rack": "rack01",
            },
            {"id": 5002, "fabric_id": 2, "vid": 0},
            {"id": 5003, "fabric_id": 2, "vid": 7},
        ],
        "subnets": [{"id": 1, "name": "pxe", "cidr": "10.20.0.0/24", "vlan_id": 5001}],
    }
    s = make_sim(data)
    sims.append(s)
    api = Api(s)
    # VLANForm.clean: with no primary, the secondary becomes the primary at any update.
    promoted = api.send("PUT", "vlans/5001/", mtu=1500).json()
    assert (promoted["primary_rack"], promoted["secondary_rack"]) == ("rack01", None)
    moved = api.send("PUT", "vlans/5003/", fabric="fabric-1")
    assert (moved.status_code, moved.json()["fabric_id"]) == (200, 1)
    assert [v["id"] for v in api.get("fabrics/1/vlans/").json()] == [5001, 5003]
    assert errors(api.send("PUT", "vlans/5003/", fabric=2, vid=0)) == {
        "__all__": ["A VLAN with the specified VID already exists in the destination fabric."]
    }
    assert errors(api.send("PUT", "vlans/5003/", fabric=9)) == {"fabric": ["None found with id=9."]}


def test_dhcp_needs_a_primary_rack_and_turning_it_on_ends_the_relay(sims: list[Sim]) -> None:
    data = {
        "fabrics": [{"id": 1}],
        "vlans": [
            {"id": 5001, "fabric_id": 1, "vid": 0},
            {"id": 5002, "fabric_id": 1, "vid": 30, "dhcp_on": False, "primary_rack": None},
            {"id": 5003, "fabric_id": 1, "vid": 31, "dhcp_on": False, "relay_vlan": 5001},
        ],
        "subnets": [
            {"id": 1, "name": "pxe", "cidr": "10.20.0.0/24", "vlan_id": 5001},
            {"id": 2, "name": "norack", "cidr": "10.31.0.0/24", "vlan_id": 5002},
            {"id": 3, "name": "relayed", "cidr": "10.32.0.0/24", "vlan_id": 5003},
        ],
        "ip_ranges": [
            {"type": "dynamic", "start_ip": "10.31.0.100", "end_ip": "10.31.0.200"},
            {"type": "dynamic", "start_ip": "10.32.0.100", "end_ip": "10.32.0.200"},
        ],
    }
    s = make_sim(data)
    sims.append(s)
    api = Api(s)
    assert errors(api.send("PUT", "vlans/5002/", dhcp_on="true")) == {
        "__all__": ["dhcp can only be turned on when a primary rack controller is set."]
    }
    served = api.send("PUT", "vlans/5003/", dhcp_on="true")
    assert served.status_code == 200, served.text
    assert (served.json()["dhcp_on"], served.json()["relay_vlan"]) == (True, None)


def test_dns_servers_on_the_subnet_are_never_handed_out(sims: list[Sim]) -> None:
    data = {
        "subnets": [
            {
                "id": 1,
                "name": "pxe",
                "cidr": "10.20.0.0/24",
                "vlan_id": 5001,
                "gateway_ip": "10.20.0.1",
                "dns_servers": ["10.20.0.2", "8.8.8.8"],
            }
        ],
        "machines": [{"hostname": "d1", "status": "deployed"}],
    }
    s = make_sim(data)
    sims.append(s)
    [machine] = Api(s).get("machines/").json()
    assert machine["ip_addresses"] == ["10.20.0.4"]  # .2: a DNS server, .3: the rack


def test_an_address_given_back_inside_a_new_range_is_not_handed_out(site: Sim, sapi: Api) -> None:
    sid = next(iter(site.model.machines))
    eno1 = next(i for i in sapi.machine(sid)["interface_set"] if i["name"] == "eno1")
    path = f"nodes/{sid}/interfaces/{eno1['id']}/"
    linked = sapi.send("POST", path, "link_subnet", mode="static", subnet=1).json()["links"][-1]
    assert linked["ip_address"] == "10.20.0.3"  # .2: the rack
    sapi.send("POST", path, "unlink_subnet", id=linked["id"])  # .3 is free again
    fenced = sapi.send(
        "POST", "ipranges/", type="reserved", start_ip="10.20.0.3", end_ip="10.20.0.9"
    )
    assert fenced.status_code == 200, fenced.text
    again = sapi.send("POST", path, "link_subnet", mode="static", subnet=1, force="true")
    assert again.json()["links"][-1]["ip_address"] == "10.20.0.10"

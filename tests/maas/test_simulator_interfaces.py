"""Interfaces built on a machine's NICs: ``op=create_bond``, ``op=create_vlan`` and
``op=create_bridge`` as MAAS 3.5's ``api/interfaces.py`` and ``forms/interface.py`` answer them,
what they do to their parents, and what commissioning, restore and deploy do to them
(docs/simulator.md, "Networking"). Driven by python-libmaas and by OAuth-signed multipart
requests; each refusal has its test."""

from __future__ import annotations

from typing import Any

import maas.client
import pytest
from maas.client.enum import InterfaceType, LinkMode

from maas_simulator import scenario
from maas_simulator.model import Simulator
from tests.support.maas import API_KEY, Api, Sim, make_sim

SITE: dict[str, Any] = {
    "fabrics": [{"id": 1}, {"id": 2}],
    "vlans": [
        {"id": 5001, "fabric_id": 1, "vid": 0},
        {"id": 5002, "fabric_id": 2, "vid": 0},
        {"id": 5003, "fabric_id": 2, "vid": 42},
        {"id": 5004, "fabric_id": 1, "vid": 43},
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
        {"id": 3, "name": "tagged", "cidr": "10.42.0.0/24", "vlan_id": 5003},
    ],
    "machines": [
        {
            "hostname": "n1",
            "status": "ready",
            "interfaces": [
                {"name": "eno1", "mac_address": "52:54:00:61:00:01", "subnet": 1},
                {"name": "ens1f0", "mac_address": "52:54:00:61:00:02", "subnet": 2},
                {"name": "ens1f1", "mac_address": "52:54:00:61:00:03", "subnet": 2},
                {"name": "ens2f0", "mac_address": "52:54:00:61:00:04", "connected": False},
            ],
        },
        {
            "hostname": "n2",
            "status": "ready",
            "interfaces": [{"name": "eno1", "mac_address": "52:54:00:62:00:01", "subnet": 1}],
        },
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


def sid_of(site: Sim, hostname: str) -> str:
    return next(m.system_id for m in site.model.machines.values() if m.hostname == hostname)


def nics(api: Api, sid: str) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in api.get(f"nodes/{sid}/interfaces/").json()}


def errors(response: Any) -> Any:
    assert response.status_code == 400, response.text
    return response.json()


def test_bond_with_libmaas(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "n1")
    lm = maas.client.connect(site.url, apikey=API_KEY)
    machine = lm.machines.get(system_id=sid)
    parents = [machine.interfaces.get_by_name(n) for n in ("ens1f0", "ens1f1")]
    bond = machine.interfaces.create(
        InterfaceType.BOND,
        name="bond0",
        parents=parents,
        bond_mode="802.3ad",
        bond_lacp_rate="fast",
        bond_xmit_hash_policy="layer3+4",
        mtu=9000,
    )
    assert (bond.type, bond.mac_address, bond.vlan.id) == (
        InterfaceType.BOND,
        "52:54:00:61:00:02",  # the first parent's
        5002,
    )
    assert [p.name for p in bond.parents] == ["ens1f0", "ens1f1"]
    assert [link.mode for link in bond.links] == [LinkMode.LINK_UP]
    shown = nics(sapi, sid)
    assert shown["bond0"]["params"] == {
        "bond_downdelay": 0,
        "bond_lacp_rate": "fast",
        "bond_miimon": 100,
        "bond_mode": "802.3ad",
        "bond_num_grat_arp": 1,
        "bond_updelay": 0,
        "bond_xmit_hash_policy": "layer3+4",
        "mtu": 9000,
    }
    # The parents lose their links, follow the bond's VLAN and its MTU.
    for name in ("ens1f0", "ens1f1"):
        assert (shown[name]["links"], shown[name]["children"], shown[name]["effective_mtu"]) == (
            [],
            ["bond0"],
            9000,
        )
    # A link on the bond is an ordinary link; the machine's JSON shows the bond.
    linked = machine.interfaces.get_by_name("bond0").links.create(LinkMode.AUTO, subnet=2)
    assert linked.subnet.id == 2
    assert "bond0" in [i["name"] for i in sapi.machine(sid)["interface_set"]]


def test_bond_refusals(site: Sim, sapi: Api) -> None:
    sid, other = sid_of(site, "n1"), sid_of(site, "n2")
    mine, theirs = nics(sapi, sid), nics(sapi, other)

    def bond(**fields: Any) -> Any:
        return sapi.send("POST", f"nodes/{sid}/interfaces/", "create_bond", **fields)

    # A NIC of another machine is not one of the choices.
    assert errors(bond(name="b0", parents=[mine["ens1f0"]["id"], theirs["eno1"]["id"]])) == {
        "parents": [
            f"Select a valid choice. {theirs['eno1']['id']} is not one of the available choices."
        ]
    }
    assert errors(bond(name="b0", parents="eno1")) == {
        "parents": ["\u201ceno1\u201d is not a valid value."]
    }
    assert errors(bond(name="b0")) == {
        "parents": ["A bond interface must have one or more parents."]
    }
    assert errors(bond(parents=[mine["ens1f0"]["id"]])) == {"name": ["This field is required."]}
    assert errors(bond(name="b0", parents=[mine["eno1"]["id"], mine["ens1f0"]["id"]])) == {
        "parents": ["All parents must belong to the same VLAN."]
    }
    assert errors(bond(name="b0", parents=[mine["ens1f0"]["id"]], bond_mode="fastest")) == {
        "bond_mode": [
            "'fastest' is not a valid bond_mode.  It should be one of: 'balance-rr', "
            "'active-backup', 'balance-xor', 'broadcast', '802.3ad', 'balance-tlb', "
            "'balance-alb'."
        ]
    }
    assert errors(bond(name="b0", parents=[mine["ens1f0"]["id"]], bond_miimon=-1)) == {
        "bond_miimon": ["Ensure this value is greater than or equal to 0."]
    }
    assert errors(bond(name="b0", parents=[mine["ens1f0"]["id"]], mtu=100)) == {
        "mtu": ["Ensure this value is greater than or equal to 552."]
    }
    assert errors(bond(name="eno1", parents=[mine["ens1f0"]["id"]])) == {
        "__all__": ["Interface with this Node config and Name already exists."]
    }
    made = bond(name="b0", parents=[mine["ens1f0"]["id"]])
    assert made.status_code == 200, made.text
    assert errors(bond(name="b1", parents=[mine["ens1f0"]["id"], mine["ens1f1"]["id"]])) == {
        "parents": ["Interfaces already in-use: ens1f0."]
    }
    assert errors(bond(name="b1", parents=[mine["ens1f0"]["id"], mine["eno1"]["id"]])) == {
        "parents": [
            "Interfaces already in-use: ens1f0.",
            "All parents must belong to the same VLAN.",
        ]
    }
    assert errors(bond(name="b2", parents=[made.json()["id"]])) == {
        "parents": ["Only physical interfaces can be bonded."]
    }
    # Only machines (a device or the rack is no Machine), admins, and MAAS's statuses.
    assert sapi.send("POST", "nodes/rack01/interfaces/", "create_bond", name="x").status_code == 404
    ops = site.model.users["admin"]
    ops.is_superuser = False
    denied = bond(name="b3", parents=[mine["ens1f1"]["id"]])
    assert (denied.status_code, denied.text) == (403, "")
    ops.is_superuser = True
    site.post(f"machines/{sid}/status", {"status": "deployed"})
    late = bond(name="b3", parents=[mine["ens1f1"]["id"]])
    assert (late.status_code, late.text) == (
        409,
        "Cannot create bond interface because the machine is not New, Ready, Allocated, or Broken.",
    )
    assert sorted(nics(sapi, sid)) == ["b0", "eno1", "ens1f0", "ens1f1", "ens2f0"]


def test_vlan_interface(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "n1")
    lm = maas.client.connect(site.url, apikey=API_KEY)
    machine = lm.machines.get(system_id=sid)
    tagged = machine.interfaces.create(
        InterfaceType.VLAN, parent=machine.interfaces.get_by_name("ens1f0"), vlan=5003
    )
    assert (tagged.name, tagged.type, tagged.vlan.vid, tagged.mac_address) == (
        "ens1f0.42",
        InterfaceType.VLAN,
        42,
        "52:54:00:61:00:02",
    )
    shown = nics(sapi, sid)
    assert shown["ens1f0.42"]["params"] == {} and shown["ens1f0"]["children"] == ["ens1f0.42"]
    assert [link["mode"] for link in shown["ens1f0"]["links"]] == ["link_up"]  # untouched
    named = sapi.send(
        "POST",
        f"nodes/{sid}/interfaces/",
        "create_vlan",
        parent=shown["ens1f1"]["id"],
        vlan=5003,
        name="storage",
    )
    assert named.json()["name"] == "storage"

    def vlan(**fields: Any) -> Any:
        return sapi.send("POST", f"nodes/{sid}/interfaces/", "create_vlan", **fields)

    assert errors(vlan(parent=shown["ens1f0"]["id"], vlan=5003)) == {
        "name": [f"Node {sid} (n1) already has an interface named 'ens1f0.42'."]
    }
    assert errors(vlan(parent=shown["ens1f0"]["id"], vlan=5002)) == {
        "vlan": ["A VLAN interface can only belong to a tagged VLAN."]
    }
    assert errors(vlan(parent=shown["ens1f0"]["id"], vlan=5004)) == {
        "vlan": [
            "A VLAN interface can only belong to a tagged VLAN on the same fabric as its parent "
            "interface."
        ]
    }
    assert errors(vlan(parent=shown["ens1f0"]["id"])) == {
        "vlan": ["A VLAN interface must be connected to a tagged VLAN."]
    }
    assert errors(vlan(vlan=5003)) == {"parent": ["A VLAN interface must have exactly one parent."]}
    assert errors(vlan(parent=shown["ens1f0.42"]["id"], vlan=5003)) == {
        "parent": ["A VLAN interface can't have another VLAN interface as parent."]
    }
    # MAAS's form reads the fabric of the parent's VLAN: a disconnected parent is a 500.
    crash = vlan(parent=shown["ens2f0"]["id"], vlan=5003)
    assert (crash.status_code, crash.text) == (
        500,
        "'NoneType' object has no attribute 'fabric_id'",
    )
    bonded = sapi.send(
        "POST", f"nodes/{sid}/interfaces/", "create_bond", name="b0", parents=[shown["eno1"]["id"]]
    )
    assert bonded.status_code == 200
    assert errors(vlan(parent=shown["eno1"]["id"], vlan=5004)) == {
        "parent": ["A VLAN interface can't have a parent that is already in a bond."]
    }


def test_bridge_and_acquired_bridge(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "n1")
    shown = nics(sapi, sid)
    bridge = sapi.send(
        "POST",
        f"nodes/{sid}/interfaces/",
        "create_bridge",
        name="br0",
        parent=shown["ens1f0"]["id"],
        bridge_stp="true",
    )
    assert bridge.status_code == 200, bridge.text
    assert bridge.json()["params"] == {
        "bridge_fd": 15,
        "bridge_stp": True,
        "bridge_type": "standard",
    }
    assert [link["mode"] for link in bridge.json()["links"]] == ["link_up"]
    assert nics(sapi, sid)["ens1f0"]["links"] == []

    def bridge_on(**fields: Any) -> Any:
        return sapi.send("POST", f"nodes/{sid}/interfaces/", "create_bridge", **fields)

    assert errors(bridge_on(name="br1", parent=bridge.json()["id"])) == {
        "parent": ["A bridge interface can't have another bridge interface as parent."]
    }
    assert errors(bridge_on(name="br1", parent=shown["ens1f0"]["id"])) == {
        "parent": ["A bridge interface can't have a parent that is already in a bond or a bridge."]
    }
    assert errors(bridge_on(name="br1", parent=shown["ens1f1"]["id"], bridge_type="fancy")) == {
        "bridge_type": [
            "'fancy' is not a valid bridge_type.  It should be one of: 'standard', 'ovs'."
        ]
    }
    assert errors(bridge_on(parent=shown["ens1f1"]["id"])) == {"name": ["This field is required."]}
    # On an Allocated machine the parent's links (with their addresses) move to the bridge.
    sapi.send(
        "POST",
        f"nodes/{sid}/interfaces/{shown['eno1']['id']}/",
        "link_subnet",
        mode="static",
        subnet=1,
    )
    assert sapi.post("machines/", "allocate", data={"system_id": sid}).status_code == 200
    acquired = bridge_on(name="br-pxe", parent=shown["eno1"]["id"], vlan=5002)
    assert acquired.status_code == 200, acquired.text
    moved = [(link["mode"], link.get("ip_address")) for link in acquired.json()["links"]]
    assert moved == [("auto", None), ("static", "10.20.0.3")]
    assert acquired.json()["vlan"]["id"] == 5001  # the vlan given is ignored: the parent's
    assert nics(sapi, sid)["eno1"]["links"] == []


def test_built_interfaces_go_with_restore_and_commissioning(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "n1")
    shown = nics(sapi, sid)
    for op, fields in (
        ("create_bond", {"name": "b0", "parents": [shown["ens1f0"]["id"], shown["ens1f1"]["id"]]}),
        ("create_vlan", {"parent": shown["eno1"]["id"], "vlan": 5004}),
    ):
        assert sapi.send("POST", f"nodes/{sid}/interfaces/", op, **fields).status_code == 200
    restored = sapi.ok(sid, "restore_networking_configuration")
    assert [i["name"] for i in restored["interface_set"]] == ["eno1", "ens1f0", "ens1f1", "ens2f0"]
    assert (
        sapi.send(
            "POST",
            f"nodes/{sid}/interfaces/",
            "create_bond",
            name="b0",
            parents=[shown["ens1f0"]["id"]],
        ).status_code
        == 200
    )
    sapi.ok(sid, "commission", testing_scripts="none")
    site.advance(200)
    assert [i["name"] for i in sapi.machine(sid)["interface_set"]] == [
        "eno1",
        "ens1f0",
        "ens1f1",
        "ens2f0",
    ]


def test_deploy_gives_a_bond_its_address_and_release_keeps_the_bond(sims: list[Sim]) -> None:
    data = {
        **SITE,
        "machines": [
            {
                **SITE["machines"][0],
                "bonds": [
                    {
                        "name": "bond0",
                        "parents": ["eno1", "ens2f0"],
                        "bond_mode": "active-backup",
                        "subnet": 1,
                    }
                ],
            }
        ],
    }
    data["machines"][0]["interfaces"] = [
        {"name": "eno1", "mac_address": "52:54:00:61:00:01", "subnet": 1},
        {"name": "ens2f0", "mac_address": "52:54:00:61:00:04", "subnet": 1},
    ]
    s = make_sim(data)
    sims.append(s)
    api = Api(s)
    sid = next(iter(s.model.machines))
    bond = nics(api, sid)["bond0"]
    assert (bond["params"]["bond_mode"], [link["mode"] for link in bond["links"]]) == (
        "active-backup",
        ["auto"],
    )
    api.ok(sid, "deploy")
    s.advance(300)
    deployed = api.machine(sid)
    assert deployed["status_name"] == "Deployed"
    assert deployed["ip_addresses"] == ["10.20.0.3"]  # the bond's; the rack holds .2
    assert deployed["default_gateways"]["ipv4"]["gateway_ip"] == "10.20.0.1"
    api.ok(sid, "release")
    s.advance(60)
    released = api.machine(sid)
    assert released["status_name"] == "Ready" and released["ip_addresses"] == []
    assert "bond0" in [i["name"] for i in released["interface_set"]]


@pytest.mark.parametrize(
    ("bond", "message"),
    [
        ({"name": "b0", "parents": ["nosuch"]}, "no NIC"),
        ({"name": "b0", "parents": ["eno1", "ens1f0"]}, "All parents must belong to the same VLAN"),
        ({"name": "b0", "parents": ["ens1f0"], "subnet": 1}, "subnet 1 is not on its VLAN"),
        ({"name": "b0", "parents": ["ens1f0"], "mode": "x"}, "unknown bond fields"),
    ],
)
def test_scenario_refuses_bad_bonds(bond: dict[str, Any], message: str) -> None:
    data = {**SITE, "machines": [{**SITE["machines"][0], "bonds": [bond]}]}
    with pytest.raises(ValueError, match=message):
        scenario.load(Simulator(), data, api_key=API_KEY)


def test_a_bond_moved_to_another_vlan_takes_its_parents(site: Sim, sapi: Api) -> None:
    sid = sid_of(site, "n1")
    shown = nics(sapi, sid)
    bond = sapi.send(
        "POST",
        f"nodes/{sid}/interfaces/",
        "create_bond",
        name="b0",
        parents=[shown["ens1f0"]["id"], shown["ens1f1"]["id"]],
    ).json()
    moved = sapi.send("PUT", f"nodes/{sid}/interfaces/{bond['id']}/", vlan=5003)
    assert moved.json()["vlan"]["id"] == 5003
    after = nics(sapi, sid)
    assert (after["ens1f0"]["vlan"]["id"], after["ens1f1"]["vlan"]["id"]) == (5003, 5003)

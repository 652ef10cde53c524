"""The simulator's network model over raw HTTP: fabrics, VLANs, spaces, subnets, static routes,
interfaces (update, restore, links), addresses claimed at deploy and freed at release, devices
and the rack controller (MAAS 3.5's ``interfaces.py``, ``vlans.py``, ``spaces.py`` and their
forms)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from maas_simulator import scenario
from maas_simulator.model import Simulator
from tests.support.maas import Api, Sim, make_sim

SITE: dict[str, Any] = {
    "spaces": [{"id": 1, "name": "provisioning"}, {"id": 2, "name": "storage"}],
    "fabrics": [
        {"id": 10, "name": "pxe-fabric"},
        {"id": 11, "name": "fabric-data", "class_type": "100g"},
    ],
    "vlans": [
        {"id": 5001, "fabric_id": 10, "vid": 0, "space": "provisioning", "mtu": 1500},
        {"id": 5010, "fabric_id": 11, "vid": 0, "mtu": 9000, "dhcp_on": False},
        {"id": 5011, "fabric_id": 11, "vid": 42, "space": "storage", "mtu": 9000},
    ],
    "subnets": [
        {
            "id": 1,
            "name": "pxe",
            "cidr": "10.20.0.0/24",
            "vlan_id": 5001,
            "gateway_ip": "10.20.0.1",
        },
        {"id": 2, "name": "data", "cidr": "10.40.0.0/24", "vlan_id": 5011},
        {
            "id": 3,
            "name": "mgmt",
            "cidr": "10.50.0.0/24",
            "vlan_id": 5011,
            "gateway_ip": "10.50.0.1",
        },
    ],
    "static_routes": [{"source": 1, "destination": 2, "gateway_ip": "10.20.0.254", "metric": 10}],
    "domains": [{"name": "gpu.example", "ttl": 300}],
    "devices": [
        {
            "hostname": "leaf01",
            "mac_addresses": ["52:54:00:dd:00:01"],
            "subnet": 1,
            "ip_address": "10.20.0.250",
        }
    ],
    "machines": [
        {
            "hostname": "net01",
            "status": "ready",
            "interfaces": [
                {"name": "eno1", "mac_address": "52:54:00:cc:00:01", "subnet": 1},
                {"name": "ens1f0", "mac_address": "52:54:00:cc:00:02", "vlan": 5011},
                {"name": "ens1f1", "mac_address": "52:54:00:cc:00:03", "connected": False},
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


def by_name(machine: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in machine["interface_set"]}


def test_fabrics_vlans_spaces_routes_and_domains(sapi: Api) -> None:
    fabrics = sapi.get("fabrics/").json()
    assert [(f["id"], f["name"], f["class_type"]) for f in fabrics] == [
        (10, "pxe-fabric", None),
        (11, "fabric-data", "100g"),
    ]
    data = fabrics[1]
    assert [(v["id"], v["vid"], v["name"]) for v in data["vlans"]] == [
        (5010, 0, "untagged"),
        (5011, 42, "42"),
    ]
    assert sapi.get("fabrics/11/").json() == data
    vlans = sapi.get("fabrics/11/vlans/").json()
    assert vlans == data["vlans"]
    tagged = sapi.get("fabrics/11/vlans/42/").json()
    assert tagged == sapi.get("vlans/5011/").json()
    assert (tagged["mtu"], tagged["space"], tagged["fabric"], tagged["primary_rack"]) == (
        9000,
        "storage",
        "fabric-data",
        "rack01",
    )
    assert tagged["resource_uri"] == "/MAAS/api/2.0/vlans/5011/"
    for missing in ("fabrics/11/vlans/7/", "vlans/999/", "fabrics/11/vlans/x/"):
        answer = sapi.get(missing)
        assert (answer.status_code, answer.text) == (404, "No VLAN matches the given query.")
    assert sapi.get("fabrics/99/vlans/").text == "No Fabric matches the given query."
    spaces = sapi.get("spaces/").json()
    assert [(s["id"], s["name"]) for s in spaces] == [
        (1, "provisioning"),
        (2, "storage"),
        (-1, "undefined"),  # VLAN 5010 is in no space
    ]
    storage = sapi.get("spaces/2/").json()
    assert [s["cidr"] for s in storage["subnets"]] == ["10.40.0.0/24", "10.50.0.0/24"]
    assert [v["id"] for v in storage["vlans"]] == [5011]
    undefined = sapi.get("spaces/undefined/").json()
    assert undefined["resource_uri"] == "/MAAS/api/2.0/spaces/undefined/"
    assert [v["id"] for v in undefined["vlans"]] == [5010]
    [route] = sapi.get("static-routes/").json()
    assert (route["source"]["cidr"], route["destination"]["cidr"], route["gateway_ip"]) == (
        "10.20.0.0/24",
        "10.40.0.0/24",
        "10.20.0.254",
    )
    assert sapi.get(f"static-routes/{route['id']}/").json() == route
    domains = sapi.get("domains/").json()
    assert [(d["name"], d["is_default"], d["ttl"]) for d in domains] == [
        ("maas", True, None),
        ("gpu.example", False, 300),
    ]
    assert sapi.get("domains/1/").json()["name"] == "gpu.example"
    subnet = sapi.get("subnets/cidr:10.50.0.0/24/").json()
    assert (subnet["space"], subnet["vlan"]["vid"]) == ("storage", 42)


def test_connected_nics_are_on_a_vlan_and_unplugged_ones_are_not(sapi: Api, site: Sim) -> None:
    sid = next(iter(site.model.machines))
    nics = by_name(sapi.machine(sid))
    assert nics["eno1"]["vlan"]["id"] == 5001
    assert [lk["mode"] for lk in nics["eno1"]["links"]] == ["auto"]
    # connected, no links to a subnet: LINK_UP on the VLAN the cable reaches
    assert nics["ens1f0"]["vlan"]["id"] == 5011
    assert [(lk["mode"], lk.get("subnet")) for lk in nics["ens1f0"]["links"]] == [("link_up", None)]
    assert nics["ens1f0"]["effective_mtu"] == 9000
    # no carrier: disconnected, no links
    off = nics["ens1f1"]
    assert (off["vlan"], off["links"], off["link_connected"], off["link_speed"]) == (
        None,
        [],
        False,
        0,
    )


def test_update_an_interface_and_restore_networking(sapi: Api, site: Sim) -> None:
    sid = next(iter(site.model.machines))
    nic = by_name(sapi.machine(sid))["ens1f0"]
    path = f"nodes/{sid}/interfaces/{nic['id']}/"
    updated = sapi.session.put(
        sapi.root + path, data={"mtu": "4000", "tags": "fast,rdma"}, timeout=5
    )
    assert updated.status_code == 200, updated.text
    body = updated.json()
    assert (body["params"], body["effective_mtu"], body["tags"]) == (
        {"mtu": 4000},
        4000,
        ["fast", "rdma"],
    )
    for value, error in (
        ("100", "Ensure this value is greater than or equal to 552."),
        ("x", "Enter a whole number."),
    ):
        bad = sapi.session.put(sapi.root + path, data={"mtu": value}, timeout=5)
        assert (bad.status_code, bad.json()) == (400, {"mtu": [error]})
    taken = sapi.session.put(sapi.root + path, data={"name": "eno1"}, timeout=5)
    assert taken.json() == {"name": [f"Node {sid} (net01) already has an interface named 'eno1'."]}
    # a new VLAN drops every link
    moved = sapi.session.put(sapi.root + path, data={"vlan": "5010"}, timeout=5).json()
    assert (moved["vlan"]["id"], moved["links"]) == (5010, [])
    assert sapi.session.put(sapi.root + path, data={"vlan": "77"}, timeout=5).status_code == 400
    renamed = sapi.session.put(sapi.root + path, data={"name": "data0"}, timeout=5).json()
    assert renamed["name"] == "data0"
    restored = sapi.ok(sid, "restore_networking_configuration")
    nic = by_name(restored)["ens1f0"]
    assert (nic["vlan"]["id"], nic["params"], nic["tags"]) == (5011, {}, [])
    assert [lk["mode"] for lk in nic["links"]] == ["link_up"]
    assert [lk["mode"] for lk in by_name(restored)["eno1"]["links"]] == ["auto"]
    # Deployed: only the name may change; a restore is refused
    sapi.ok(sid, "deploy", distro_series="jammy")
    busy = sapi.session.put(sapi.root + path, data={"mtu": "9000"}, timeout=5)
    assert (busy.status_code, busy.text) == (
        409,
        "Cannot update interface interface because the machine is not New, Ready, Allocated, "
        "or Broken.",
    )
    site.advance(400)
    ignored = sapi.session.put(
        sapi.root + path, data={"mtu": "9000", "name": "data1"}, timeout=5
    ).json()
    assert (ignored["name"], ignored["params"]) == ("data1", {})
    refused = sapi.op(sid, "restore_networking_configuration")
    assert (refused.status_code, refused.text) == (
        409,
        "Machine must be in a ready or failed testing state to restore networking configuration",
    )


def test_link_subnet_follows_maas_form_rules(sapi: Api, site: Sim) -> None:
    sid = next(iter(site.model.machines))
    nics = by_name(sapi.machine(sid))
    path = f"nodes/{sid}/interfaces/{nics['ens1f0']['id']}/"
    # only subnets of the NIC's VLAN are offered, unless forced
    other = sapi.post(path, "link_subnet", data={"mode": "auto", "subnet": "1"})
    assert other.json() == {"subnet": ["None found with id=1."]}
    unknown = sapi.post(path, "link_subnet", data={"mode": "auto", "subnet": "cidr:10.99.0.0/24"})
    assert unknown.json() == {
        "subnet": ["Select a valid choice. That choice is not one of the available choices."]
    }
    mode = sapi.post(path, "link_subnet", data={"mode": "bridge", "subnet": "2"})
    assert mode.json() == {
        "mode": [
            "'bridge' is not a valid mode.  It should be one of: 'auto', 'dhcp', 'static', "
            "'link_up'."
        ]
    }
    outside = sapi.post(
        path, "link_subnet", data={"mode": "static", "subnet": "2", "ip_address": "10.50.0.9"}
    )
    assert outside.json() == {
        "ip_address": ["IP address is not in the given subnet 'data:10.40.0.0/24(vid=42)'."]
    }
    gateway = sapi.post(
        path, "link_subnet", data={"mode": "static", "subnet": "2", "default_gateway": "true"}
    )
    assert gateway.json() == {
        "default_gateway": [
            "Cannot set as default gateway because subnet data:10.40.0.0/24(vid=42) doesn't "
            "provide a gateway IP address."
        ]
    }
    static = sapi.post(path, "link_subnet", data={"mode": "STATIC", "subnet": "name:data"}).json()
    [link] = static["links"]  # the LINK_UP link gave way
    assert (link["mode"], link["subnet"]["id"]) == ("static", 2)
    assert ipaddress.ip_address(link["ip_address"]) in ipaddress.ip_network("10.40.0.0/24")
    again = sapi.post(
        path,
        "link_subnet",
        data={"mode": "static", "subnet": "2", "ip_address": link["ip_address"]},
    )
    assert (again.status_code, again.text) == (404, "IP address is already in use.")
    link_up = sapi.post(path, "link_subnet", data={"mode": "link_up"})
    assert link_up.status_code == 400 and "Specify force=True" in link_up.json()["mode"][0]
    forced = sapi.post(
        path, "link_subnet", data={"mode": "auto", "subnet": "1", "force": "true"}
    ).json()
    assert (forced["vlan"]["id"], [lk["mode"] for lk in forced["links"]]) == (5001, ["auto"])
    bad_id = sapi.post(path, "unlink_subnet", data={"id": "999"})
    assert bad_id.json() == {
        "id": [f"'999' is not a valid id.  It should be one of: '{forced['links'][0]['id']}'."]
    }
    unlinked = sapi.post(path, "unlink_subnet", data={"id": str(forced["links"][0]["id"])}).json()
    assert [lk["mode"] for lk in unlinked["links"]] == ["link_up"]
    disconnected = sapi.post(path, "disconnect").json()
    assert (disconnected["vlan"], disconnected["links"]) == (None, [])


def test_deploy_claims_auto_addresses_and_release_frees_them(clock_sim: Sim) -> None:
    api = Api(clock_sim)
    a = clock_sim.add(hostname="ip01", status="ready", power_type="manual")
    b = clock_sim.add(hostname="ip02", status="ready", power_type="manual")
    ready = api.machine(a)
    assert ready["ip_addresses"] == [] and "ip_address" not in ready["boot_interface"]["links"][0]
    assert ready["default_gateways"]["ipv4"] == {"gateway_ip": "10.20.0.1", "link_id": None}
    answer = api.ok(a, "deploy", distro_series="jammy")
    assert answer["ip_addresses"] == []  # claimed after the commit, a moment after the answer
    first = api.machine(a)["boot_interface"]["links"][0]["ip_address"]
    assert ipaddress.ip_address(first) in ipaddress.ip_network("10.20.0.0/16")
    assert first not in ("10.20.0.1", "10.20.0.0")
    assert api.machine(a)["ip_addresses"] == [first]
    api.ok(b, "deploy", distro_series="jammy")
    second = api.machine(b)["boot_interface"]["links"][0]["ip_address"]
    assert second != first
    clock_sim.advance(400)
    assert api.machine(a)["boot_interface"]["links"][0]["ip_address"] == first  # still Deployed
    api.ok(a, "release")
    released = api.machine(a)
    assert released["status_name"] == "Ready" and released["ip_addresses"] == []
    assert released["boot_interface"]["links"][0]["mode"] == "auto"
    # the freed address is the next one handed out
    c = clock_sim.add(hostname="ip03", status="ready", power_type="manual")
    api.ok(c, "deploy", distro_series="jammy")
    assert api.machine(c)["boot_interface"]["links"][0]["ip_address"] == first


def test_a_failed_power_on_gives_the_addresses_back(clock_sim: Sim) -> None:
    api = Api(clock_sim)
    sid = clock_sim.add(hostname="ip04", status="ready", faults={"bmc_unreachable": True})
    api.ok(sid, "deploy", distro_series="jammy")
    assert api.machine(sid)["ip_addresses"]
    clock_sim.advance(5)
    failed = api.machine(sid)
    assert (failed["status_name"], failed["ip_addresses"]) == ("Failed deployment", [])


def test_devices_and_the_rack_controller_are_nodes(sapi: Api, site: Sim) -> None:
    [device] = sapi.get("devices/").json()
    assert (device["hostname"], device["node_type_name"], device["ip_addresses"]) == (
        "leaf01",
        "Device",
        ["10.20.0.250"],
    )
    assert sapi.get(f"devices/{device['system_id']}/").json() == device
    listed = sapi.get(f"nodes/{device['system_id']}/interfaces/").json()
    assert [lk["ip_address"] for lk in listed[0]["links"]] == ["10.20.0.250"]
    [rack] = sapi.get("rackcontrollers/").json()
    assert sapi.get("rackcontrollers/rack01/").json() == rack
    nics = sapi.get("nodes/rack01/interfaces/").json()
    assert [n["vlan"]["id"] for n in nics] == [5001, 5011]
    addresses = {lk["subnet"]["cidr"]: lk["ip_address"] for n in nics for lk in n["links"]}
    assert set(addresses) == {"10.20.0.0/24", "10.40.0.0/24", "10.50.0.0/24"}
    assert rack["ip_addresses"] == [lk["ip_address"] for n in nics for lk in n["links"]]
    refused = sapi.post(
        f"nodes/rack01/interfaces/{nics[0]['id']}/", "link_subnet", data={"mode": "dhcp"}
    )
    assert (refused.status_code, refused.text) == (
        403,
        "Cannot link subnet interface on a controller.",
    )
    assert sapi.post(f"nodes/rack01/interfaces/{nics[0]['id']}/", "disconnect").text == (
        "Cannot disconnect interface on a controller."
    )
    # a machine's address never collides with the rack's or a device's
    sid = next(iter(site.model.machines))
    sapi.ok(sid, "deploy", distro_series="jammy")
    ip = sapi.machine(sid)["boot_interface"]["links"][0]["ip_address"]
    assert ip not in {addresses["10.20.0.0/24"], "10.20.0.250", "10.20.0.1"}
    assert sapi.get("rackcontrollers/nope/").status_code == 404


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"vlans": [{"id": 1, "fabric_id": 9}]}, "unknown fabric 9"),
        (
            {"fabrics": [{"id": 1}], "vlans": [{"id": 1, "fabric_id": 1, "space": "x"}]},
            "unknown space",
        ),
        (
            {"fabrics": [{"id": 1}], "vlans": [{"id": 1, "fabric_id": 1, "vid": 5000}]},
            "vid must be",
        ),
        (
            {
                "subnets": [
                    {"id": 1, "name": "a", "cidr": "10.0.0.0/16", "vlan_id": 1},
                    {"id": 2, "name": "b", "cidr": "10.0.1.0/24", "vlan_id": 2},
                ]
            },
            "overlaps",
        ),
        (
            {
                "subnets": [
                    {
                        "id": 1,
                        "name": "a",
                        "cidr": "10.0.0.0/24",
                        "vlan_id": 1,
                        "gateway_ip": "10.1.0.1",
                    }
                ]
            },
            "not in subnet",
        ),
        (
            {"static_routes": [{"source": 1, "destination": 2, "gateway_ip": "10.99.0.1"}]},
            "not on its source subnet",
        ),
        (
            {
                "machines": [
                    {
                        "hostname": "x",
                        "interfaces": [
                            {"name": "a", "mac_address": "52:54:00:00:00:01", "subnet": 9}
                        ],
                    }
                ]
            },
            "unknown subnet 9",
        ),
        (
            {
                "machines": [
                    {
                        "hostname": "x",
                        "interfaces": [
                            {"name": "a", "mac_address": "52:54:00:00:00:01", "bond": 1}
                        ],
                    }
                ]
            },
            "unknown interface fields",
        ),
    ],
)
def test_network_scenario_mistakes_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scenario.load(Simulator(), data)

"""Each form field is read as MAAS 3.5's form for it reads it, by the simulator and therefore by
what our client must send (docs/maas-api.md, "How MAAS reads each field"). The states checked
are those the recorded real exchanges show: commissioning with every flag "0" left a machine
with no disks and an unlinked NIC that MAAS then refused to deploy; "false", "" or no flag at
all left two disks and the boot NIC on the PXE subnet (../shared/maas-transcripts/
onboarding-sequence.jsonl, steps 39-80)."""

from __future__ import annotations

from typing import Any

import pytest

from maas_client.client import MaasClient
from maas_client.status import NodeStatus as S
from tests.maas.test_simulator_storage import wait_status
from tests.support.maas import Api, Sim, wait_for

# (value sent, read as true): Django's CheckboxInput: only "false" (any case) and "" are false.
CHECKBOX = [
    ("0", True),
    ("1", True),
    ("true", True),
    ("no", True),
    ("off", True),
    ("false", False),
    ("FALSE", False),
    ("", False),
    (None, False),  # omitted
]


def new_machine(api: Api, mac: str) -> str:
    created = api.post(
        "machines/",
        data={
            "architecture": "amd64/generic",
            "mac_addresses": mac,
            "power_type": "manual",
            "commission": "false",
        },
    )
    assert created.status_code == 200, created.text
    return str(created.json()["system_id"])


def boot_links(machine: dict[str, Any]) -> list[str]:
    boot = machine["boot_interface"] or machine["interface_set"][0]
    return [link["mode"] for link in boot["links"]]


@pytest.mark.parametrize(("value", "skipped"), CHECKBOX)
def test_commission_skip_flags_are_django_checkboxes(
    api: Api, sim: Sim, value: str | None, skipped: bool
) -> None:
    index = [v for v, _ in CHECKBOX].index(value)
    sid = new_machine(api, f"52:54:00:f1:00:{index:02x}")
    flags = {} if value is None else {"skip_storage": value, "skip_networking": value}
    api.ok(sid, "commission", testing_scripts="none", **flags)
    ready = wait_status(api, sid, "Ready", sim, 200)
    deploy = api.op(sid, "deploy", distro_series="jammy")
    if skipped:  # what MAAS did with "0": nothing found, nothing linked, no deploy
        assert (len(ready["physicalblockdevice_set"]), boot_links(ready)) == (0, [])
        assert deploy.status_code == 400
        assert deploy.json() == {"network": ["Node must be configured to use a network"]}
        assert api.status(sid) == "Ready"  # the allocation went back with the refusal
    else:
        assert (len(ready["physicalblockdevice_set"]), boot_links(ready)) == (2, ["auto"])
        assert deploy.status_code == 200, deploy.text
        assert deploy.json()["status_name"] == "Deploying"


@pytest.mark.parametrize(("value", "enabled"), CHECKBOX)
def test_testing_enable_ssh_is_a_django_checkbox(
    api: Api, sim: Sim, value: str | None, enabled: bool
) -> None:
    """``TestForm.enable_ssh``: a machine tested with SSH enabled stays on afterwards."""
    sid = sim.add(hostname=f"ssh{[v for v, _ in CHECKBOX].index(value)}", status="ready")
    flags = {} if value is None else {"enable_ssh": value}
    api.ok(sid, "test", testing_scripts="smartctl-validate", **flags)
    sim.advance(600)
    assert api.machine(sid)["power_state"] == ("on" if enabled else "off")


def test_the_clients_commission_flags_mean_what_it_was_asked(maas: MaasClient, sim: Sim) -> None:
    """The client's defaults commission storage and networking (every onboarding deploys), and a
    flag asked for is the flag MAAS applies."""
    plain = maas.create_machine(
        hostname="ff-plain",
        mac_addresses=["52:54:00:f2:00:01"],
        power_parameters={},
        power_type="manual",
    ).system_id
    maas.commission(plain, enable_ssh=True, skip_bmc_config=True)
    wait_for(maas, plain, S.READY)
    assert len(maas.machine_hardware(plain).disks) == 2
    assert maas.deploy(plain, distro_series="jammy").status == S.DEPLOYING
    skipped = maas.create_machine(
        hostname="ff-skip",
        mac_addresses=["52:54:00:f2:00:02"],
        power_parameters={},
        power_type="manual",
    ).system_id
    maas.commission(skipped, skip_storage=True)
    wait_for(maas, skipped, S.READY)
    assert maas.machine_hardware(skipped).disks == ()


# (value sent, read as): formencode's StringBool, through get_optional_param: "0" and "" are
# false, "t"/"y"/"on"/"1" true, any case and padding; anything else is a 400 naming the field.
STRING_BOOL = [
    ("0", False),
    ("false", False),
    ("", False),
    (None, False),  # omitted: the handler's default (false here)
    ("true", True),
    ("1", True),
    ("Y", True),
    (" on ", True),
]


@pytest.mark.parametrize(("value", "on"), STRING_BOOL)
def test_deploy_enable_hw_sync_is_a_string_bool(
    api: Api, sim: Sim, value: str | None, on: bool
) -> None:
    sid = sim.add(hostname=f"hws{[v for v, _ in STRING_BOOL].index(value)}", status="ready")
    flags = {} if value is None else {"enable_hw_sync": value}
    deployed = api.ok(sid, "deploy", distro_series="jammy", **flags)
    assert (deployed["status_name"], deployed["enable_hw_sync"]) == ("Deploying", on)


def test_a_string_bool_that_is_neither_is_refused_before_anything_changes(
    api: Api, sim: Sim
) -> None:
    """MAAS 3.5.10 answered ``enable_hw_sync=maybe`` with this 400 (maas-transcripts errors.jsonl
    step 79) and left the machine Ready, unowned."""
    sid = sim.add(hostname="hwsbad", status="ready")
    refused = api.op(sid, "deploy", distro_series="jammy", enable_hw_sync="maybe")
    assert (refused.status_code, refused.headers["Content-Type"], refused.text) == (
        400,
        "text/plain; charset=utf-8",
        "Invalid enable_hw_sync: Value should be 'true' or 'false'",
    )
    machine = api.machine(sid)
    assert (machine["status_name"], machine["owner"]) == ("Ready", None)
    made = api.post(
        "machines/",
        data={
            "architecture": "amd64/generic",
            "mac_addresses": "52:54:00:f3:00:99",
            "power_type": "manual",
            "commission": "perhaps",
            "hostname": "sb-bad",
        },
    )
    assert (made.status_code, made.text) == (
        400,
        "Invalid commission: Value should be 'true' or 'false'",
    )
    assert api.get("machines/", hostname="sb-bad").json() == []


@pytest.mark.parametrize(
    ("value", "status"),
    [
        ("0", "New"),
        ("false", "New"),
        ("", "New"),
        (None, "Commissioning"),
        ("true", "Commissioning"),
    ],
)
def test_create_commission_is_a_string_bool_defaulting_to_true(
    api: Api, value: str | None, status: str
) -> None:
    """An admin's create commissions unless told not to; ``""`` is formencode's empty value
    (None), not the default."""
    index = ["0", "false", "", None, "true"].index(value)
    form = {
        "architecture": "amd64/generic",
        "mac_addresses": f"52:54:00:f3:00:{index:02x}",
        "power_type": "manual",
        "hostname": f"sb-create-{index}",
        # the body also feeds CommissionForm: its flags are checkboxes ("0" would skip)
        "skip_networking": "false",
    }
    if value is not None:
        form["commission"] = value
    made = api.post("machines/", data=form)
    assert made.status_code == 200, made.text
    assert made.json()["status_name"] == status


@pytest.mark.parametrize(("value", "forced"), [*STRING_BOOL, ("no", False)])
def test_link_subnet_force_is_a_string_bool(
    api: Api, sim: Sim, value: str | None, forced: bool
) -> None:
    """Only a forced link may take a subnet of another VLAN (docs/maas-api.md §3.7)."""
    sid = sim.add(
        hostname=f"lf{[v for v, _ in STRING_BOOL].index(value) if value != 'no' else 9}",
        status="ready",
    )
    boot = api.machine(sid)["boot_interface"]
    form = {"mode": "dhcp", "subnet": "2"} | ({} if value is None else {"force": value})
    linked = api.post(f"nodes/{sid}/interfaces/{boot['id']}/", "link_subnet", data=form)
    if forced:
        assert linked.status_code == 200, linked.text
        assert [lk["subnet"]["id"] for lk in linked.json()["links"]] == [2]
    else:
        assert (linked.status_code, linked.json()) == (400, {"subnet": ["None found with id=2."]})


@pytest.mark.parametrize(("value", "gateway"), CHECKBOX)
def test_link_subnet_default_gateway_is_a_django_checkbox(
    api: Api, sim: Sim, value: str | None, gateway: bool
) -> None:
    """``InterfaceLinkForm.default_gateway``: "0" asks for the gateway, which a DHCP link
    cannot be."""
    sid = sim.add(hostname=f"gw{[v for v, _ in CHECKBOX].index(value)}", status="ready")
    boot = api.machine(sid)["boot_interface"]
    form = {"mode": "dhcp", "subnet": "1"} | ({} if value is None else {"default_gateway": value})
    linked = api.post(f"nodes/{sid}/interfaces/{boot['id']}/", "link_subnet", data=form)
    if gateway:
        assert (linked.status_code, linked.json()) == (
            400,
            {"default_gateway": ["Cannot use in mode 'dhcp'."]},
        )
    else:
        assert linked.status_code == 200, linked.text


@pytest.mark.parametrize(("value", "erasing"), CHECKBOX)
def test_release_erase_is_a_django_checkbox(
    api: Api, sim: Sim, value: str | None, erasing: bool
) -> None:
    """``ReleaseForm.erase``: "0" erases the disks."""
    sid = sim.add(hostname=f"re{[v for v, _ in CHECKBOX].index(value)}", status="deployed")
    released = api.ok(sid, "release", **({} if value is None else {"erase": value}))
    assert released["status_name"] == ("Disk erasing" if erasing else "Releasing")


# Django's NullBooleanSelect: "true"/"True"/"2" and "false"/"False"/"3"; anything else is None,
# which MAAS's MAASModelForm drops from the save (the value is left as it was).
NULL_BOOLEAN = [
    ("0", None),
    ("false", False),
    ("", None),
    (None, None),  # omitted
    ("true", True),
    ("1", None),
    ("3", False),
    ("2", True),
]


@pytest.mark.parametrize(("value", "enabled"), NULL_BOOLEAN)
def test_interface_enabled_is_a_null_boolean(
    api: Api, sim: Sim, value: str | None, enabled: bool | None
) -> None:
    sid = sim.add(hostname=f"nb{[v for v, _ in NULL_BOOLEAN].index(value)}", status="ready")
    nic = api.machine(sid)["interface_set"][1]
    path = f"nodes/{sid}/interfaces/{nic['id']}/"
    for before in (True, False):  # from each side, so "unchanged" cannot pass as either value
        assert api.send("PUT", path, enabled=str(before).lower()).json()["enabled"] is before
        form = {"name": nic["name"]} | ({} if value is None else {"enabled": value})
        after = api.send("PUT", path, **form)
        assert after.status_code == 200, after.text
        assert after.json()["enabled"] is (before if enabled is None else enabled)


@pytest.mark.parametrize(
    ("value", "shown"), [("0", True), ("false", True), ("", False), (None, False), ("true", True)]
)
def test_include_output_is_a_formencode_bool(
    api: Api, sim: Sim, value: str | None, shown: bool
) -> None:
    """``get_optional_param(request.GET, "include_output", False, Bool)``: any non-empty value,
    "0" and "false" included, adds the outputs."""
    sid = sim.add(hostname=f"io{[None, '', '0', 'false', 'true'].index(value)}", status="ready")
    query = {"type": "commissioning"} | ({} if value is None else {"include_output": value})
    sets = api.get(f"nodes/{sid}/results/", **query).json()
    results = [r for s in sets for r in s["results"]]
    assert results and all(("output" in r) is shown for r in results)


@pytest.mark.parametrize(
    ("value", "answer"),
    [
        ("0", (200, 1)),  # below 1 reads as 1
        ("false", (400, "Invalid limit: Please enter an integer value")),
        ("", (500, "'>' not supported between instances of 'NoneType' and 'int'")),
        (None, (200, 100)),
        ("true", (400, "Invalid limit: Please enter an integer value")),
        ("3", (200, 3)),
    ],
)
def test_events_limit_is_a_formencode_int(
    api: Api, sim: Sim, value: str | None, answer: tuple[int, Any]
) -> None:
    """``get_optional_param(request.GET, "limit", 100, Int)``: "" is formencode's empty value
    (None), which MAAS's ``limit > 1000`` then fails on (a 500, as MAAS 3.5 answers it)."""
    sid = sim.add(hostname="lim", status="ready")
    with sim.model.lock:  # more events than the default page holds
        machine = sim.model.machines[sid]
        for n in range(120):
            sim.model.event(machine, "DEBUG", "Filler", f"event {n}")
    query = {"level": "DEBUG"} | ({} if value is None else {"limit": value})
    page = api.get("events/", op="query", **query)
    status, expected = answer
    assert page.status_code == status, page.text
    if status == 200:
        assert page.json()["count"] == expected
    else:
        assert page.text == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("0", "'0' is not a valid storage_layout."),
        ("false", "'false' is not a valid storage_layout."),
        ("", "This field is required."),
        (None, "This field is required."),
        ("true", "'true' is not a valid storage_layout."),
        ("flat", None),
    ],
)
def test_storage_layout_is_a_choice(
    api: Api, sim: Sim, value: str | None, error: str | None
) -> None:
    sid = sim.add(hostname="sl", status="ready")
    answer = api.op(
        sid, "set_storage_layout", **({} if value is None else {"storage_layout": value})
    )
    if error is None:
        assert answer.status_code == 200, answer.text
    else:
        assert answer.status_code == 400
        assert answer.json()["storage_layout"][0].startswith(error)

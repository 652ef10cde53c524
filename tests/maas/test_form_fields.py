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

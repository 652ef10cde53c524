"""BMC settings as MAAS 3.5's ``WithPowerTypeMixin`` and ``DictCharField`` check them on
``PUT machines/{id}/`` and ``POST machines/`` (docs/simulator.md, "Machines"), and the releases
the bad-``distro_series`` refusal lists. Driven by python-libmaas (``set_power``) and by
OAuth-signed multipart requests; each refusal has its test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import maas.client
import pytest
from maas.client.bones import CallError

from maas_simulator.power import DRIVERS
from tests.support.maas import API_KEY, Api, Sim

IPMI_DEFAULTS = {
    "power_driver": "LAN_2_0",
    "power_boot_type": "auto",
    "cipher_suite_id": "3",
    "privilege_level": "OPERATOR",
    "workaround_flags": ["opensesspriv"],
    "power_off_mode": "hard",
}


@pytest.fixture
def bmc(sim: Sim) -> str:
    return sim.add(
        hostname="p1",
        status="ready",
        power_address="10.9.0.1",
        power_parameters={"power_user": "maas", "power_pass": "s3cret"},
    )


def params(api: Api, sid: str) -> dict[str, Any]:
    answer = api.get(f"machines/{sid}/", op="power_parameters")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def refused(response: Any) -> Any:
    assert response.status_code == 400, response.text
    return response.json()


def test_update_keeps_what_was_not_sent(api: Api, bmc: str) -> None:
    changed = api.send("PUT", f"machines/{bmc}/", power_parameters_power_user="admin")
    assert changed.status_code == 200, changed.text
    stored = params(api, bmc)
    assert (stored["power_address"], stored["power_user"], stored["power_pass"]) == (
        "10.9.0.1",
        "admin",
        "s3cret",
    )
    assert {k: stored[k] for k in IPMI_DEFAULTS} == IPMI_DEFAULTS  # the driver's defaults
    # Another type takes the settings it shares with the old one; the rest go.
    moved = api.send("PUT", f"machines/{bmc}/", power_type="redfish", power_parameters_node_id="1")
    assert moved.json()["power_type"] == "redfish"
    assert params(api, bmc) == {
        "power_address": "10.9.0.1",
        "power_user": "admin",
        "power_pass": "s3cret",
        "node_id": "1",
    }
    manual = api.send("PUT", f"machines/{bmc}/", power_type="manual")
    assert (manual.json()["power_type"], params(api, bmc)) == ("manual", {})
    # A hostname alone leaves the power settings alone.
    api.send("PUT", f"machines/{bmc}/", hostname="p1-renamed")
    assert params(api, bmc) == {}


def test_update_refusals_change_nothing(api: Api, bmc: str) -> None:
    before = params(api, bmc)
    assert refused(api.send("PUT", f"machines/{bmc}/", power_type="bogus", hostname="x")) == {
        "power_type": ["Select a valid choice. bogus is not one of the available choices."]
    }
    assert refused(api.send("PUT", f"machines/{bmc}/", power_parameters_power_address="")) == {
        "power_parameters": ["IP address: This field is required."]
    }
    assert refused(api.send("PUT", f"machines/{bmc}/", power_parameters_colour="blue")) == {
        "power_parameters": ["Unknown parameter(s): colour."]
    }
    assert refused(api.send("PUT", f"machines/{bmc}/", power_parameters_power_driver="LAN_3")) == {
        "power_parameters": [
            "Power driver: 'LAN_3' is not a valid power_driver.  It should be one of: 'LAN', "
            "'LAN_2_0'."
        ]
    }
    assert refused(api.send("PUT", f"machines/{bmc}/", power_type="virsh")) == {
        "power_parameters": ["Virsh VM ID: This field is required."]
    }
    assert refused(
        api.send("PUT", f"machines/{bmc}/", power_type="openbmc", power_parameters_power_pass="")
    ) == {"power_parameters": ["OpenBMC password: This field is required."]}
    assert params(api, bmc) == before
    assert api.machine(bmc)["hostname"] == "p1"  # nothing is saved when the form is refused


def test_skip_check_stores_what_was_sent(api: Api, bmc: str) -> None:
    kept = api.send(
        "PUT",
        f"machines/{bmc}/",
        power_parameters_power_address="",
        power_parameters_anything="x",
        power_parameters_skip_check="true",
    )
    assert kept.status_code == 200, kept.text
    assert (params(api, bmc)["power_address"], params(api, bmc)["anything"]) == ("", "x")


def test_libmaas_set_power(sim: Sim, api: Api, bmc: str) -> None:
    client = maas.client.connect(sim.url, apikey=API_KEY)
    machine = client.machines.get(system_id=bmc)
    machine.set_power(
        "redfish", {"power_address": "10.9.0.2", "power_user": "r", "power_pass": "p"}
    )
    assert machine.power_type == "redfish"
    assert params(api, bmc)["power_address"] == "10.9.0.2"
    with pytest.raises(CallError) as bad:
        machine.set_power("bogus", {})
    assert bad.value.status == 400
    assert api.machine(bmc)["power_type"] == "redfish"


def test_create_checks_the_bmc(api: Api) -> None:
    def create(**fields: Any) -> Any:
        return api.send(
            "POST", "machines/", architecture="amd64", mac_addresses="52:54:00:99:00:01", **fields
        )

    # DictCharField: nothing sent at all is the whole field missing; a part sent, a part.
    assert refused(create(power_type="ipmi")) == {"power_parameters": ["This field is required."]}
    assert refused(create(power_type="ipmi", power_parameters_power_user="maas")) == {
        "power_parameters": ["IP address: This field is required."]
    }
    assert refused(create(power_type="bogus")) == {
        "power_type": ["Select a valid choice. bogus is not one of the available choices."]
    }
    made = create(
        power_type="virsh",
        power_parameters='{"power_address": "qemu+ssh://h/system", "power_id": "vm1"}',
        commission="false",
    )
    assert made.status_code == 200, made.text
    assert params(api, made.json()["system_id"]) == {
        "power_address": "qemu+ssh://h/system",
        "power_pass": "",
        "power_id": "vm1",
    }


def test_bad_distro_series_lists_each_release_once(api: Api, sim: Sim) -> None:
    sid = sim.add(hostname="d1", status="ready")
    bad = api.op(sid, "deploy", distro_series="bogus")
    assert refused(bad) == {
        "distro_series": [
            "'bogus' is not a valid distro_series.  It should be one of: '', 'ubuntu/jammy', "
            "'ubuntu/noble'."
        ]
    }
    assert api.status(sid) == "Ready"


# MAAS 3.5.10's power types: the 22 drivers of provisioningserver/drivers/power/registry.py and
# the two pod drivers (lxd, virsh) that register as power types too.
MAAS_35_POWER_TYPES = {
    "amt", "apc", "dli", "eaton", "hmc", "hmcz", "ipmi", "manual", "moonshot", "mscm",
    "msftocs", "nova", "openbmc", "proxmox", "raritan", "recs_box", "redfish", "sm15k", "ucsm",
    "vmware", "webhook", "wedge", "lxd", "virsh",
}  # fmt: skip


def test_the_power_types_are_maas_35s_and_the_docs_count_them() -> None:
    assert set(DRIVERS) == MAAS_35_POWER_TYPES
    doc = (Path(__file__).parents[2] / "docs" / "simulator.md").read_text(encoding="utf-8")
    assert f"one of MAAS 3.5's\n  {len(DRIVERS)} types" in doc

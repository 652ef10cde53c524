"""The simulator records the parameters of every mutation on its control endpoint, so a test can
assert what reached MAAS (flags, distro series, kernel, user data, erase options), with secrets
kept out of the record."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from maas_client.client import MaasClient
from tests.support.maas import Sim, wait_for

# two of MAAS 3.5's own commissioning scripts: a name MAAS does not know is refused
SCRIPTS = ["20-maas-01-install-lldpd", "50-maas-01-commissioning"]


def mutations(sim: Sim) -> list[dict[str, Any]]:
    return list(requests.get(sim.control + "counters", timeout=10).json()["mutations"])


def test_commission_deploy_and_release_parameters_are_recorded(sim: Sim, maas: MaasClient) -> None:
    sid = sim.add(hostname="rec1", status="new", power_address="10.0.0.1")
    maas.commission(sid, enable_ssh=True, skip_bmc_config=True, commissioning_scripts=SCRIPTS)
    sim.advance(600)
    maas.deploy(sid, distro_series="noble", user_data=b"#cloud-config\n", hwe_kernel="ga-24.04")
    sim.advance(600)
    maas.release(sid, erase=True, quick_erase=True, comment="bye")
    rows = mutations(sim)
    assert [r["action"] for r in rows] == [
        "machine.commission",
        "machine.deploy",
        "machine.release",
    ]
    commission, deploy, release = (r["params"] for r in rows)
    # MAAS's CommissionForm reads "0" as true: the flags go as true/false
    assert commission["enable_ssh"] == "true" and commission["skip_bmc_config"] == "true"
    assert commission["skip_networking"] == "false"
    assert commission["commissioning_scripts"] == ",".join(SCRIPTS)
    assert (deploy["distro_series"], deploy["hwe_kernel"]) == ("noble", "ga-24.04")
    # user data is recorded by its digest and size (it carries tokens), as MAAS serves it
    assert deploy["user_data"] == {
        "sha256": hashlib.sha256(b"#cloud-config\n").hexdigest(),
        "bytes": 14,
    }
    assert (release["erase"], release["quick_erase"], release["secure_erase"]) == (
        "true",
        "true",
        "false",
    )
    assert release["comment"] == "bye"
    assert all(r["system_id"] == sid for r in rows)


def test_power_passwords_never_reach_the_record(sim: Sim, maas: MaasClient) -> None:
    machine = maas.create_machine(
        hostname="rec2",
        mac_addresses=[],
        power_parameters={"power_address": "10.0.0.2", "power_user": "u", "power_pass": "s3cret"},
    )
    maas.update_machine(
        machine.system_id, power_parameters={"power_pass": "an0ther", "power_user": "v"}
    )
    text = requests.get(sim.control + "counters", timeout=10).text
    assert "s3cret" not in text and "an0ther" not in text
    create, update = (r["params"] for r in mutations(sim))
    assert create["power_parameters"]["power_address"] == "10.0.0.2"
    assert create["power_parameters"]["power_pass"] == "(redacted)"
    assert update["power_parameters_power_pass"] == "(redacted)"
    assert update["power_parameters_power_user"] == "v"


def test_refused_mutations_are_recorded_with_their_parameters(sim: Sim, maas: MaasClient) -> None:
    sid = sim.add(hostname="rec3", status="deployed")
    wait_for(maas, sid, sim.model.machines[sid].status)
    answer = requests.post(
        sim.url + f"api/2.0/machines/{sid}/?op=deploy",
        data={"distro_series": "jammy"},
        timeout=5,
    )
    assert answer.status_code == 401  # no credentials: refused, and still recorded
    row = mutations(sim)[-1]
    assert (row["action"], row["status"], row["params"]) == (
        "machine.deploy",
        401,
        {"distro_series": "jammy"},
    )

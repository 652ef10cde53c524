"""The simulator's ``op=test``: a testing script with a ``url`` parameter really fetches each URL
from the simulator's host (standing in for the node's network), and a fault makes the node's
network unreachable. Results read back as MAAS shows them (docs/simulator.md)."""

from __future__ import annotations

import pytest

from maas_client.client import MaasClient
from maas_client.errors import MaasBadRequest
from maas_client.status import NodeStatus
from tests.support.maas import Sim, wait_for

S = NodeStatus
DEAD = "http://127.0.0.1:9/nothing-listens-here"


def result(maas: MaasClient, sid: str, name: str) -> tuple[str, str]:
    sets = maas.script_results(sid, result_type="testing", include_output=True)
    found = next(r for r in sets[-1].results if r.name == name)
    return found.status_name, found.output


def test_a_url_check_passes_when_every_url_answers(sim: Sim, maas: MaasClient) -> None:
    sid = sim.add(hostname="t1", status="ready")
    up = sim.control + "state"
    machine = maas.test(
        sid, testing_scripts=["internet-connectivity"], parameters={"internet-connectivity_url": up}
    )
    assert machine.status == S.TESTING
    wait_for(maas, sid, S.READY)
    status, output = result(maas, sid, "internet-connectivity")
    assert status == "Passed"
    assert f"{up}: reachable (HTTP 200)" in output
    [sent] = sim.sent("machine.test", sid)
    assert sent == {"testing_scripts": "internet-connectivity", "internet-connectivity_url": up}


def test_a_url_that_does_not_answer_fails_testing_with_its_output(
    sim: Sim, maas: MaasClient
) -> None:
    sid = sim.add(hostname="t2", status="ready")
    urls = f"{sim.control}state,{DEAD}"
    maas.test(sid, testing_scripts=["infra-reach"], parameters={"infra-reach_url": urls})
    wait_for(maas, sid, S.FAILED_TESTING)
    status, output = result(maas, sid, "infra-reach")
    assert status == "Failed"
    assert f"{DEAD}: FAILED" in output and "reachable (HTTP 200)" in output


def test_the_nodes_network_can_be_made_unreachable(sim: Sim, maas: MaasClient) -> None:
    sid = sim.add(hostname="t3", status="ready", faults={"node_network_unreachable": True})
    maas.test(sid, testing_scripts=["infra-reach"], parameters={"url": sim.control + "state"})
    wait_for(maas, sid, S.FAILED_TESTING)
    assert "timed out" in result(maas, sid, "infra-reach")[1]
    # tested again once the network is fixed: back to Ready
    sim.post(f"machines/{sid}/faults", {"node_network_unreachable": False})
    maas.test(sid, testing_scripts=["infra-reach"], parameters={"url": sim.control + "state"})
    wait_for(maas, sid, S.READY)


def test_testing_is_refused_while_deploying(sim: Sim, maas: MaasClient) -> None:
    sid = sim.add(hostname="t4", status="deploying")
    with pytest.raises(MaasBadRequest) as refused:
        maas.test(sid, testing_scripts=["infra-reach"])
    assert "Test is not available" in str(refused.value)

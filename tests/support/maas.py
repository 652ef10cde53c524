"""Simulator fixtures: a real MAAS simulator HTTP server on loopback, and helpers to drive it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from maas_domain.maas.client import MaasClient
from maas_domain.maas.status import NodeStatus
from maas_domain.simulator import scenario
from maas_domain.simulator.model import Simulator
from maas_domain.simulator.server import SimulatorServer

API_KEY = "SimConsumerKey1234:SimTokenKey1234567:SimTokenSecretABCDEFGHIJKLMNOPQ"
# A fast clock: commissioning takes 0.2 s, a deploy 0.45 s, MAAS's 30-minute timeout 3 s.
SCALE = 600.0


class Sim:
    """A started simulator plus the control endpoint, as tests use it."""

    def __init__(self, server: SimulatorServer) -> None:
        self.server = server
        self.url = server.url
        self.control = server.url.replace("/MAAS/", "/_sim/")

    @property
    def model(self) -> Simulator:
        return self.server.sim

    def add(self, **spec: Any) -> str:
        with self.model.lock:
            return scenario.add_machines(self.model, [spec])[0]

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = requests.post(self.control + path, json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def faults(self, *faults: dict[str, Any]) -> None:
        self.post("faults", {"faults": list(faults)})

    def advance(self, seconds: float) -> None:
        self.post("clock/advance", {"seconds": seconds})

    def mutations(self, system_id: str | None = None) -> list[str]:
        """Non-GET MAAS calls, in order, as ``action`` names (e.g. ``machine.deploy``)."""
        rows = requests.get(self.control + "counters", timeout=10).json()["mutations"]
        return [r["action"] for r in rows if system_id is None or r["system_id"] == system_id]

    def count(self, action: str, *, status: int | None = None) -> int:
        rows = requests.get(self.control + "counters", timeout=10).json()["counters"]
        return sum(
            r["count"]
            for r in rows
            if r["action"] == action and (status is None or r["status"] == status)
        )

    def reset_counters(self) -> None:
        requests.delete(self.control + "counters", timeout=10)


def wait_for(
    client: MaasClient,
    system_id: str,
    status: NodeStatus,
    *,
    timeout: float = 10.0,
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        machine = client.get_machine(system_id)
        if machine.status == status:
            return machine
        if time.monotonic() > deadline:
            raise AssertionError(f"{system_id} is {machine.status_name}, wanted {status.label}")
        time.sleep(0.02)


def make_sim(data: dict[str, Any] | None = None, scale: float = SCALE) -> Sim:
    model = Simulator(scale=scale)
    faults = scenario.load(model, data or {}, api_key=API_KEY)
    return Sim(SimulatorServer(model, faults=faults).start())


@pytest.fixture
def sim() -> Iterator[Sim]:
    s = make_sim()
    yield s
    s.server.stop()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def maas(sim: Sim, sleeps: list[float]) -> Iterator[MaasClient]:
    client = MaasClient(sim.url, API_KEY, site="test-site", sleep=sleeps.append, read_timeout=5)
    yield client
    client.close()


WaitFor = Callable[..., Any]

"""Simulator fixtures: a real MAAS simulator HTTP server on loopback, and helpers to drive it."""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import oauthlib.oauth1
import pytest
import requests
from requests_oauthlib import OAuth1

from maas_client.client import MaasClient
from maas_client.status import NodeStatus
from maas_simulator import scenario
from maas_simulator.model import Simulator
from maas_simulator.server import SimulatorServer

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

    def repair(self, system_id: str) -> None:
        """Replace the machine's failed parts (the next commissioning shows them)."""
        self.post(f"machines/{system_id}/repair", {})

    def advance(self, seconds: float) -> None:
        self.post("clock/advance", {"seconds": seconds})

    def mutations(self, system_id: str | None = None) -> list[str]:
        """Non-GET MAAS calls, in order, as ``action`` names (e.g. ``machine.deploy``)."""
        rows = requests.get(self.control + "counters", timeout=10).json()["mutations"]
        return [r["action"] for r in rows if system_id is None or r["system_id"] == system_id]

    def applied(self) -> Counter[tuple[str, str]]:
        """Every mutation MAAS applied (answered 2xx), counted by (operation, machine): what a
        durability test holds to exactly once each."""
        rows = requests.get(self.control + "counters", timeout=10).json()["mutations"]
        return Counter((r["action"], r["system_id"]) for r in rows if 200 <= r["status"] < 300)

    def sent(self, action: str, system_id: str | None = None) -> list[dict[str, Any]]:
        """The parameters of each ``action`` MAAS received (recorded by the control endpoint:
        secrets redacted, user data as digest and size), in order."""
        rows = requests.get(self.control + "counters", timeout=10).json()["mutations"]
        return [
            r["params"]
            for r in rows
            if r["action"] == action and (system_id is None or r["system_id"] == system_id)
        ]

    def count(self, action: str, *, status: int | None = None) -> int:
        rows = requests.get(self.control + "counters", timeout=10).json()["counters"]
        return sum(
            r["count"]
            for r in rows
            if r["action"] == action and (status is None or r["status"] == status)
        )

    def reset_counters(self) -> None:
        requests.delete(self.control + "counters", timeout=10)


def b64_multipart(fields: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    """A multipart body whose every part is base64-encoded, as python-libmaas sends it."""
    boundary = "sim-test-boundary"
    out = b""
    for name, value in fields:
        out += (
            (
                f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="{name}"\r\n'
                'Content-Type: text/plain; charset="utf-8"\r\n'
                "Content-Transfer-Encoding: base64\r\n\r\n"
            ).encode()
            + base64.b64encode(value)
            + b"\r\n"
        )
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def oauth(key: str) -> OAuth1:
    ck, tk, ts = key.split(":")
    return OAuth1(ck, "", tk, ts, signature_method=oauthlib.oauth1.SIGNATURE_PLAINTEXT)


class Api:
    """Raw MAAS API 2.0 calls, signed with one key (or anonymous)."""

    def __init__(self, sim: Sim, key: str | None = API_KEY) -> None:
        self.sim = sim
        self.root = sim.url + "api/2.0/"
        self.session = requests.Session()
        if key is not None:
            self.session.auth = oauth(key)

    def get(self, path: str, **params: Any) -> requests.Response:
        return self.session.get(self.root + path, params=params, timeout=10)

    def post(
        self, path: str, op: str | None = None, data: Any = None, **kw: Any
    ) -> requests.Response:
        params = {"op": op} if op else None
        return self.session.post(self.root + path, params=params, data=data, timeout=10, **kw)

    def send(
        self, method: str, path: str, op: str | None = None, **fields: Any
    ) -> requests.Response:
        """A request shaped as MAAS clients send writes: ``op`` in the query string, the form
        as multipart with every part base64-encoded (python-libmaas, Drydock). A list value
        repeats the field."""
        pairs = [
            (name, str(item).encode())
            for name, value in fields.items()
            for item in (value if isinstance(value, list) else [value])
        ]
        body, content_type = b64_multipart(pairs)
        return self.session.request(
            method,
            self.root + path,
            params={"op": op} if op else None,
            data=body,
            headers={"Content-Type": content_type},
            timeout=10,
        )

    def machine(self, sid: str) -> dict[str, Any]:
        response = self.get(f"machines/{sid}/")
        assert response.status_code == 200, response.text
        return response.json()

    def op(self, sid: str, op: str, **form: Any) -> requests.Response:
        return self.post(f"machines/{sid}/", op, data=form)

    def ok(self, sid: str, op: str, **form: Any) -> dict[str, Any]:
        response = self.op(sid, op, **form)
        assert response.status_code == 200, response.text
        return response.json()

    def events(self, sid: str, **params: Any) -> list[dict[str, Any]]:
        response = self.get("events/", op="query", id=sid, limit=1000, **params)
        assert response.status_code == 200, response.text
        return response.json()["events"]

    def status(self, sid: str) -> str:
        return str(self.machine(sid)["status_name"])


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


# The infra-owned testing script the product's reachability stage is configured with in the
# tests: MAAS refuses ``op=test`` with a script it does not have, so the test sites have it
# uploaded (a scenario's own ``scripts`` replace it).
INFRA_REACH = {
    "name": "infra-reach",
    "title": "Control plane reachability",
    "description": "Fetch the node-facing URLs from the node's own network.",
    "tags": ["infra"],
    "hardware_type": "network",
    "timeout": "0:05:00",
    "parameters": {"url": {"type": "url", "allow_list": True}},
}


def make_sim(data: dict[str, Any] | None = None, scale: float = SCALE) -> Sim:
    model = Simulator(scale=scale)
    faults = scenario.load(model, {"scripts": [INFRA_REACH], **(data or {})}, api_key=API_KEY)
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

"""Fixtures of the simulator tests: a raw API client on the shared simulator, and simulators a
test builds itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.maas import Api, Sim, make_sim


@pytest.fixture
def api(sim: Sim) -> Iterator[Api]:
    client = Api(sim)
    yield client
    client.session.close()


@pytest.fixture
def sims() -> Iterator[list[Sim]]:
    """Simulators a test builds itself (own scenario or clock); stopped afterwards."""
    started: list[Sim] = []
    yield started
    for s in started:
        s.server.stop()


@pytest.fixture
def clock_sim(sims: list[Sim]) -> Sim:
    """A simulator whose clock only moves in real time (x1) and through ``advance``."""
    s = make_sim(scale=1.0)
    sims.append(s)
    return s

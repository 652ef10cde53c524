"""Whole-workflow harness: a real Celery worker consuming Redis, a beat stand-in calling the
sweep, Django's live server (for node callbacks), the MAAS simulator, and a ready site."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from django.contrib.auth import get_user_model
from django.db import connections

from devtools.demo import demo_ca_pem
from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.probe import site_probe
from maas_simulator.node import NodeSide
from tests.support.maas import API_KEY, Sim, make_sim
from workflows.scheduling import sweep

CA_PEM = demo_ca_pem()


@dataclass
class Flow:
    sim: Sim
    site: MaasSite
    profile: SiteProfile
    sku: Sku
    admin: Any


def wait_until(predicate: Any, *, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy; for a condition nothing else measures progress
    toward (a workflow's progress: ``wait_progressing``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


STALL_SECONDS = 60.0  # the longest a moving workflow goes without writing its row (polls, leases,
# a worker process starting on a loaded machine)
CEILING_SECONDS = 600.0  # a wait still "progressing" after this is a livelock


def wait_progressing(
    predicate: Any,
    progress: Any,
    *,
    stall: float = STALL_SECONDS,
    what: str = "condition",
) -> Any:
    """Poll ``predicate`` until it is truthy, for as long as ``progress()`` keeps changing: the
    wait fails when it has not changed for ``stall`` seconds (saying what it last was), not at a
    fixed deadline that a loaded machine misses or a stuck run waits out in full."""
    started = moved = time.monotonic()
    last: Any = object()
    while True:
        value = predicate()
        if value:
            return value
        now = time.monotonic()
        seen = progress()
        if seen != last:
            last, moved = seen, now
        elif now - moved > stall:
            raise AssertionError(f"no progress for {stall:.0f}s waiting for {what}; last: {last}")
        if now - started > CEILING_SECONDS:
            raise AssertionError(f"still moving after {CEILING_SECONDS:.0f}s: {what}; last: {last}")
        time.sleep(0.05)


def footprint(model: Any, **rows: Any) -> Any:
    """What a workflow's progress looks like: its states and stages, its claims and heartbeats
    (lease owner and expiry), its polls (the next check) and its timeline. Not ``updated_at``
    or ``dispatch``: the sweep re-sends an unclaimed workflow every few seconds, which moves
    both while nothing runs it, and must not count as progress."""
    from django.db.models import Count, Max

    found = model.objects.filter(**rows)
    states = found.values_list("state", "stage").annotate(n=Count("id"))
    return (
        tuple(states.order_by("state", "stage")),
        found.aggregate(
            lease=Max("lease_expires_at"), check=Max("next_check_at"), events=Count("events")
        ),
    )


def maas_footprint(sim: Any) -> Any:
    """What MAAS's progress looks like (the simulator's): every machine's status and how many
    events it has written. A workflow waiting on MAAS (commissioning, tests, a deploy) writes
    its own row only at its polls, which a loaded machine spaces out: MAAS moving is progress
    too (the 40-node batch reported "no progress for 60 s" while its machines ran their tests)."""
    with sim.model.lock:
        statuses = sorted(str(m.status) for m in sim.model.machines.values())
        return (len(sim.model.events), tuple(statuses))


def fresh_broker(settings: Any) -> None:
    """Empty the test broker: Redis (``make check``'s), or the embedded default's filesystem
    broker (``tests/support/workers.py``'s ``embedded_broker``: a new folder per test)."""
    url = str(settings.CELERY_BROKER_URL)
    if url.startswith("redis"):
        redis.Redis.from_url(url).flushdb()
    elif not url.startswith("filesystem"):
        pytest.fail("whole-workflow tests need Redis: run `make check` or set the broker URL")


@pytest.fixture
def sweeper(transactional_db: None, settings: Any) -> Iterator[None]:
    """Beat stand-in: the sweep every 0.3 s (short lease and grace so recovery is quick)."""
    settings.WORKFLOW_LEASE_SECONDS = 3
    settings.WORKFLOW_DISPATCH_GRACE_SECONDS = 3
    fresh_broker(settings)
    stop = threading.Event()

    def beat() -> None:
        # like beat: a sweep that fails (database restarting) is followed by the next one
        while not stop.wait(0.3):
            try:
                sweep()
            except Exception:  # noqa: S110
                pass
            finally:
                connections.close_all()

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    yield
    stop.set()
    ticker.join(timeout=5)
    connections.close_all()


@pytest.fixture
def worker(sweeper: None) -> Iterator[None]:
    """A real Celery worker (threads pool, in this process) on the test broker."""
    from celery.contrib.testing.worker import start_worker

    from config import celery_app

    # The worker thread ends when its wait for a message ends: Redis's BRPOP waits
    # ``polling_interval`` (kombu's default 1 s, paid by every test at teardown).
    options = celery_app.conf.broker_transport_options
    celery_app.conf.broker_transport_options = {**options, "polling_interval": 0.1}
    try:
        with start_worker(
            celery_app,
            pool="threads",
            concurrency=4,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=20,
        ):
            yield
    finally:
        celery_app.conf.broker_transport_options = options
    connections.close_all()
    # the pool's threads are gone but their connections (reference cycles) stay open until a
    # collection: a few per test, which a run of whole-workflow tests piles up to PostgreSQL's limit
    gc.collect()


@pytest.fixture
def flow_site(transactional_db: None, live_server: Any, settings: Any) -> Iterator[Flow]:
    """The simulator and a healthy, probed site with credentials, a profile and a SKU."""
    settings.NODE_API_URL = live_server.url
    sim = make_sim({"users": []})
    admin = get_user_model().objects.create_user("flow-admin", is_staff=True, is_superuser=True)
    site = MaasSite.objects.create(
        name="flow-site",
        maas_url=sim.url,
        pxe_subnet="10.20.0.0/16",
        ca_bundle_pem=CA_PEM,
        policy={"max_concurrent_workflows": 50},
    )
    site_credentials_write(
        actor=admin,
        site=site,
        payload={"maas_api_key": API_KEY, "ipmi": {"username": "maas", "password": "ipmi-pass"}},
    )
    profile = SiteProfile.objects.create(site=site, name="h100", distro_series="jammy")
    sku = Sku.objects.create(code="gpu-8x", name="8x GPU", gpu_count=8)
    assert site_probe(actor=admin, site_id=site.pk)["health"] == "healthy"
    site.refresh_from_db()
    yield Flow(sim, site, profile, sku, admin)
    sim.server.stop()


@pytest.fixture
def flow(worker: None, flow_site: Flow) -> Flow:
    return flow_site


@pytest.fixture
def node_side(flow_site: Flow) -> Iterator[NodeSide]:
    """The simulator's node side: deployed machines call our enrollment endpoint (their agents
    stop checking in when the test ends: the live server outlives it)."""
    side = NodeSide()
    flow_site.sim.model.node_side = side
    yield side
    side.stop()


def start(flow: Flow, hostname: str, ipmi_ip: str, **kw: Any) -> Any:
    from onboarding.services import onboarding_start

    return onboarding_start(
        actor=flow.admin,
        site_id=flow.site.pk,
        profile_id=flow.profile.pk,
        sku_id=flow.sku.pk,
        hostname=hostname,
        ipmi_ip=ipmi_ip,
        **kw,
    )


def settle(
    pk: int,
    states: tuple[str, ...] = ("succeeded", "failed", "cancelled"),
    stall: float = STALL_SECONDS,
    model: Any = None,
) -> Any:
    """Wait until workflow ``pk`` (an onboarding unless ``model`` says) is in one of ``states``,
    for as long as it keeps moving (``wait_progressing``)."""
    from onboarding.models import Onboarding

    model = model or Onboarding
    return wait_progressing(
        lambda: (wf := model.objects.get(pk=pk)).state in states and wf,
        lambda: footprint(model, pk=pk),
        stall=stall,
        what=f"{model._meta.model_name} {pk} in {states}",
    )


# What an onboarding has MAAS do to a machine, by the status it starts in: each exactly once,
# however often its executions die, are duplicated or are lost (tests/onboarding/test_durability.py)
ONBOARDING_MUTATIONS = {
    "new": ("machine.commission", "machine.set_storage_layout", "machine.deploy"),
    "ready": ("machine.set_storage_layout", "machine.deploy"),
}


def assert_mutations_once(
    sim: Sim, expected: dict[str, tuple[str, ...]], *, only: bool = True
) -> None:
    """MAAS applied no mutation twice to any machine, and to each machine of ``expected``
    (system id → operations) exactly its operations; with ``only``, nothing to any other."""
    applied = sim.applied()
    twice = {key: n for key, n in applied.items() if n > 1}
    assert not twice, f"applied more than once (operation, machine): {twice}"
    for sid, operations in expected.items():
        got = sorted(op for op, machine in applied if machine == sid)
        assert got == sorted(operations), (sid, got)
    if only:
        others = {key for key in applied if key[1] not in expected}
        assert not others, f"mutations of machines no workflow here owns: {others}"


def active_node(flow: Flow, hostname: str, ipmi_ip: str, **machine: Any) -> Any:
    """An in-service node whose machine MAAS shows Deployed (to our user) unless ``machine``
    says otherwise (status, faults)."""
    from maas_domain.models import Node

    machine.setdefault("status", "deployed")
    sid = flow.sim.add(hostname=hostname, power_address=ipmi_ip, **machine)
    return Node.objects.create(
        site=flow.site,
        sku=flow.sku,
        hostname=hostname,
        ipmi_ip=ipmi_ip,
        maas_system_id=sid,
        state="active",
    )


def decommission(flow: Flow, node: Any, mode: str, **kw: Any) -> Any:
    from decommission.services import decommission_start

    if mode == "full":
        kw.setdefault("confirm", True)
    if mode != "reimage":
        kw.setdefault("profile_id", None)
    else:
        kw.setdefault("profile_id", flow.profile.pk)
    return decommission_start(actor=flow.admin, node_id=node.pk, mode=mode, **kw)


def settle_decommission(
    pk: int,
    states: tuple[str, ...] = ("succeeded", "failed", "cancelled", "manual_intervention"),
    stall: float = STALL_SECONDS,
) -> Any:
    from decommission.models import Decommission

    return settle(pk, states, stall, model=Decommission)

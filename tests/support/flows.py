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
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def require_redis(settings: Any) -> None:
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.fail("whole-workflow tests need Redis: run `make check` or set the broker URL")


@pytest.fixture
def sweeper(transactional_db: None, settings: Any) -> Iterator[None]:
    """Beat stand-in: the sweep every 0.3 s (short lease and grace so recovery is quick)."""
    require_redis(settings)
    settings.WORKFLOW_LEASE_SECONDS = 3
    settings.WORKFLOW_DISPATCH_GRACE_SECONDS = 3
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
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

    with start_worker(
        celery_app,
        pool="threads",
        concurrency=4,
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=20,
    ):
        yield
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
    timeout: float = 60.0,
    model: Any = None,
) -> Any:
    """Wait until workflow ``pk`` (an onboarding unless ``model`` says) is in one of ``states``."""
    from onboarding.models import Onboarding

    model = model or Onboarding
    return wait_until(
        lambda: (wf := model.objects.get(pk=pk)).state in states and wf,
        timeout=timeout,
        what=f"{model._meta.model_name} {pk} in {states}",
    )


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
    timeout: float = 60.0,
) -> Any:
    from decommission.models import Decommission

    return settle(pk, states, timeout, model=Decommission)

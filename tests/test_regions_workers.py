"""Region-pinned work with real worker processes: a central worker (``-Q celery``), one of
region east (``-Q region-east``) and, later, one of region west, against two simulators. Each
site's MAAS calls are made only by its region's worker (each worker's own metrics files say
which sites it called); a site whose region has no worker waits, unharmed, and is shown as
such, until a worker of its region starts (docs/operations.md, "Regions")."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client
from prometheus_client import CollectorRegistry, multiprocess

from maas_client.stats import STATS
from maas_domain import regions
from maas_domain.models import AuditLog, MaasSite, SiteProfile
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.probe import site_probe
from maas_simulator.node import NodeSide
from onboarding.models import Onboarding
from tests.support.flows import (
    CA_PEM,
    ONBOARDING_MUTATIONS,
    Flow,
    assert_mutations_once,
    settle,
    start,
    wait_until,
)
from tests.support.maas import API_KEY, make_sim
from tests.support.workers import Workers
from workflows.scheduling import sweep

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def west(flow_site: Flow) -> Iterator[Flow]:
    """A second simulator and a probed site on it, in region west (the first site, in east)."""
    MaasSite.objects.filter(pk=flow_site.site.pk).update(region="east")
    flow_site.site.refresh_from_db()
    sim = make_sim({"users": []})
    sim.model.node_side = NodeSide()
    site = MaasSite.objects.create(
        name="west-site",
        region="west",
        maas_url=sim.url,
        pxe_subnet="10.20.0.0/16",
        ca_bundle_pem=CA_PEM,
        policy={"max_concurrent_workflows": 50},
    )
    site_credentials_write(
        actor=flow_site.admin,
        site=site,
        payload={"maas_api_key": API_KEY, "ipmi": {"username": "maas", "password": "ipmi-pass"}},
    )
    profile = SiteProfile.objects.create(site=site, name="h100", distro_series="jammy")
    assert site_probe(actor=flow_site.admin, site_id=site.pk)["health"] == "healthy"
    site.refresh_from_db()
    flow_site.sim.reset_counters()
    sim.reset_counters()  # from here on, every request to it is a worker's
    yield Flow(sim, site, profile, flow_site.sku, flow_site.admin)
    sim.model.node_side.stop()
    sim.server.stop()


def sites_called(metrics_dir: Path) -> dict[str, int]:
    """MAAS requests per site that the worker writing ``metrics_dir`` made."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(metrics_dir))
    calls: dict[str, int] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == "maascp_maas_requests_total" and sample.value:
                site = sample.labels["site"]
                calls[site] = calls.get(site, 0) + int(sample.value)
    return calls


def requests_to(flow: Flow) -> int:
    return sum(row["count"] for row in _counters(flow))


def _counters(flow: Flow) -> list[dict[str, Any]]:
    import requests

    return list(requests.get(flow.sim.control + "counters", timeout=10).json()["counters"])


def test_each_region_s_worker_makes_its_sites_maas_calls_and_an_unserved_region_waits(
    flow_site: Flow, west: Flow, workers: Workers, tmp_path: Path, api: Any
) -> None:
    east = flow_site
    dirs = {name: tmp_path / f"metrics-{name}" for name in ("central", "east", "west")}
    for folder in dirs.values():
        folder.mkdir()

    def worker(name: str, queues: list[str]) -> None:
        workers.start(
            queues=queues,
            env={"MAASCP_METRICS_DIR": str(dirs[name]), "MAASCP_WORKER_HEARTBEAT_SECONDS": "1"},
        )

    worker("central", ["celery"])
    worker("east", ["region-east"])
    wait_until(
        lambda: (regions.live_queues() or {}).keys() >= {"celery", "region-east"},
        what="the central and east workers' heartbeats",
    )
    east_sid = east.sim.add(hostname="e01", status="ready", power_address="10.12.0.1")
    west_sid = west.sim.add(hostname="w01", status="ready", power_address="10.13.0.1")
    east_wf = start(east, "e01", "10.12.0.1")
    west_wf = start(west, "w01", "10.13.0.1")

    east_wf = settle(east_wf.pk)
    assert east_wf.state == "succeeded", (east_wf.failure_class, east_wf.reason)

    # west was admitted (admission is central) and waits for a worker of its region: not
    # claimed, not failed, not a single request to its MAAS
    row = Onboarding.objects.get(pk=west_wf.pk)
    assert (row.state, row.lease_owner, row.lost_leases) == ("running", "", 0)
    assert not row.failure_class
    assert not row.events.filter(kind="stage.started").exists()
    assert requests_to(west) == 0
    # the sweep does not pile re-sends into the region's queue while nobody serves it
    broker = redis.Redis.from_url(str(settings.CELERY_BROKER_URL))
    queued = broker.llen("region-west")
    Onboarding.objects.filter(pk=row.pk).update(updated_at=row.updated_at.replace(year=2000))
    # (the fixture's beat stand-in sweeps too: a sweep that finds it holding the lock does nothing)
    wait_until(lambda: sweep()["unserved"] == 1, what="a sweep that held west back")
    assert broker.llen("region-west") == queued == 1
    # and it is shown: the region's state, /health/ready's detail
    state = regions.region_state("west")
    assert (state.queue, state.waiting, state.workers) == ("region-west", 1, 0)
    assert state.unserved
    ready = Client().get("/health/ready").json()
    assert ready["status"] == "ready"  # the API itself needs no region's worker
    assert ready["regions"]["unserved"] == [
        {"region": "west", "queue": "region-west", "waiting": 1}
    ]
    assert not regions.region_state("east").unserved
    # an operator's round trip through a region's queue: east answers, west has nobody
    out = StringIO()
    call_command("ping_worker", "--region", "east", "--timeout", "60", stdout=out)
    assert "pong from" in out.getvalue()
    with pytest.raises(CommandError, match="no worker of queue region-west answered"):
        call_command("ping_worker", "--region", "west", "--timeout", "1")
    # the site probe runs in the site's region too: refused at once while none serves it
    probe = api.post(f"/api/v1/admin/maas-sites/{west.site.pk}/probe", {}, format="json")
    assert probe.status_code == 503, probe.json()
    assert "celery -A config worker -Q region-west" in probe.json()["detail"]
    assert requests_to(west) == 0

    worker("west", ["region-west"])
    west_wf = settle(west_wf.pk)
    assert west_wf.state == "succeeded", (west_wf.failure_class, west_wf.reason)
    assert not regions.region_state("west").unserved
    # now the region's worker probes; this process (the API) sends MAAS nothing
    in_api = STATS.total()
    probe = api.post(f"/api/v1/admin/maas-sites/{west.site.pk}/probe", {}, format="json")
    assert probe.status_code == 200, probe.json()
    assert probe.json()["health"] == "healthy"
    assert STATS.total() == in_api
    audited = AuditLog.objects.filter(action="maas_site.probe").latest("id")
    assert (audited.actor_name, audited.target_id) == ("ops-admin", str(west.site.pk))

    # each site's MAAS was called by its region's worker and no other
    assert sites_called(dirs["east"]).keys() == {"flow-site"}
    assert sites_called(dirs["west"]).keys() == {"west-site"}
    assert sites_called(dirs["central"]) == {}
    assert_mutations_once(east.sim, {east_sid: ONBOARDING_MUTATIONS["ready"]})
    assert_mutations_once(west.sim, {west_sid: ONBOARDING_MUTATIONS["ready"]})

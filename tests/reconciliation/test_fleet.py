"""Many sites, each its own MAAS: what one round of reconciliation costs each site is the same
whatever its size (counts only; the 20 x 5,000 figures live in benchmarks/bench_fleet.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from maas_domain.models import MaasSite
from maas_domain.services.credentials import site_credentials_write
from reconciliation import services
from reconciliation.models import ReconcileRun
from tests.factories import make_node, make_sku
from tests.support.maas import API_KEY, Sim, make_sim
from workflows.kinds import KINDS

# Statements: 16, and two per workflow kind (its open workflows; the stages they wait in)
BUDGET = {"maas_requests": 2, "listings": 1, "sql_statements": 16 + 2 * len(KINDS)}


@pytest.fixture
def fleet(db: None) -> Iterator[list[tuple[MaasSite, Sim]]]:
    sku = make_sku()
    sites = []
    for n, machines in enumerate((3, 12, 30)):
        sim = make_sim()
        site = MaasSite.objects.create(name=f"dc{n}", maas_url=sim.url, maas_user="admin")
        site_credentials_write(actor=None, site=site, payload={"maas_api_key": API_KEY})
        for i in range(machines):
            host = f"dc{n}-{i}"
            sid = sim.add(hostname=host, status="deployed", power_address=f"10.{n}.0.{i + 1}")
            ip = f"10.{n}.0.{i + 1}" if i else "10.99.0.1"  # one drifting BMC address a site
            make_node(site, sku=sku, hostname=host, maas_system_id=sid, ipmi_ip=ip, state="active")
        sim.add(hostname=f"dc{n}-stray", status="deployed")  # a machine we do not know
        sites.append((site, sim))
    yield sites
    for _, sim in sites:
        sim.server.stop()


@pytest.mark.django_db
def test_every_site_of_a_dispatch_costs_one_listing_and_the_same_statements(
    fleet: list[tuple[MaasSite, Sim]], settings: Any
) -> None:
    settings.RECONCILE_MIN_GAP_SECONDS = 0  # two ticks in a row
    for round_ in ("first", "steady"):
        assert services.reconcile_dispatch()["queued"] == len(fleet)  # as beat's tick does
        costs: list[dict[str, Any]] = []
        for site, sim in fleet:
            sim.reset_counters()
            run = ReconcileRun.objects.get(site=site, state="queued")
            with CaptureQueriesContext(connection) as ctx:
                done = services.reconcile_execute(run.pk)
            assert done is not None and done.state == "succeeded", done and done.reason
            costs.append(
                {
                    "maas_requests": done.maas_requests,
                    "listings": sim.count("machines.read"),
                    "sql_statements": len(ctx.captured_queries),
                }
            )
            assert done.drift_open == 2, (round_, site.name)  # the BMC address, the stray
        assert all(c == costs[0] for c in costs), (round_, costs)  # whatever the site's size
        over = {k: v for k, v in costs[0].items() if v > BUDGET[k]}
        assert not over, (round_, costs[0], BUDGET)

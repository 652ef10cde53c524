"""Reconcile runs: bulk reads (one listing per site, constant SQL), no overlap, no double work
from two beats, the admin API (status, drift list, run now) and a run through a real worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite
from reconciliation import services
from reconciliation.models import DriftRecord, ReconcileRun
from tests.factories import make_node, make_sku
from tests.reconciliation.conftest import reconcile
from tests.support.flows import wait_until
from tests.support.maas import API_KEY, Sim
from workflows.kinds import KINDS

BASE = "/api/v1/admin/reconciliation"


def populate(sim: Sim, site: MaasSite, n: int) -> None:
    """n healthy deployed nodes, plus a tenth as many of: unknown machines, missing machines,
    hostname mismatches, and a machine left Failed deployment to our user (so every write path
    of the ledger runs, and the leak's workflow is looked up)."""
    sku = make_sku()
    k = max(n // 10, 1)
    for i in range(n):
        host = f"n{n}-{i}"
        sid = sim.add(hostname=host if i >= k else f"{host}-x", status="deployed")
        make_node(site, sku=sku, hostname=host, maas_system_id=sid, state="active")
    for i in range(k):
        sim.add(hostname=f"stray{n}-{i}", status="ready")
        make_node(
            site, sku=sku, hostname=f"gone{n}-{i}", maas_system_id=f"zz{n}{i}", state="active"
        )
    sim.add(hostname=f"leak{n}", status="failed_deployment")


def queries_of_a_run(site: MaasSite) -> tuple[int, ReconcileRun]:
    run, _ = services.reconcile_request(site=site, trigger="command")
    with CaptureQueriesContext(connection) as ctx:
        done = services.reconcile_execute(run.pk)
    assert done is not None and done.state == "succeeded", done and done.reason
    return len(ctx.captured_queries), done


@pytest.mark.django_db
def test_a_run_costs_one_listing_and_a_constant_number_of_queries(sim: Sim, site: MaasSite) -> None:
    populate(sim, site, 5)
    small_first, run = queries_of_a_run(site)
    small_again, _ = queries_of_a_run(site)
    assert run.drift_opened == 4  # unknown, missing, hostname, leak

    big = MaasSite.objects.create(name="big", maas_url=sim.url, maas_user="admin")
    from maas_domain.services.credentials import site_credentials_write

    site_credentials_write(actor=None, site=big, payload={"maas_api_key": API_KEY})
    populate(sim, big, 60)
    sim.reset_counters()
    big_first, run = queries_of_a_run(big)
    assert run.machines_seen == 5 + 1 + 1 + 60 + 6 + 1  # one MAAS: both sites see every machine
    assert sim.count("machines.read") == 1  # one listing, not a request per node
    assert sim.count("machines.power_parameters") == 1
    assert run.maas_requests == 2  # maas_user is set: no whoami
    big_again, _ = queries_of_a_run(big)
    assert (big_first, big_again) == (small_first, small_again)
    # 16 and two per workflow kind (its open workflows, the stages they wait in); 5 to cordon
    # the nodes of the run's new critical drift (their nodes, their cordons, then one insert
    # each of cordons, audit rows and events) and 2 to find who left its leaks and whether
    # policy sweeps them, whatever their number
    assert big_first <= 16 + 2 * len(KINDS) + 5 + 2, big_first


@pytest.mark.django_db
def test_one_run_per_site_at_a_time_and_a_duplicate_message_does_nothing(
    site: MaasSite,
) -> None:
    first, created = services.reconcile_request(site=site, trigger="api")
    again, created_again = services.reconcile_request(site=site, trigger="api")
    assert created and not created_again and again.pk == first.pk
    assert services.reconcile_execute(first.pk) is not None
    assert services.reconcile_execute(first.pk) is None  # redelivered: already claimed
    assert ReconcileRun.objects.get(pk=first.pk).state == "succeeded"
    second, created = services.reconcile_request(site=site, trigger="api")
    assert created and second.pk != first.pk


@pytest.mark.django_db
def test_a_run_whose_worker_vanished_does_not_block_the_site(site: MaasSite) -> None:
    stuck, _ = services.reconcile_request(site=site, trigger="api")
    ReconcileRun.objects.filter(pk=stuck.pk).update(
        state="running", queued_at=timezone.now() - timedelta(hours=1)
    )
    fresh, created = services.reconcile_request(site=site, trigger="api")
    assert created and fresh.pk != stuck.pk
    stuck.refresh_from_db()
    assert stuck.state == "failed" and stuck.reason.startswith("stale")


@pytest.mark.django_db
def test_two_beats_firing_the_same_tick_queue_each_site_once(sim: Sim, site: MaasSite) -> None:
    MaasSite.objects.create(name="off", maas_url=sim.url, status="disabled")
    assert services.reconcile_dispatch() == {"queued": 1, "skipped": 0, "unserved": 0}
    run = ReconcileRun.objects.get(site=site)
    services.reconcile_execute(run.pk)  # the first beat's run even finished already
    assert services.reconcile_dispatch() == {"queued": 0, "skipped": 1, "unserved": 0}
    assert ReconcileRun.objects.count() == 1


@pytest.mark.django_db
def test_schedule_is_a_database_row_operators_can_edit(api: APIClient, site: MaasSite) -> None:
    task = PeriodicTask.objects.get(name="reconciliation-dispatch")
    assert task.task == "reconciliation.dispatch" and task.enabled
    assert task.interval is not None and task.interval.every == 300
    body = api.get(f"{BASE}/status").json()
    assert body["schedule"]["schedule"] == "every 300s"
    assert body["sites"][0]["next_run_at"] is not None

    task.interval = IntervalSchedule.objects.create(every=2, period="hours")
    task.last_run_at = timezone.now()
    task.save()
    body = api.get(f"{BASE}/status").json()
    assert body["schedule"]["schedule"] == "every 7200s"
    task.enabled = False
    task.save()
    body = api.get(f"{BASE}/status").json()
    assert body["schedule"]["next_run_at"] is None and body["sites"][0]["next_run_at"] is None


@pytest.mark.django_db
def test_run_endpoint_answers_202_and_reuses_the_run_in_progress(
    api: APIClient, site: MaasSite
) -> None:
    response = api.post(f"{BASE}/run", {"site_id": site.pk}, format="json")
    assert response.status_code == 202, response.content
    [run] = response.json()["runs"]
    assert (run["site_id"], run["state"], run["reused"]) == (site.pk, "queued", False)
    again = api.post(f"{BASE}/run", {"site_id": site.pk}, format="json").json()["runs"][0]
    assert (again["id"], again["reused"]) == (run["id"], True)
    everything = api.post(f"{BASE}/run", {}, format="json").json()["runs"]
    assert [r["id"] for r in everything] == [run["id"]]
    assert AuditLog.objects.filter(action="reconciliation.run").count() == 1

    assert api.post(f"{BASE}/run", {"site_id": 99999}, format="json").status_code == 400
    assert api.post(f"{BASE}/run", {"site": 1}, format="json").status_code == 400
    site.status = "disabled"
    site.save()
    ReconcileRun.objects.all().update(state="succeeded")
    conflict = api.post(f"{BASE}/run", {"site_id": site.pk}, format="json")
    assert conflict.status_code == 409 and conflict.json()["error"] == "conflict"


@pytest.mark.django_db
def test_status_summarises_each_site(api: APIClient, sim: Sim, site: MaasSite) -> None:
    sim.add(hostname="stray-1", status="ready")
    sim.add(hostname="orphan-1", status="deployed")
    run = reconcile(site)
    api.get(f"{BASE}/status")  # the token's first use is recorded once
    with CaptureQueriesContext(connection) as one_site:
        body = api.get(f"{BASE}/status").json()
    [entry] = body["sites"]
    assert entry["last_run"]["id"] == run.pk and entry["last_run"]["state"] == "succeeded"
    assert entry["last_run"]["duration_ms"] is not None and entry["in_progress"] is None
    assert entry["open_drift"] == {
        "total": 2,
        "by_kind": {"unknown_machine": 1, "leak": 1},
        "by_severity": {"info": 1, "critical": 1},
        "by_state": {"open": 2},
    }
    for i in range(3):
        MaasSite.objects.create(name=f"more-{i}", maas_url=sim.url)
    services.reconcile_request(site=site, trigger="api")
    with CaptureQueriesContext(connection) as four_sites:
        body = api.get(f"{BASE}/status").json()
    assert len(body["sites"]) == 4
    assert next(s for s in body["sites"] if s["site_id"] == site.pk)["in_progress"]["state"] == (
        "queued"
    )
    assert len(four_sites.captured_queries) == len(one_site.captured_queries)


@pytest.mark.django_db
def test_drift_list_filters_and_pages_in_constant_queries(
    api: APIClient, sim: Sim, site: MaasSite
) -> None:
    for i in range(12):
        sim.add(hostname=f"stray-{i}", status="ready")
    sim.add(hostname="orphan", status="deployed")
    node = make_node(site, hostname="gone", maas_system_id="nope00", state="active")
    reconcile(site)
    api.get(f"{BASE}/drift")  # the token's first use is recorded once
    page = api.get(f"{BASE}/drift", {"limit": 5}).json()
    assert page["count"] == 14 and len(page["results"]) == 5 and page["next"]
    assert api.get(f"{BASE}/drift", {"kind": "leak"}).json()["count"] == 1
    assert api.get(f"{BASE}/drift", {"severity": "critical"}).json()["count"] == 2
    assert api.get(f"{BASE}/drift", {"node": node.pk}).json()["results"][0]["kind"] == (
        "missing_in_maas"
    )
    assert api.get(f"{BASE}/drift", {"state": "cleared"}).json()["count"] == 0
    assert api.get(f"{BASE}/drift", {"site": site.pk + 1}).json()["count"] == 0
    assert api.get(f"{BASE}/drift", {"kind": "bogus"}).status_code == 400
    with CaptureQueriesContext(connection) as small:
        api.get(f"{BASE}/drift", {"limit": 2})
    with CaptureQueriesContext(connection) as large:
        api.get(f"{BASE}/drift", {"limit": 100})
    assert len(small.captured_queries) == len(large.captured_queries)
    row = api.get(f"{BASE}/drift", {"kind": "missing_in_maas"}).json()["results"][0]
    assert set(row) >= {"first_seen_at", "last_seen_at", "occurrences", "severity", "detail"}
    assert DriftRecord.objects.count() == 14


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_run_now_through_a_real_worker(worker: None, admin_user: Any, sim: Sim) -> None:
    from maas_domain.services.credentials import site_credentials_write

    site = MaasSite.objects.create(name="worker-site", maas_url=sim.url)
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
    sim.add(hostname="stray", status="ready")
    api = APIClient()
    api.force_authenticate(admin_user)
    run = api.post(f"{BASE}/run", {"site_id": site.pk}, format="json").json()["runs"][0]

    def finished() -> Any:
        last = api.get(f"{BASE}/status").json()["sites"][0]["last_run"]
        return last if last and last["id"] == run["id"] else None

    last = wait_until(finished, timeout=30, what="the reconcile run")
    assert last["state"] == "succeeded" and last["machines_seen"] == 1
    assert last["drift_opened"] == 1

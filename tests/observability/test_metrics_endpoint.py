"""The admin scrape endpoint: who may read it, and the gauges computed from the database."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from maas_client.errors import MaasTransient
from maas_domain import events
from maas_domain.models import MaasSite, OutboxEvent
from maas_domain.observability import exposition, metrics
from maas_domain.site_client import client_for_site
from maas_domain.work import KINDS
from onboarding.models import Onboarding, OnboardingEvent
from tests.factories import make_onboarding, make_site
from tests.observability.scrape import families, parse, value
from tests.support.maas import API_KEY
from workflows.kinds import WorkflowKind

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/metrics"


def scrape(api: APIClient) -> str:
    response = api.get(URL)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


def test_anonymous_and_non_staff_callers_cannot_read_metrics(
    anon_api: APIClient, user_api: APIClient
) -> None:
    anonymous = anon_api.get(URL, HTTP_ACCEPT="text/plain")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    assert user_api.get(URL).status_code == 403


def test_admin_token_and_staff_session_can_scrape(api: APIClient, admin_user: Any) -> None:
    assert families(scrape(api))["maascp_workflows"] == "gauge"
    session = APIClient()
    session.force_login(admin_user)
    assert session.get(URL).status_code == 200
    # what Prometheus sends
    prom = api.get(URL, HTTP_ACCEPT="application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
    assert prom.status_code == 200


def test_workflows_gauge_counts_every_registered_kind_and_state(
    api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_site()
    for state in ("running", "waiting", "succeeded", "succeeded"):
        make_onboarding(site, state=state)
    # a kind registered later (decommission) shows up without touching the metrics code
    other = WorkflowKind(
        name="zz-later-kind",
        model=Onboarding,
        event_model=OnboardingEvent,
        stages=[],
        policy=lambda wf: wf.profile.effective_policy(),
    )
    monkeypatch.setitem(KINDS, "zz-later-kind", other)
    samples = parse(scrape(api))
    assert value(samples, "maascp_workflows", kind="onboarding", state="succeeded") == 2
    assert value(samples, "maascp_workflows", kind="onboarding", state="running") == 1
    assert value(samples, "maascp_workflows", kind="onboarding", state="failed") == 0
    assert value(samples, "maascp_workflows", kind="zz-later-kind", state="waiting") == 1
    assert value(samples, "maascp_metrics_source_up", source="workflows") == 1


def test_database_gauges_cost_the_same_queries_whatever_the_rows() -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            exposition.render_web()
        return len(captured)

    empty = queries()
    site = make_site()
    for i in range(5):
        make_onboarding(site, hostname=f"q{i}", state="succeeded")
    # one per workflow kind, one for the outbox, one for open drift; for the regions: sites
    # per region, one per workflow kind and one for reconcile runs; for cordons: the active
    # ones by site and reason, and the sites
    assert queries() == empty == len(KINDS) + 1 + 1 + 1 + len(KINDS) + 1 + 2


def test_outbox_lag_is_the_age_and_count_of_unpublished_events(
    api: APIClient, settings: Any
) -> None:
    settings.EVENT_SINK = "log"
    samples = parse(scrape(api))
    assert value(samples, "maascp_outbox_unpublished_events") == 0
    assert value(samples, "maascp_outbox_oldest_unpublished_age_seconds") == 0
    old = OutboxEvent.objects.create(type="node.onboarding.started", payload={})
    OutboxEvent.objects.create(type="node.onboarding.completed", payload={})
    OutboxEvent.objects.filter(pk=old.pk).update(occurred_at=timezone.now() - timedelta(minutes=10))
    samples = parse(scrape(api))
    assert value(samples, "maascp_outbox_unpublished_events") == 2
    assert 600 <= value(samples, "maascp_outbox_oldest_unpublished_age_seconds") < 3600
    assert events.publish() == 2
    samples = parse(scrape(api))
    assert value(samples, "maascp_outbox_unpublished_events") == 0
    assert value(samples, "maascp_outbox_oldest_unpublished_age_seconds") == 0


def test_a_failing_gauge_source_is_reported_and_the_rest_still_answers(
    api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> list[Any]:
        raise RuntimeError("drift table missing")

    monkeypatch.setattr(metrics, "GAUGE_SOURCES", list(metrics.GAUGE_SOURCES))
    metrics.register_gauge_source("drift", broken)
    samples = parse(scrape(api))
    assert value(samples, "maascp_metrics_source_up", source="drift") == 0
    assert value(samples, "maascp_metrics_source_up", source="outbox") == 1


def test_open_drift_and_reconcile_duration_once_wired(
    api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the reconciliation app does after the merge: a drift source and a duration call."""
    monkeypatch.setattr(metrics, "GAUGE_SOURCES", list(metrics.GAUGE_SOURCES))
    metrics.register_gauge_source(
        "drift",
        lambda: [
            metrics.open_drift_family(
                {("power_state_unexpected", "warning"): 3, ("missing_machine", "critical"): 1}
            )
        ],
    )
    before = parse(scrape(api))
    metrics.reconcile_finished("dc1-metrics-test", 2.5, "succeeded")
    samples = parse(scrape(api))
    drift = "maascp_reconcile_open_drift"
    assert value(samples, drift, kind="power_state_unexpected", severity="warning") == 3
    assert value(samples, drift, severity="critical") == 1
    count = "maascp_reconcile_duration_seconds_count"
    labels = {"site": "dc1-metrics-test", "outcome": "succeeded"}
    assert value(samples, count, **labels) == value(before, count, **labels) + 1


def test_maas_requests_are_counted_by_operation_outcome_and_code(
    api: APIClient, sim: Any, sleeps: list[float]
) -> None:
    site = MaasSite(name="test-site", maas_url=sim.url)  # a client as the product builds it
    maas = client_for_site(site, api_key=API_KEY, sleep=sleeps.append, read_timeout=5)
    before = parse(scrape(api))
    maas.version()
    sim.faults({"kind": "502", "count": 4, "method": "GET"})
    with pytest.raises(MaasTransient):
        maas.whoami()
    after = parse(scrape(api))

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    ok = {"site": "test-site", "operation": "get_version", "outcome": "ok", "code": "200"}
    assert delta("maascp_maas_requests_total", **ok) == 1
    # a safe read is attempted four times: each attempt is one request
    assert delta("maascp_maas_requests_total", operation="get_whoami", code="502") == 4
    assert delta("maascp_maas_request_duration_seconds_count", operation="get_whoami") == 4


def test_region_gauges_show_work_waiting_with_no_live_worker(
    api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from maas_domain import heartbeat
    from reconciliation.models import ReconcileRun

    east = make_site(region="east")
    make_onboarding(east, state="running")
    make_onboarding(east, state="pending")
    make_onboarding(east, state="manual_intervention")  # waits for an operator, not a worker
    make_onboarding(east, state="succeeded")
    ReconcileRun.objects.create(site=east, trigger="api")
    make_onboarding(make_site(region="west"), state="waiting")
    make_site()  # the default region, idle
    monkeypatch.setattr(
        heartbeat, "live_queues", lambda: {"celery": 2, "region-west": 1, "region-elsewhere": 1}
    )
    samples = parse(scrape(api))
    assert value(samples, "maascp_region_work_waiting", region="east") == 3
    assert value(samples, "maascp_region_workers", region="east") == 0
    assert value(samples, "maascp_region_work_waiting", region="west") == 1
    assert value(samples, "maascp_region_workers", region="west") == 1
    assert value(samples, "maascp_region_work_waiting", region="default") == 0
    assert value(samples, "maascp_region_workers", region="default") == 2


def test_unreadable_heartbeats_leave_out_the_workers_series_not_report_zero(
    api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zero workers would fire MaascpRegionUnserved for every region on a Redis hiccup."""
    from maas_domain import heartbeat

    def unreadable() -> dict[str, int]:
        raise ConnectionError("broker unreachable")

    make_onboarding(make_site(region="east"), state="running")
    monkeypatch.setattr(heartbeat, "live_queues", unreadable)
    samples = parse(scrape(api))
    assert value(samples, "maascp_region_work_waiting", region="east") == 1
    assert not [name for name, _ in samples if name == "maascp_region_workers"]
    assert value(samples, "maascp_metrics_source_up", source="regions") == 1


def test_the_endpoint_needs_the_read_class_as_the_docs_say(db: None) -> None:
    """The docs said an admin token while a read token scraped: one rule, stated once in the
    docs and held here. A read-scoped token of the read role scrapes; a user without a role,
    or a staff flag alone, does not."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from maas_domain.access import Action
    from maas_domain.observability.views import MetricsViewSet
    from tests.support.tokens import bearer_token

    assert MetricsViewSet.action_classes == {"list": Action.READ}
    docs = (Path(__file__).resolve().parents[2] / "docs/observability.md").read_text()
    assert "The endpoint needs the `read` action class" in docs
    assert "admin bearer token" not in docs
    reader = get_user_model().objects.create_user("prometheus")
    reader.groups.add(Group.objects.get(name="maascp-read"))
    staff = get_user_model().objects.create_user("staff-only", is_staff=True)
    for user, code in ((reader, 200), (staff, 403)):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='read')}")
        assert client.get(URL).status_code == code, user

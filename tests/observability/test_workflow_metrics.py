"""Metrics move when a workflow runs: a real onboarding (Celery worker, PostgreSQL, Redis, the
MAAS simulator) and the admin scrape endpoint read over HTTP, before and after."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from maas_domain.services.tokens import api_token_create
from maas_simulator.node import NodeSide
from tests.observability.scrape import Samples, parse, value
from tests.support.flows import Flow, settle, start

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
STAGES = (
    "preflight",
    "discover",
    "commission",
    "conformance",
    "storage_pxe",
    "payload",
    "deploy",
    "hardware_sync",
    "enrollment",
    "complete",
)


def test_an_onboarding_moves_workflow_stage_retry_and_maas_metrics(
    flow: Flow, node_side: NodeSide, live_server: Any
) -> None:
    _, token = api_token_create(actor=None, user=flow.admin, name="prometheus")

    def scrape() -> Samples:
        answer = requests.get(
            f"{live_server.url}/api/v1/admin/metrics",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return parse(answer.text)

    flow.sim.add(hostname="unnamed-node", status="new", power_address="10.10.7.61")
    # MAAS answers the first commission with 503 (nothing applied): the engine retries it
    flow.sim.faults(
        {"kind": "503", "count": 1, "method": "POST", "op": "commission", "retry_after": 1}
    )
    before = scrape()
    wf = settle(start(flow, "c07u61", "10.10.7.61").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    workflows = {"kind": "onboarding", "state": "succeeded"}
    assert delta("maascp_workflows", **workflows) == 1
    assert value(after, "maascp_workflows", kind="onboarding", state="running") == 0
    ended = "maascp_workflow_stage_duration_seconds_count"
    for stage in STAGES:
        assert delta(ended, kind="onboarding", stage=stage, outcome="succeeded") == 1, stage
    assert delta(ended, kind="onboarding", outcome="failed") == 0
    retried = {"kind": "onboarding", "stage": "commission", "classification": "maas_transient"}
    assert delta("maascp_workflow_retries_total", **retried) == 1
    commission = {"site": "flow-site", "operation": "commission"}
    assert delta("maascp_maas_requests_total", **commission, outcome="ok", code="200") == 1
    assert delta("maascp_maas_requests_total", **commission, outcome="transient", code="503") == 1
    assert delta("maascp_maas_request_duration_seconds_count", operation="commission") == 2
    assert delta("maascp_maas_requests_total", site="flow-site", operation="deploy") == 1


def test_a_stage_retry_decision_is_counted_by_its_classification(
    flow: Flow, node_side: NodeSide
) -> None:
    """The deploy stage's own retry (datasource failure: release and redeploy) counts too."""
    from tests.observability.scrape import local

    flow.sim.add(
        hostname="c07u62",
        status="ready",
        power_address="10.10.7.62",
        faults={"deploy_datasource_failure": [1]},
    )
    labels = {"kind": "onboarding", "stage": "deploy", "classification": "datasource"}
    before = value(local(), "maascp_workflow_retries_total", **labels)
    wf = settle(start(flow, "c07u62", "10.10.7.62").pk)
    assert wf.state == "succeeded", wf.reason
    assert value(local(), "maascp_workflow_retries_total", **labels) == before + 1

"""The Grafana dashboard in docs/ parses and only queries metrics the code defines."""

from __future__ import annotations

import json
import re
from pathlib import Path

from maas_domain.observability import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "maascp-overview.json"


def test_dashboard_queries_only_metrics_we_export() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert all(p["targets"] for p in panels)
    used = {name for expr in exprs for name in re.findall(r"\bmaascp_[a-z0-9_]+", expr)}
    unknown = used - metrics.sample_names()
    assert not unknown, f"the dashboard queries metrics nobody exports: {unknown}"
    # every family the issue asks for has a panel
    for family in (
        "maascp_workflows",
        "maascp_workflow_stage_duration_seconds_bucket",
        "maascp_workflow_retries_total",
        "maascp_maas_requests_total",
        "maascp_maas_request_duration_seconds_bucket",
        "maascp_reconcile_open_drift",
        "maascp_reconcile_duration_seconds_bucket",
        "maascp_outbox_oldest_unpublished_age_seconds",
    ):
        assert family in used, family

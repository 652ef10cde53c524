"""The drift list (docs/admin.md, "Drift"): open drift by default, every state one click away;
severity and state coloured as everywhere else; the message shown; each action asks for a
reason (and an acknowledgement for an expiry) before it calls the service."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from maas_domain.humanize import DRIFT_STATE_COLOURS, SEVERITY_COLOURS
from maas_domain.models import AuditLog
from reconciliation.models import DriftRecord
from tests.factories import make_site

pytestmark = pytest.mark.django_db
LIST = "/admin/reconciliation/driftrecord/"


def record(site: Any, n: int, **extra: Any) -> DriftRecord:
    now = timezone.now()
    data = {"kind": "unknown_machine", "severity": "critical", "subject": f"machine:m{n}",
            "system_id": f"m{n}", "hostname": f"stray-{n}", "first_seen_at": now,
            "last_seen_at": now, "message": f"MAAS has machine m{n} nobody onboarded"}  # fmt: skip
    return DriftRecord.objects.create(site=site, **{**data, **extra})


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


@pytest.fixture
def ledger() -> dict[str, DriftRecord]:
    site = make_site(name="east")
    return {
        "open": record(site, 1),
        "warning": record(site, 2, severity="warning"),
        "acked": record(site, 3, state="acknowledged"),
        "cleared": record(site, 4, state="cleared"),
    }


def test_the_list_opens_on_open_drift_with_its_message_and_colours(
    ops: Any, ledger: dict[str, DriftRecord]
) -> None:
    html = ops.get(LIST).content.decode()
    assert "stray-1" in html and "stray-2" in html
    assert "stray-3" not in html and "stray-4" not in html  # not open: one click away
    assert "MAAS has machine m1 nobody onboarded" in html  # the message column
    assert f"background:{SEVERITY_COLOURS['critical']}" in html
    assert f"background:{SEVERITY_COLOURS['warning']}" in html
    assert f"background:{DRIFT_STATE_COLOURS['open']}" in html
    every = ops.get(LIST, {"state": "all"}).content.decode()
    assert all(f"stray-{n}" in every for n in (1, 2, 3, 4))
    acked = ops.get(LIST, {"state": "acknowledged"}).content.decode()
    assert "stray-3" in acked and "stray-1" not in acked
    for hostile in ("\x00", "open\x00", "x" * 500, "<script>"):
        response = ops.get(LIST, {"state": hostile})
        assert response.status_code == 200 and "stray-" not in response.content.decode()


def test_acknowledging_asks_for_a_reason_and_an_expiry_first(
    ops: Any, ledger: dict[str, DriftRecord]
) -> None:
    rec = ledger["open"]
    chosen = {"action": "acknowledge", "_selected_action": [rec.pk]}
    asked = ops.post(LIST, chosen)
    html = asked.content.decode()
    assert asked.status_code == 200 and 'name="reason"' in html
    assert 'name="expires_in_hours"' in html and "stray-1" in html
    rec.refresh_from_db()
    assert rec.state == "open" and not AuditLog.objects.exists()  # nothing yet
    blank = ops.post(LIST, {**chosen, "post": "yes", "reason": "  "})
    assert blank.status_code == 400
    rec.refresh_from_db()
    assert rec.state == "open"
    bad = ops.post(LIST, {**chosen, "post": "yes", "reason": "known", "expires_in_hours": "0"})
    assert bad.status_code == 400
    done = ops.post(LIST, {**chosen, "post": "yes", "reason": "rack 7 is being recabled",
                           "expires_in_hours": "24"}, follow=True)  # fmt: skip
    said = [str(m) for m in done.context["messages"]]
    assert any("acknowledge: 1 drift record(s) by ops-admin, until" in m for m in said), said
    rec.refresh_from_db()
    assert rec.state == "acknowledged" and rec.resolution_reason == "rack 7 is being recabled"
    left = rec.acknowledged_until - timezone.now()
    assert timedelta(hours=23, minutes=59) < left <= timedelta(hours=24)
    row = AuditLog.objects.get(action="drift.acknowledge")
    assert row.reason == "rack 7 is being recabled" and row.actor_name == "ops-admin"


def test_other_actions_ask_for_a_reason_but_no_expiry(
    ops: Any, ledger: dict[str, DriftRecord]
) -> None:
    rec = ledger["warning"]
    chosen = {"action": "mark_manual_intervention", "_selected_action": [rec.pk]}
    asked = ops.post(LIST, chosen).content.decode()
    assert 'name="reason"' in asked and 'name="expires_in_hours"' not in asked
    ops.post(LIST, {**chosen, "post": "yes", "reason": "needs a site visit"})
    rec.refresh_from_db()
    assert rec.state == "manual_intervention"
    assert AuditLog.objects.get().reason == "needs a site visit"


def test_the_evidence_page_is_tables_with_the_json_one_click_away(ops: Any) -> None:
    """docs/admin.md, "Evidence": the report's checks, MAAS's events and the timeline read as
    tables; server text is escaped; the JSON is under each, whole."""
    from maas_domain.models import QuarantineEvidence
    from tests.factories import make_node

    node = make_node(make_site(), state="quarantined")
    evidence = QuarantineEvidence.objects.create(
        node=node, kind="hardware_nonconformant", workflow_kind="onboarding", workflow_id=1,
        maas_system_id="abc123", reason="4 GPUs found, the SKU states 8",
        report={"conformant": False, "checks": [
            {"requirement": "gpu.count", "expected": 8, "observed": 4, "passed": False}]},
        maas_events=[{"created": "2024-05-01T20:00:00", "level": "ERROR",
                      "description": "<script>alert(1)</script>"}],
        timeline=[{"at": "2024-05-01T20:00:01+00:00", "kind": "stage.failed",
                   "message": "4 GPUs found"}],
    )  # fmt: skip
    html = ops.get(f"/admin/maas_domain/quarantineevidence/{evidence.pk}/change/").content.decode()
    checks = html[html.index("<th>checks</th>") :]
    checks = checks[: checks.index("</table>")]
    for header in ("requirement", "expected", "observed", "passed"):
        assert f"<th>{header}</th>" in checks  # a column per key (jsonb orders them its way)
    assert '<td><span class="wf-wrap">gpu.count</span></td>' in checks and "<td>no</td>" in checks
    assert "<th>description</th>" in html and "<th>message</th>" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count('<details class="wf-json"><summary>JSON</summary>') == 3
    assert "&quot;requirement&quot;: &quot;gpu.count&quot;" in html  # the JSON, whole

"""Workflow admin pages (onboarding through the generic WorkflowAdmin): the page shows what an
operator needs, offers only allowed verbs, confirms destructive ones, and audits everything."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from maas_domain.models import AuditLog
from onboarding.models import Onboarding, OnboardingBatch, OnboardingEvent
from tests.factories import make_onboarding, make_profile, make_site, make_sku

pytestmark = pytest.mark.django_db
LIST = "/admin/onboarding/onboarding/"


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def failed_onboarding(**kw: Any) -> Onboarding:
    site = kw.pop("site", None) or make_site()
    wf = make_onboarding(
        site,
        state="failed",
        stage="deploy",
        checkpoint="payload",
        failure_class="curtin",
        reason="curtin failed: disk not found",
        site_bundle_version="2024.06.1",
        agent_bootstrap_version="0.9.3",
        **kw,
    )
    for kind, message, data in [
        ("stage.started", "deploy started", {}),
        ("maas.observed", "MAAS: Failed deployment", {"status": 11}),
        (
            "retry.decision",
            "deploy failed, classified curtin: no retry",
            {"classification": "curtin"},
        ),
        ("stage.failed", "curtin failed: disk not found", {}),
    ]:
        OnboardingEvent.objects.create(
            onboarding=wf, kind=kind, stage="deploy", message=message, data=data
        )
    return wf


def test_workflow_page_shows_state_stage_timeline_versions_and_allowed_verbs(ops: Any) -> None:
    wf = failed_onboarding()
    page = ops.get(f"{LIST}{wf.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'class="wf-badge wf-badge-failed"' in html
    assert 'id="wf-stage">deploy<' in html
    assert "curtin failed: disk not found" in html
    assert "2024.06.1" in html and "0.9.3" in html
    order = [html.index(k) for k in ("deploy started", "MAAS: Failed deployment", "classified")]
    assert order == sorted(order)
    assert "classification=curtin" in html
    offered = {
        v
        for v in ("retry", "resume", "rerun", "restart-clean", "adopt", "cancel")
        if f'data-verb="{v}"' in html
    }
    assert offered == {"retry", "resume", "rerun", "restart-clean", "adopt"}  # no cancel: failed


def test_retry_button_calls_the_verb_and_is_audited_with_the_operator(ops: Any) -> None:
    wf = failed_onboarding()
    response = ops.post(f"{LIST}{wf.pk}/verb/retry/", {"reason": "disk replaced"})
    assert response.status_code == 302
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.attempt) == ("pending", "deploy", 2)
    row = AuditLog.objects.get(action="onboarding.retry", target_id=str(wf.pk))
    assert (row.actor_name, row.reason) == ("ops-admin", "disk replaced")
    event = wf.events.get(kind="operator.retry")
    assert event.actor_name == "ops-admin" and "disk replaced" in event.message
    page = ops.get(f"{LIST}{wf.pk}/change/").content.decode()
    assert "retry applied by ops-admin" in page.lower()


def test_a_verb_not_allowed_changes_nothing_and_says_why(ops: Any) -> None:
    wf = failed_onboarding()
    response = ops.post(f"{LIST}{wf.pk}/verb/cancel/", {"reason": "x", "confirmed": "yes"})
    assert response.status_code == 302
    wf.refresh_from_db()
    assert wf.state == "failed"
    assert not AuditLog.objects.filter(action="onboarding.cancel").exists()
    page = ops.get(response["Location"]).content.decode()
    assert "cancel refused" in page.lower() and "not allowed while the workflow is failed" in page


def test_destructive_verb_needs_the_confirmation_page_and_a_reason(ops: Any) -> None:
    wf = failed_onboarding()
    confirm = ops.get(f"{LIST}{wf.pk}/verb/restart-clean/")
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert "nothing has changed yet" in html  # the dry-run plan:
    assert "delete_machine (if this workflow created it)" in html
    # a POST without the reason (or without the confirmation) changes nothing
    refused = ops.post(f"{LIST}{wf.pk}/verb/restart-clean/", {"confirmed": "yes", "reason": " "})
    assert refused.status_code == 400 and "Give a reason" in refused.content.decode()
    refused = ops.post(f"{LIST}{wf.pk}/verb/restart-clean/", {"reason": "disk swapped"})
    assert refused.status_code == 400
    wf.refresh_from_db()
    assert wf.state == "failed" and not AuditLog.objects.filter(action__contains="restart").exists()
    done = ops.post(
        f"{LIST}{wf.pk}/verb/restart-clean/", {"confirmed": "yes", "reason": "disk swapped"}
    )
    assert done.status_code == 302
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.attempt) == ("pending", "reset", 2)
    row = AuditLog.objects.get(action="onboarding.restart-clean")
    assert (row.actor_name, row.reason) == ("ops-admin", "disk swapped")


def test_bulk_retry_applies_to_allowed_rows_and_reports_the_others(ops: Any) -> None:
    site = make_site()
    a, b = failed_onboarding(site=site), failed_onboarding(site=site)
    ok = make_onboarding(site, state="succeeded", stage="complete")
    response = ops.post(
        LIST,
        {"action": "verb_retry", "_selected_action": [a.pk, b.pk, ok.pk]},
        follow=True,
    )
    html = response.content.decode()
    assert f"retry applied to 2: {a.pk}, {b.pk}" in html.lower()
    assert f"{ok.pk} (succeeded)" in html
    states = dict(Onboarding.objects.values_list("pk", "state"))
    assert (states[a.pk], states[b.pk], states[ok.pk]) == ("pending", "pending", "succeeded")
    assert AuditLog.objects.filter(action="onboarding.retry", actor_name="ops-admin").count() == 2


def test_bulk_destructive_action_goes_through_confirmation(ops: Any) -> None:
    site = make_site()
    a, b = failed_onboarding(site=site), failed_onboarding(site=site)
    first = ops.post(LIST, {"action": "verb_restart_clean", "_selected_action": [a.pk, b.pk]})
    assert first.status_code == 200 and "Confirm restart-clean" in first.content.decode()
    assert set(Onboarding.objects.values_list("state", flat=True)) == {"failed"}
    ops.post(
        LIST,
        {
            "action": "verb_restart_clean",
            "_selected_action": [a.pk, b.pk],
            "confirmed": "yes",
            "reason": "rack re-cabled",
        },
    )
    assert set(Onboarding.objects.values_list("state", flat=True)) == {"pending"}
    reasons = set(
        AuditLog.objects.filter(action="onboarding.restart-clean").values_list("reason", flat=True)
    )
    assert reasons == {"rack re-cabled"}


def test_list_offers_only_verbs_allowed_from_the_filtered_state(ops: Any) -> None:
    failed_onboarding()
    html = ops.get(f"{LIST}?state__exact=succeeded").content.decode()
    assert 'value="verb_rerun"' in html and 'value="verb_retry"' not in html
    html = ops.get(LIST).content.decode()
    assert 'value="verb_retry"' in html and 'value="verb_cancel"' in html


def test_attention_filter_shows_what_is_stuck(ops: Any) -> None:
    site = make_site()
    stuck = failed_onboarding(site=site)
    make_onboarding(site, state="succeeded", stage="complete", hostname="fine-1")
    html = ops.get(f"{LIST}?attention=operator").content.decode()
    assert stuck.hostname in html and "fine-1" not in html


@pytest.mark.parametrize("path", [LIST, "/admin/onboarding/onboardingbatch/"])
def test_list_query_count_does_not_grow_with_page_size(ops: Any, path: str) -> None:
    site = make_site()
    profile, sku = make_profile(site), make_sku()
    batch = OnboardingBatch.objects.create(
        site=site, profile=profile, sku=sku, size=120, created_by="x", correlation_id="c"
    )
    for i in range(120):
        make_onboarding(
            site,
            profile=profile,
            sku=sku,
            batch=batch,
            hostname=f"n{i}",
            state="failed",
            failure_class="curtin",
            reason="r",
        )
    for _ in range(110):
        OnboardingBatch.objects.create(
            site=site, profile=profile, sku=sku, size=1, created_by="x", correlation_id="c"
        )
    counts = []
    for per_page in (10, 100):
        from onboarding.admin import OnboardingAdmin, OnboardingBatchAdmin

        for cls in (OnboardingAdmin, OnboardingBatchAdmin):
            cls.list_per_page = per_page
        try:
            with CaptureQueriesContext(connection) as ctx:
                response = ops.get(path)
            assert response.status_code == 200
            counts.append(len(ctx.captured_queries))
        finally:
            for cls in (OnboardingAdmin, OnboardingBatchAdmin):
                cls.list_per_page = 50 if cls is OnboardingAdmin else 100
    assert counts[0] == counts[1], counts


def test_batch_page_shows_counts_and_failed_nodes_with_reasons(ops: Any) -> None:
    site = make_site()
    profile, sku = make_profile(site), make_sku()
    batch = OnboardingBatch.objects.create(
        site=site, profile=profile, sku=sku, size=4, created_by="ops", correlation_id="c"
    )
    common = {"profile": profile, "sku": sku, "batch": batch}
    make_onboarding(site, state="succeeded", stage="complete", **common)
    make_onboarding(site, state="succeeded", stage="complete", **common)
    make_onboarding(site, state="running", stage="commission", **common)
    bad = make_onboarding(
        site,
        state="failed",
        stage="discover",
        failure_class="ambiguous",
        reason="two machines match",
        hostname="c07u99",
        **common,
    )
    html = ops.get(f"/admin/onboarding/onboardingbatch/{batch.pk}/change/").content.decode()
    assert 'data-state="succeeded"><td><span class="wf-badge wf-badge-succeeded"' in html
    assert "two machines match" in html and "c07u99" in html
    assert f"/admin/onboarding/onboarding/{bad.pk}/change/" in html
    listing = ops.get("/admin/onboarding/onboardingbatch/").content.decode()
    assert "2 succeeded, 1 failed, 1 in progress, 0 queued" in listing


def test_start_form_calls_the_service_and_shows_its_refusal(ops: Any) -> None:
    site = make_site()  # never probed: the service's guardrail refuses
    profile, sku = make_profile(site), make_sku()
    body = {
        "site": site.pk,
        "profile": profile.pk,
        "sku": sku.pk,
        "hostname": "c07u31",
        "ipmi_ip": "10.10.7.31",
    }
    response = ops.post(f"{LIST}add/", body)
    assert response.status_code == 400
    assert "site probe is unknown" in response.content.decode()
    bad = ops.post(f"{LIST}add/", {**body, "hostname": "Not A Host!", "ipmi_ip": "10.1"})
    assert bad.status_code == 400
    assert not Onboarding.objects.exists() and not AuditLog.objects.exists()


def test_diagnostics_fragment_without_a_machine(ops: Any) -> None:
    wf = failed_onboarding()
    html = ops.get(f"{LIST}{wf.pk}/diagnostics/").content.decode()
    assert "Diagnostics unavailable: no MAAS machine yet" in html


def test_kind_specific_operation_is_offered_confirmed_and_run(ops: Any, monkeypatch: Any) -> None:
    """How decommission's force-release plugs in: an Operation on the kind's admin."""
    from django.db import transaction

    from maas_domain import audit
    from onboarding.admin import OnboardingAdmin
    from workflows.admin import Operation

    calls: list[tuple[int, str, str]] = []

    def force_release(request: Any, wf: Any, reason: str) -> Any:  # stands in for a service
        with transaction.atomic():
            calls.append((wf.pk, request.user.get_username(), reason))
            audit.record(actor=request.user, action="x.force_release", target=wf, reason=reason)
        return wf

    op = Operation(
        "force-release",
        run=force_release,
        allowed=lambda wf: wf.state == "failed",
        help="Release the allocation without draining.",
        maas_calls=("POST op=release (force)",),
    )
    monkeypatch.setattr(OnboardingAdmin, "operations", (op,))
    wf = failed_onboarding()
    done = make_onboarding(wf.site, state="succeeded", stage="complete")
    assert 'data-verb="force-release"' in ops.get(f"{LIST}{wf.pk}/change/").content.decode()
    assert 'data-verb="force-release"' not in ops.get(f"{LIST}{done.pk}/change/").content.decode()
    confirm = ops.get(f"{LIST}{wf.pk}/verb/force-release/").content.decode()
    assert "POST op=release (force)" in confirm and "Release the allocation" in confirm
    assert ops.post(f"{LIST}{wf.pk}/verb/force-release/", {"reason": "r"}).status_code == 400
    ops.post(f"{LIST}{wf.pk}/verb/force-release/", {"reason": "stuck lease", "confirmed": "yes"})
    ops.post(f"{LIST}{done.pk}/verb/force-release/", {"reason": "no", "confirmed": "yes"})
    assert calls == [(wf.pk, "ops-admin", "stuck lease")]
    assert 'value="verb_force_release"' in ops.get(LIST).content.decode()


def test_search_box_finds_by_hostname_system_id_correlation_id_and_number(ops: Any) -> None:
    site = make_site()
    rows = {  # no digits in the text, so a number can only match an id
        "rack-a-top": make_onboarding(site, hostname="rack-a-top", maas_system_id="abcxyz"),
        "rack-a-low": make_onboarding(site, hostname="rack-a-low", correlation_id="req-fa"),
        "rack-b-top": make_onboarding(site, hostname="rack-b-top", maas_system_id="uvwqrs"),
    }

    def shown(term: str) -> set[str]:
        page = ops.get(LIST, {"q": term})
        assert page.status_code == 200, term
        html = page.content.decode()
        return {name for name in rows if f">{name}<" in html}

    assert shown("RACK-A") == {"rack-a-top", "rack-a-low"}  # substring, any case
    assert shown("CXY") == {"rack-a-top"}  # MAAS system id substring
    assert shown("req-fa") == {"rack-a-low"}  # correlation id: exact only
    assert shown("req-f") == set()
    assert shown(str(rows["rack-b-top"].pk)) == {"rack-b-top"}  # a number is also an id
    assert shown(f" {rows['rack-b-top'].pk} ") == {"rack-b-top"}
    for hostile in ["9" * 30, "\u00b2", "' OR 1=1 --"]:
        assert shown(hostile) == set(), hostile
    shown("rack\x00")  # a NUL never reaches PostgreSQL as a 500
    assert shown("%") == set() and shown("_") == set()  # LIKE wildcards are literal

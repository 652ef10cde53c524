"""/api/v1/admin/maas-sites: create, list, read, patch, disable."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite
from tests.factories import make_site

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/maas-sites"


def site_body(**overrides: Any) -> dict[str, Any]:
    body = {"name": "lab-east", "maas_url": "http://maas.lab.test:5240/MAAS/"}
    body.update(overrides)
    return body


def test_create_site_answers_201_and_audits(api: APIClient) -> None:
    response = api.post(
        URL,
        site_body(policy={"erase_mode": "secure", "stage_timeouts": {"deploy": 5400}}),
        format="json",
        HTTP_X_CORRELATION_ID="req-123",
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["name"] == "lab-east"
    assert data["status"] == "active"
    assert data["health"] == "unknown"
    assert data["policy"] == {"erase_mode": "secure", "stage_timeouts": {"deploy": 5400}}
    assert data["effective_policy"]["erase_mode"] == "secure"
    assert data["effective_policy"]["stage_timeouts"]["deploy"] == 5400
    assert data["effective_policy"]["stage_timeouts"]["commission"] == 3600
    assert data["policy_sources"]["erase_mode"] == "site"
    assert response["ETag"] == '"1"'
    assert response["X-Correlation-ID"] == "req-123"
    row = AuditLog.objects.get()
    assert (row.action, row.actor_name, row.target_id) == (
        "maas_site.create",
        "ops-admin",
        str(data["id"]),
    )
    assert row.correlation_id == "req-123"
    assert row.before is None
    assert row.after["name"] == "lab-east"


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (site_body(name=""), "name", "blank"),
        (site_body(name="Bad Name!"), "name", "slug"),
        (site_body(maas_url="not a url"), "maas_url", "valid URL"),
        ({"name": "x"}, "maas_url", "required"),
        (site_body(pxe_subnet="10.0.0.1/24"), "pxe_subnet", "host bits"),
        (site_body(status="paused"), "status", "valid choice"),
        (site_body(policy={"erase_mode": "shred"}), "policy.erase_mode", "one of"),
        (site_body(policy={"nope": 1}), "policy.nope", "Unknown policy field"),
        (site_body(policy=[1]), "policy", "object"),
        (site_body(surprise=True), "surprise", "Unknown field"),
        (site_body(health="healthy"), "health", "read-only"),
    ],
)
def test_bad_input_is_400_with_field_and_changes_nothing(
    api: APIClient, body: dict[str, Any], field: str, reason: str
) -> None:
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, response.json()
    data = response.json()
    assert data["error"] == "validation_error"
    assert field in data["fields"], data
    assert reason.lower() in " ".join(data["fields"][field]).lower()
    assert not MaasSite.objects.exists()
    assert not AuditLog.objects.exists()


def test_malformed_json_is_400(api: APIClient) -> None:
    response = api.post(URL, data="{nope", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"


def test_duplicate_name_is_409_and_writes_no_audit(api: APIClient) -> None:
    make_site(name="lab-east")
    response = api.post(URL, site_body(), format="json")
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]
    assert MaasSite.objects.count() == 1
    assert not AuditLog.objects.exists()


def test_read_one_and_404(api: APIClient) -> None:
    site = make_site(name="lab-west")
    response = api.get(f"{URL}/{site.pk}")
    assert response.status_code == 200
    assert response.json()["name"] == "lab-west"
    assert response.json()["credentials"] == {
        "maas_api_key": None,
        "ipmi": None,
        "power_override_count": 0,
    }
    missing = api.get(f"{URL}/999999")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


def test_list_filters_and_paginates(api: APIClient) -> None:
    for i in range(7):
        make_site(name=f"rack-{i}", status="disabled" if i % 2 else "active")
    make_site(name="other")
    page = api.get(URL, {"limit": 3, "offset": 0}).json()
    assert page["count"] == 8
    assert len(page["results"]) == 3
    assert page["next"]
    assert "offset=3" in page["next"]
    names = [
        s["name"] for s in api.get(URL, {"name": "rack", "status": "disabled"}).json()["results"]
    ]
    assert names == ["rack-1", "rack-3", "rack-5"]
    bad = api.get(URL, {"status": "paused"})
    assert bad.status_code == 400
    assert "status" in bad.json()["fields"]


def _count_queries(api: APIClient, url: str, params: dict[str, Any]) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = api.get(url, params)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_list_uses_constant_queries_whatever_the_page_size(api: APIClient) -> None:
    from maas_domain.models import SiteCredential

    for i in range(30):
        site = make_site(name=f"s-{i:02d}")
        SiteCredential.objects.create(site=site, kind="maas_api_key", path="x", version=1)
    api.get(URL)  # warm-up: token last_used_at update happens once a minute
    small = _count_queries(api, URL, {"limit": 1})
    large = _count_queries(api, URL, {"limit": 30})
    assert small == large
    assert large <= 5


def test_patch_merges_policy_and_bumps_revision(api: APIClient) -> None:
    site = make_site(policy={"erase_mode": "secure", "deploy_retry_limit": 2})
    response = api.patch(
        f"{URL}/{site.pk}",
        {"description": "east hall", "policy": {"erase_mode": None, "auto_claim_new": True}},
        format="json",
    )
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["policy"] == {"deploy_retry_limit": 2, "auto_claim_new": True}
    assert data["effective_policy"]["erase_mode"] == "quick"
    assert data["description"] == "east hall"
    assert data["revision"] == 2
    row = AuditLog.objects.get(action="maas_site.update")
    assert row.before["policy"] == {"erase_mode": "secure", "deploy_retry_limit": 2}
    assert row.after["policy"] == {"deploy_retry_limit": 2, "auto_claim_new": True}


def test_patch_with_bad_policy_changes_nothing(api: APIClient) -> None:
    site = make_site(policy={"erase_mode": "secure"})
    response = api.patch(f"{URL}/{site.pk}", {"policy": {"deploy_retry_limit": -1}}, format="json")
    assert response.status_code == 400
    assert "policy.deploy_retry_limit" in response.json()["fields"]
    site.refresh_from_db()
    assert site.policy == {"erase_mode": "secure"}
    assert site.revision == 1
    assert not AuditLog.objects.exists()


def test_patch_with_stale_if_match_is_409(api: APIClient) -> None:
    site = make_site()
    first = api.patch(f"{URL}/{site.pk}", {"description": "a"}, format="json", HTTP_IF_MATCH='"1"')
    assert first.status_code == 200
    assert first["ETag"] == '"2"'
    stale = api.patch(f"{URL}/{site.pk}", {"description": "b"}, format="json", HTTP_IF_MATCH='"1"')
    assert stale.status_code == 409
    assert stale.json()["error"] == "revision_mismatch"
    assert stale.json()["current_revision"] == 2
    site.refresh_from_db()
    assert site.description == "a"
    bad = api.patch(f"{URL}/{site.pk}", {"description": "c"}, format="json", HTTP_IF_MATCH="abc")
    assert bad.status_code == 400


def test_patch_rename_onto_existing_name_is_409(api: APIClient) -> None:
    make_site(name="taken")
    site = make_site(name="mine")
    response = api.patch(f"{URL}/{site.pk}", {"name": "taken"}, format="json")
    assert response.status_code == 409
    site.refresh_from_db()
    assert site.name == "mine"


def test_patch_unknown_site_is_404(api: APIClient) -> None:
    assert api.patch(f"{URL}/424242", {"description": "x"}, format="json").status_code == 404


def test_delete_disables_and_audits(api: APIClient) -> None:
    site = make_site()
    response = api.delete(f"{URL}/{site.pk}")
    assert response.status_code == 200
    assert response.json()["status"] == "disabled"
    site.refresh_from_db()
    assert site.status == "disabled"
    assert AuditLog.objects.filter(action="maas_site.disable", target_id=str(site.pk)).count() == 1
    assert api.delete(f"{URL}/424242").status_code == 404


def test_trailing_slash_is_accepted(api: APIClient) -> None:
    assert api.get(URL + "/").status_code == 200


def test_site_with_open_workflows_cannot_be_disabled(api: APIClient) -> None:
    from tests.factories import make_onboarding

    site = make_site()
    running = make_onboarding(site, hostname="c07u31", state="running")
    make_onboarding(site, hostname="c07u32", state="succeeded")
    response = api.delete(f"{URL}/{site.pk}")
    assert response.status_code == 409
    body = response.json()
    assert body["open_workflows"] == [
        {"kind": "onboarding", "id": running.pk, "hostname": "c07u31", "state": "running"}
    ]
    # the PATCH route to the same change is guarded the same way
    assert api.patch(f"{URL}/{site.pk}", {"status": "disabled"}, format="json").status_code == 409
    site.refresh_from_db()
    assert site.status == "active"
    assert not AuditLog.objects.exists()
    type(running).objects.filter(pk=running.pk).update(state="cancelled")  # it ended meanwhile
    assert api.delete(f"{URL}/{site.pk}").status_code == 200


@pytest.mark.parametrize("bad", ["-x-", "Bad Host;rm", "c07u40\n", " c07u40", "a" * 64, "x_y"])
def test_the_hostname_field_matches_the_whole_value_and_never_trims(bad: str) -> None:
    """The serializer alone (no service behind it) refuses what the validator refuses."""
    from maas_domain.api.serializers import SiteSerializer

    body = SiteSerializer(data=site_body(approved_hosts=["ok-1", bad]))
    assert not body.is_valid()
    assert "approved_hosts" in body.errors


def test_the_published_hostname_pattern_is_anchored() -> None:
    from tests.support.openapi import openapi_document

    doc = openapi_document()
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str) and "[a-z0-9-]{0,61}" in pattern:
                found.append(pattern)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    assert found and all(p.startswith("^") and p.endswith("$") for p in found), found


# -- regions (docs/operations.md, "Regions") -------------------------------------------------------


def test_a_site_is_created_in_a_region_and_lists_by_it(api: APIClient) -> None:
    response = api.post(URL, site_body(region="east"), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["region"] == "east"
    assert AuditLog.objects.get().after["region"] == "east"
    plain = api.post(URL, site_body(name="lab-plain", maas_url="http://maas2.lab.test:5240/MAAS/"),
                     format="json").json()  # fmt: skip
    assert plain["region"] == "default"  # today's sites: the default region
    names = [s["name"] for s in api.get(URL, {"region": "east"}).json()["results"]]
    assert names == ["lab-east"]


@pytest.mark.parametrize(
    "bad", ["east\n", "East", " east", "-east", "east-", "ea_st", "", "x" * 41, 12, None]
)
def test_a_region_that_is_not_a_slug_is_400_on_create_and_update(api: APIClient, bad: Any) -> None:
    response = api.post(URL, site_body(region=bad), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == "validation_error"
    assert "region" in response.json()["fields"]
    assert not MaasSite.objects.exists()
    site = make_site(region="east")
    response = api.patch(f"{URL}/{site.pk}", {"region": bad}, format="json")
    assert response.status_code == 400, response.json()
    assert "region" in response.json()["fields"]
    site.refresh_from_db()
    assert (site.region, site.revision) == ("east", 1)
    assert not AuditLog.objects.exists()


@pytest.mark.parametrize("state", ["running", "waiting", "cancelling"])
def test_moving_a_site_with_work_in_its_region_is_409_naming_the_work(
    api: APIClient, state: str
) -> None:
    from tests.factories import make_onboarding

    site = make_site(region="east")
    busy = make_onboarding(site, hostname="c07u31", state=state)
    make_onboarding(site, hostname="c07u32", state="succeeded")
    response = api.patch(f"{URL}/{site.pk}", {"region": "west"}, format="json")
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["open_work"] == [
        {"kind": "onboarding", "id": busy.pk, "hostname": "c07u31", "state": state}
    ]
    assert f"onboarding {busy.pk} ({state})" in body["detail"]
    assert "'east'" in body["detail"] and "'west'" in body["detail"]
    site.refresh_from_db()
    assert (site.region, site.revision) == ("east", 1)
    assert not AuditLog.objects.exists()
    # other changes to the same site are not held up by its work
    other = api.patch(f"{URL}/{site.pk}", {"description": "rack 7"}, format="json")
    assert other.status_code == 200


def test_moving_a_site_with_a_queued_reconcile_run_is_409(api: APIClient) -> None:
    from reconciliation.models import ReconcileRun

    site = make_site(region="east")
    run = ReconcileRun.objects.create(site=site, trigger="api")
    response = api.patch(f"{URL}/{site.pk}", {"region": "west"}, format="json")
    assert response.status_code == 409
    assert response.json()["open_work"] == [
        {"kind": "reconcile_run", "id": run.pk, "state": "queued"}
    ]


def test_pending_and_frozen_work_moves_with_the_site_and_runs_in_the_new_region(
    api: APIClient, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Nothing of a pending or manual-intervention workflow sits in a queue: the move is
    allowed, audited, and the workflow's first step goes to the new region's queue."""
    from config import celery_app
    from tests.factories import make_onboarding
    from workflows.scheduling import admit

    sent: list[tuple[str, str | None]] = []
    monkeypatch.setattr(
        celery_app, "send_task", lambda name, args=(), **kw: sent.append((name, kw.get("queue")))
    )
    site = make_site(region="east")
    pending = make_onboarding(site, hostname="c07u31", state="pending")
    make_onboarding(site, hostname="c07u32", state="manual_intervention")
    response = api.patch(f"{URL}/{site.pk}", {"region": "west"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["region"] == "west"
    row = AuditLog.objects.get()
    assert (row.action, row.before["region"], row.after["region"]) == (
        "maas_site.update",
        "east",
        "west",
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert admit(site.pk) == 1
    pending.refresh_from_db()
    assert pending.state == "running"
    assert sent == [("workflow.advance", "region-west")]


def test_moving_a_site_back_to_the_default_region(api: APIClient) -> None:
    site = make_site(region="east")
    response = api.patch(f"{URL}/{site.pk}", {"region": "default"}, format="json")
    assert response.status_code == 200
    site.refresh_from_db()
    assert site.region == "default"


# -- the probe of a site in a region (maas_domain/services/probe.py) -------------------------------


class ProbeQueue:
    """Region east has a live worker; what the probe sends is recorded, not sent, and each
    message is answered by the next of ``answers`` (none left: the worker never answers)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[Any, ...], Any]] = []
        self.answers: list[Any] = []

    def send_task(self, name: str, args: Any = (), **options: Any) -> Any:
        self.sent.append((name, tuple(args), options.get("queue")))
        return self

    def get(self, timeout: float) -> Any:
        if not self.answers:
            from celery.exceptions import TimeoutError

            raise TimeoutError("no answer")
        return self.answers.pop(0)

    def forget(self) -> None:
        pass


@pytest.fixture
def east_served(monkeypatch: pytest.MonkeyPatch) -> ProbeQueue:
    from config import celery_app
    from maas_domain import heartbeat

    queue = ProbeQueue()
    monkeypatch.setattr(heartbeat, "live_queues", lambda: {"celery": 1, "region-east": 1})
    monkeypatch.setattr(celery_app, "send_task", queue.send_task)
    return queue


def test_a_region_s_probe_is_sent_to_its_queue_and_a_refusal_comes_back_as_itself(
    api: APIClient, admin_user: Any, east_served: ProbeQueue
) -> None:
    from maas_domain.services.probe import probe_task

    site = make_site(region="east")
    # the worker's side, run here: a confirmation naming another URL is refused there...
    refused = probe_task(admin_user.pk, None, site.pk, "http://elsewhere/MAAS/", False)
    assert refused["error"] == "InvalidInput"
    # ...and the API answers with the same 400, field and reason
    east_served.answers.append(refused)
    body = {"confirm_maas_url": "http://elsewhere/MAAS/"}
    response = api.post(f"{URL}/{site.pk}/probe", body, format="json")
    assert response.status_code == 400, response.json()
    assert "confirm_maas_url" in response.json()["fields"]
    (name, args, queue) = east_served.sent[0]
    assert (name, queue) == ("sites.probe", "region-east")
    assert args[0] == admin_user.pk and args[2:] == (site.pk, "http://elsewhere/MAAS/", False)


def test_a_region_s_probe_that_no_worker_answers_in_time_is_503(
    api: APIClient, east_served: ProbeQueue
) -> None:
    site = make_site(region="east")
    response = api.post(f"{URL}/{site.pk}/probe", {}, format="json")
    assert response.status_code == 503
    assert response.json()["region"] == "east"
    assert "did not answer the probe" in response.json()["detail"]
    assert [(n, q) for n, _, q in east_served.sent] == [("sites.probe", "region-east")]


def test_a_default_region_probe_runs_in_the_api_as_before(
    api: APIClient, east_served: ProbeQueue
) -> None:
    site = make_site()  # an unreachable MAAS: failed checks, not an error
    response = api.post(f"{URL}/{site.pk}/probe", {}, format="json")
    assert response.status_code == 200
    assert response.json()["health"] == "unhealthy"
    assert east_served.sent == []


def test_production_refuses_an_http_maas_unless_the_site_allows_it(
    api: APIClient, settings: Any
) -> None:
    """The OAuth PLAINTEXT signature (the key's secret) and IPMI passwords cross the connection
    to MAAS: production took http:// for any site. Now it needs the site's own say-so."""
    settings.PRODUCTION = True
    http = {"name": "lab", "maas_url": "http://maas.test:5240/MAAS/"}
    refused = api.post(URL, http, format="json")
    assert refused.status_code == 400 and "maas_url" in refused.json()["fields"]
    assert "maas_allow_http" in refused.json()["fields"]["maas_url"][0]
    assert not MaasSite.objects.exists()
    allowed = api.post(URL, {**http, "maas_allow_http": True}, format="json")
    assert allowed.status_code == 201 and allowed.json()["maas_allow_http"] is True
    tls = api.post(URL, {"name": "dc", "maas_url": "https://maas.test/MAAS/"}, format="json")
    assert tls.status_code == 201 and tls.json()["maas_allow_http"] is False
    site = allowed.json()["id"]
    off = api.patch(f"{URL}/{site}", {"maas_allow_http": False}, format="json")
    assert off.status_code == 400 and "maas_url" in off.json()["fields"]
    assert MaasSite.objects.get(pk=site).maas_allow_http is True
    settings.PRODUCTION = False  # the embedded stack and its simulator speak http
    own = {"maas_url": "http://maas-embedded.test:5240/MAAS/"}  # one MAAS, one site
    lab = api.post(URL, {**http, **own, "name": "embedded"}, format="json")
    assert lab.status_code == 201, lab.content

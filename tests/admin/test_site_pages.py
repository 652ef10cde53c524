"""Site, profile, credential, SKU and read-only admin pages: writes go through the services,
secrets are never displayed, bad input changes nothing, only staff get in."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from maas_domain.admin_accounts import AuditLogAdmin
from maas_domain.admin_inventory import NodeAdmin
from maas_domain.admin_sites import MaasSiteAdmin
from maas_domain.models import AuditLog, MaasSite, Sku
from maas_domain.services.credentials import site_credentials_write
from tests.factories import make_node, make_onboarding, make_site
from tests.support.maas import API_KEY, Sim

pytestmark = pytest.mark.django_db
SITES = "/admin/maas_domain/maassite/"
SITE_FORM = {
    "name": "dc1",
    "description": "",
    "maas_url": "http://maas.test:5240/MAAS/",
    "maas_user": "",
    "verify_tls": "on",
    "pxe_subnet": "10.20.0.0/16",
    "status": "active",
    "policy": '{"deploy_retry_limit": 2}',
    "approved_hosts": "[]",
    "ca_bundle_pem": "",
    "node_api_url": "",
}


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def test_create_site_goes_through_the_service_and_is_audited(ops: Any) -> None:
    response = ops.post(f"{SITES}add/", SITE_FORM)
    assert response.status_code == 302, response.content.decode()[:2000]
    site = MaasSite.objects.get(name="dc1")
    assert site.policy == {"deploy_retry_limit": 2}
    row = AuditLog.objects.get(action="maas_site.create")
    assert row.actor_name == "ops-admin" and row.target_id == str(site.pk)


def test_a_second_site_on_a_used_maas_needs_the_other_named_on_the_form(ops: Any) -> None:
    """One MAAS, one site (docs/admin.md): the form says which site uses the MAAS and saves
    nothing until the operator names it in "Share this MAAS with"."""
    make_site(name="dc0", maas_url=SITE_FORM["maas_url"])
    response = ops.post(f"{SITES}add/", SITE_FORM)
    assert response.status_code == 200
    html = response.content.decode()
    assert "already used by site &#x27;dc0&#x27;" in html and "id_share_maas_with" in html
    assert not MaasSite.objects.filter(name="dc1").exists()
    response = ops.post(f"{SITES}add/", {**SITE_FORM, "share_maas_with": "dc0"})
    assert response.status_code == 302, response.content.decode()[:2000]
    row = AuditLog.objects.get(action="maas_site.create")
    assert row.reason == "shares its MAAS with dc0 (confirmed)"


def test_bad_policy_is_a_form_error_and_creates_nothing(ops: Any) -> None:
    response = ops.post(f"{SITES}add/", {**SITE_FORM, "policy": '{"erase_mode": "shred"}'})
    assert response.status_code == 200
    assert "policy.erase_mode: Must be one of" in response.content.decode()
    assert not MaasSite.objects.exists() and not AuditLog.objects.exists()


def test_policy_edit_is_a_merge_patch_and_a_stale_form_changes_nothing(ops: Any) -> None:
    ops.post(f"{SITES}add/", SITE_FORM)
    site = MaasSite.objects.get(name="dc1")
    form = {**SITE_FORM, "policy": '{"erase_mode": "quick"}', "expected_revision": site.revision}
    assert ops.post(f"{SITES}{site.pk}/change/", form).status_code == 302
    site.refresh_from_db()
    assert site.policy == {"erase_mode": "quick"} and site.revision == 2
    stale = {**form, "description": "late edit", "expected_revision": 1}
    response = ops.post(f"{SITES}{site.pk}/change/", stale, follow=True)
    assert "revision 1 is stale" in response.content.decode().lower()
    site.refresh_from_db()
    assert site.description == "" and site.revision == 2


def test_credentials_form_never_shows_a_value(ops: Any, settings: Any) -> None:
    site = make_site()
    secret_pw = "ipmi-S3cret-value"
    page = f"{SITES}{site.pk}/credentials/"
    bad = ops.post(page, {"maas_api_key": "not-a-key", "ipmi_password": secret_pw})
    assert bad.status_code == 400
    html = bad.content.decode()
    assert "Must be a MAAS API key" in html and "ipmi.username" not in html
    assert "not-a-key" not in html and secret_pw not in html
    assert not AuditLog.objects.exists()
    ok = ops.post(
        page, {"maas_api_key": API_KEY, "ipmi_username": "maas", "ipmi_password": secret_pw}
    )
    assert ok.status_code == 302
    for url in (page, f"{SITES}{site.pk}/change/", "/admin/maas_domain/sitecredential/"):
        html = ops.get(url).content.decode()
        assert secret_pw not in html and API_KEY not in html and API_KEY.split(":")[2] not in html
    html = ops.get(page).content.decode()
    assert "api_key" in html and "username, password" in html and "ops-admin" in html
    assert AuditLog.objects.get(action="maas_site.credentials.write").actor_name == "ops-admin"


def test_probe_now_button_runs_the_probe_and_shows_each_check(ops: Any, sim: Sim) -> None:
    site = make_site(maas_url=sim.url)
    site_credentials_write(
        actor=None,
        site=site,
        payload={"maas_api_key": API_KEY, "ipmi": {"username": "u", "password": "p"}},
    )
    response = ops.post(f"{SITES}{site.pk}/probe/", follow=True)
    html = response.content.decode()
    assert "Probe of" in html
    site.refresh_from_db()
    assert site.health in ("healthy", "degraded")
    for check in ("connectivity", "authentication", "power_credentials"):
        assert f'data-check="{check}"' in html
    assert AuditLog.objects.get(action="maas_site.probe").actor_name == "ops-admin"


def test_sku_edits_are_audited(ops: Any) -> None:
    body = {
        "code": "h100x8",
        "name": "8x H100",
        "gpu_model": "H100",
        "gpu_count": 8,
        "active": "on",
    }
    assert ops.post("/admin/maas_domain/sku/add/", body).status_code == 302
    sku = Sku.objects.get(code="h100x8")
    ops.post(f"/admin/maas_domain/sku/{sku.pk}/change/", {**body, "gpu_count": 4})
    actions = list(AuditLog.objects.order_by("id").values_list("action", "actor_name"))
    assert actions == [("sku.create", "ops-admin"), ("sku.update", "ops-admin")]


URLS = [
    SITES,
    f"{SITES}add/",
    "/admin/maas_domain/siteprofile/",
    "/admin/maas_domain/roceassignment/",
    "/admin/maas_domain/sku/",
    "/admin/maas_domain/node/",
    "/admin/maas_domain/auditlog/",
    "/admin/maas_domain/sitecredential/",
    "/admin/onboarding/onboarding/",
    "/admin/onboarding/onboarding/add/",
    "/admin/onboarding/onboardingbatch/",
]


def test_only_staff_reach_the_pages(client: Any, admin_user: Any) -> None:
    site = make_site()
    wf = make_onboarding(site, state="failed", stage="deploy")
    detail = [
        f"{SITES}{site.pk}/change/",
        f"{SITES}{site.pk}/credentials/",
        f"/admin/onboarding/onboarding/{wf.pk}/change/",
        f"/admin/onboarding/onboarding/{wf.pk}/diagnostics/",
        f"/admin/onboarding/onboarding/{wf.pk}/verb/restart-clean/",
    ]
    posts = [f"{SITES}{site.pk}/probe/", f"/admin/onboarding/onboarding/{wf.pk}/verb/retry/"]
    for url in URLS + detail:  # anonymous: to the login page
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    for url in posts:
        response = client.post(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    plain = get_user_model().objects.create_user("plain", password="x")
    client.force_login(plain)
    for url in URLS + detail + posts:
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    staff = get_user_model().objects.create_user("staff-no-perms", password="x", is_staff=True)
    client.force_login(staff)
    for url in [u for u in URLS if not u.endswith("add/")] + detail:
        assert client.get(url).status_code == 403, url
    for url in posts:
        assert client.post(url).status_code == 403, url
    wf.refresh_from_db()
    assert wf.state == "failed" and not AuditLog.objects.exists()
    client.force_login(admin_user)
    for url in URLS + detail[:3]:
        assert client.get(url).status_code == 200, url


@pytest.mark.parametrize(
    ("admin_cls", "url"),
    [
        (MaasSiteAdmin, SITES),
        (NodeAdmin, "/admin/maas_domain/node/"),
        (AuditLogAdmin, "/admin/maas_domain/auditlog/"),
    ],
)
def test_domain_lists_use_constant_queries(
    ops: Any, admin_cls: Any, url: str, admin_user: Any
) -> None:
    sites = [make_site() for _ in range(3)]
    for i in range(110):
        make_node(sites[i % 3])
        site_credentials_write(
            actor=admin_user,
            site=sites[i % 3],
            payload={"ipmi": {"username": "u", "password": "p"}},
        ) if i < 2 else None
    for i in range(110):
        make_site(name=f"extra-{i}")
    from django.db import transaction

    from maas_domain import audit

    with transaction.atomic():
        for i in range(110):
            audit.record(actor=admin_user, action="x.test", target=("t", i))
    counts = []
    for per_page in (10, 100):
        old = admin_cls.list_per_page
        admin_cls.list_per_page = per_page
        try:
            with CaptureQueriesContext(connection) as ctx:
                assert ops.get(url).status_code == 200
            counts.append(len(ctx.captured_queries))
        finally:
            admin_cls.list_per_page = old
    assert counts[0] == counts[1], counts


def test_the_site_page_says_when_no_live_worker_serves_its_region(
    ops: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from maas_domain import heartbeat

    site = make_site(region="east")
    make_onboarding(site, state="running")
    monkeypatch.setattr(heartbeat, "live_queues", lambda: {"celery": 1})
    page = ops.get(f"{SITES}{site.pk}/change/").content.decode()
    assert 'data-unserved="yes"' in page
    assert "No live worker serves this region: its 1 piece(s) of work wait" in page
    assert "celery -A config worker -Q region-east" in page
    monkeypatch.setattr(heartbeat, "live_queues", lambda: {"celery": 1, "region-east": 2})
    page = ops.get(f"{SITES}{site.pk}/change/").content.decode()
    assert 'data-unserved="no"' in page and "live workers: 2" in page
    assert "No live worker serves" not in page


def test_moving_a_site_in_the_admin_goes_through_the_service(ops: Any) -> None:
    ops.post(f"{SITES}add/", {**SITE_FORM, "region": "east"})
    site = MaasSite.objects.get(name="dc1")
    assert site.region == "east"
    busy = make_onboarding(site, state="waiting")
    form = {**SITE_FORM, "region": "west", "expected_revision": site.revision}
    response = ops.post(f"{SITES}{site.pk}/change/", form, follow=True)
    assert f"onboarding {busy.pk} (waiting)" in response.content.decode()
    site.refresh_from_db()
    assert site.region == "east"
    type(busy).objects.filter(pk=busy.pk).update(state="succeeded")
    assert ops.post(f"{SITES}{site.pk}/change/", form).status_code == 302
    site.refresh_from_db()
    assert site.region == "west"
    row = AuditLog.objects.filter(action="maas_site.update").get()
    assert (row.before["region"], row.after["region"]) == ("east", "west")
    # a form without the field keeps the region
    form = {**SITE_FORM, "description": "rack 7", "expected_revision": site.revision}
    assert ops.post(f"{SITES}{site.pk}/change/", form).status_code == 302
    site.refresh_from_db()
    assert (site.region, site.description) == ("west", "rack 7")


def test_a_region_that_is_not_a_slug_is_a_form_error(ops: Any) -> None:
    response = ops.post(f"{SITES}add/", {**SITE_FORM, "region": "East Coast"})
    assert response.status_code == 200
    assert "Not a valid region name" in response.content.decode()
    assert not MaasSite.objects.exists()


SURROGATE_JSON = ['{"\\ud800": 1}', '{"stage_timeouts": {"\\udfff": 5}}', '["a\\udc80"]']


@pytest.mark.parametrize("text", SURROGATE_JSON)
def test_a_lone_surrogate_in_a_json_field_is_a_form_error(ops: Any, text: str) -> None:
    """Django's JSON form field accepted ``"\\ud800"`` and the page then failed (500) rendering
    it back or storing it: the admin's JSON fields use the API's parser and its limits."""
    for field in ("policy", "approved_hosts", "payload_allowed_hosts"):
        response = ops.post(f"{SITES}add/", {**SITE_FORM, field: text})
        assert response.status_code == 200, (field, response.status_code)
        assert "lone surrogate" in response.content.decode(), field
    sku = {"code": "h100x8", "name": "8x H100", "gpu_model": "H100", "gpu_count": 8}
    response = ops.post("/admin/maas_domain/sku/add/", {**sku, "active": "on", "hardware": text})
    assert response.status_code == 200 and "lone surrogate" in response.content.decode()
    site = make_site()
    profile = {"site": site.pk, "name": "p", "distro_series": "jammy", "policy_overrides": text}
    response = ops.post("/admin/maas_domain/siteprofile/add/", profile)
    assert response.status_code == 200 and "lone surrogate" in response.content.decode()
    assert not AuditLog.objects.exists() and not Sku.objects.exists()
    assert list(MaasSite.objects.all()) == [site]


def test_every_json_field_of_an_admin_form_is_held_to_the_api_parser(admin_user: Any) -> None:
    """Every add and change form of our pages: a JSON field added later gets the same parser."""
    from django import forms
    from django.contrib import admin
    from django.test import RequestFactory

    from maas_domain.jsontext import JSONFormField

    request = RequestFactory().get("/")
    request.user = admin_user
    seen = 0
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label in ("auth", "django_celery_beat"):
            continue
        if not model_admin.has_add_permission(request):
            continue
        for name, field in model_admin.get_form(request).base_fields.items():
            if isinstance(field, forms.JSONField):
                seen += 1
                assert isinstance(field, JSONFormField), (model.__name__, name)
    assert seen >= 4

"""/api/v1/admin/maas-sites/{id}/profiles: create, list, read, patch, disable."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, SiteProfile
from tests.factories import make_profile, make_site

pytestmark = pytest.mark.django_db


def url(site_id: int, profile_id: int | None = None) -> str:
    base = f"/api/v1/admin/maas-sites/{site_id}/profiles"
    return f"{base}/{profile_id}" if profile_id else base


def test_create_profile_inherits_site_policy(api: APIClient) -> None:
    site = make_site(policy={"erase_mode": "secure", "deploy_retry_limit": 2})
    response = api.post(
        url(site.pk),
        {
            "name": "h100-jammy",
            "distro_series": "jammy",
            "architecture": "amd64/generic",
            "storage_layout": "lvm",
            "pxe_interface": "eno1",
            "pxe_subnet": "10.20.0.0/24",
            "policy_overrides": {"deploy_retry_limit": 0, "hardware_sync_required": True},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["site_id"] == site.pk
    eff = data["effective_policy"]
    assert eff["erase_mode"] == "secure"  # from the site
    assert eff["deploy_retry_limit"] == 0  # the profile wins
    assert eff["hardware_sync_required"] is True
    assert eff["auto_claim_new"] is False  # default
    assert data["policy_sources"]["erase_mode"] == "site"
    assert data["policy_sources"]["deploy_retry_limit"] == "profile"
    audit = AuditLog.objects.get(action="maas_profile.create")
    assert audit.target_id == str(data["id"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "p", "storage_layout": "zfs"}, "storage_layout"),
        ({"name": "p", "pxe_subnet": "10.0.0.0/33"}, "pxe_subnet"),
        ({"name": "p", "pxe_interface": "eth0; reboot"}, "pxe_interface"),
        ({"name": "p", "policy_overrides": {"erase_mode": "fast"}}, "policy_overrides.erase_mode"),
        ({"name": "p", "site_id": 3}, "site_id"),
        ({"name": "p", "user_data": "#!/bin/sh"}, "user_data"),
        ({}, "name"),
    ],
)
def test_bad_profile_input_is_400(api: APIClient, body: dict, field: str) -> None:
    site = make_site()
    response = api.post(url(site.pk), body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"]
    assert not SiteProfile.objects.exists()
    assert not AuditLog.objects.exists()


def test_duplicate_profile_name_on_same_site_is_409_but_fine_elsewhere(api: APIClient) -> None:
    site, other = make_site(), make_site()
    make_profile(site, name="gpu")
    assert api.post(url(site.pk), {"name": "gpu"}, format="json").status_code == 409
    assert api.post(url(other.pk), {"name": "gpu"}, format="json").status_code == 201


def test_profiles_of_unknown_site_or_other_site_are_404(api: APIClient) -> None:
    site, other = make_site(), make_site()
    profile = make_profile(other)
    assert api.get(url(424242)).status_code == 404
    assert api.post(url(424242), {"name": "x"}, format="json").status_code == 404
    assert api.get(url(site.pk, profile.pk)).status_code == 404
    assert (
        api.patch(url(site.pk, profile.pk), {"description": "x"}, format="json").status_code == 404
    )


def test_list_filters_and_constant_queries(api: APIClient) -> None:
    site = make_site()
    for i in range(20):
        make_profile(site, name=f"p{i:02d}", status="disabled" if i < 5 else "active")
    make_profile(make_site(), name="elsewhere")
    data = api.get(url(site.pk), {"status": "disabled"}).json()
    assert data["count"] == 5
    assert {p["site_id"] for p in data["results"]} == {site.pk}
    api.get(url(site.pk))
    counts = []
    for limit in (1, 20):
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(url(site.pk), {"limit": limit}).status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def test_patch_and_disable(api: APIClient) -> None:
    site = make_site()
    profile = make_profile(site, policy_overrides={"erase_mode": "none"})
    response = api.patch(
        url(site.pk, profile.pk),
        {"distro_series": "noble", "policy_overrides": {"erase_mode": None}},
        format="json",
        HTTP_IF_MATCH='"1"',
    )
    assert response.status_code == 200, response.json()
    assert response.json()["distro_series"] == "noble"
    assert response.json()["policy_overrides"] == {}
    stale = api.patch(
        url(site.pk, profile.pk), {"description": "x"}, format="json", HTTP_IF_MATCH='"1"'
    )
    assert stale.status_code == 409
    gone = api.delete(url(site.pk, profile.pk))
    assert gone.status_code == 200
    assert gone.json()["status"] == "disabled"
    assert list(
        AuditLog.objects.filter(target_id=str(profile.pk))
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["maas_profile.update", "maas_profile.disable"]


def test_profile_with_open_workflows_cannot_be_disabled(api: APIClient) -> None:
    from tests.factories import make_onboarding

    site = make_site()
    profile = make_profile(site)
    other = make_profile(site)
    make_onboarding(site, profile=profile, state="manual_intervention")
    response = api.delete(url(site.pk, profile.pk))
    assert response.status_code == 409
    assert response.json()["open_workflows"][0]["state"] == "manual_intervention"
    assert api.delete(url(site.pk, other.pk)).status_code == 200

"""Every admin API endpoint: anonymous callers get 401, authenticated non-staff get 403.

The table is built from the URL configuration itself, so a new endpoint is covered the moment
it is routed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient


def _sample(group: re.Match[str]) -> str:
    """A value for a named URL group: the first alternative of a choice, else an id."""
    body = group.group(1)
    return body.split("|")[0] if "|" in body else "1"


def _api_endpoints() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            regex = p.pattern.regex.pattern if hasattr(p.pattern, "regex") else str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + regex.lstrip("^"))
            elif isinstance(p, URLPattern):
                full = prefix + regex.lstrip("^")
                actions = getattr(p.callback, "actions", None)
                if not full.startswith("api/") or actions is None:
                    continue
                path = "/" + re.sub(r"\(\?P<\w+>([^)]*)\)", _sample, full)
                path = path.replace("/?$", "").replace("$", "")
                found.extend((method.upper(), path) for method in actions)

    walk(get_resolver().url_patterns, "")
    return found


ENDPOINTS = _api_endpoints()


def test_matrix_is_not_empty() -> None:
    paths = {p for _, p in ENDPOINTS}
    assert "/api/v1/admin/maas-sites" in paths
    assert "/api/v1/admin/maas-sites/1/roce-assignments/1" in paths
    assert len(ENDPOINTS) >= 12


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_anonymous_gets_401(anon_api: APIClient, method: str, path: str) -> None:
    response = anon_api.generic(method, path, data="{}", content_type="application/json")
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_non_staff_gets_403(user_api: APIClient, method: str, path: str) -> None:
    response = user_api.generic(method, path, data="{}", content_type="application/json")
    assert response.status_code == 403, response.content
    assert response.json()["error"] == "permission_denied"


@pytest.mark.django_db
def test_revoked_and_expired_tokens_are_refused(admin_user: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from maas_domain.services.tokens import api_token_create

    revoked, raw_revoked = api_token_create(actor=None, user=admin_user, name="old")
    revoked.revoked_at = timezone.now()
    revoked.save()
    expired, raw_expired = api_token_create(
        actor=None, user=admin_user, name="x", expires_in=timedelta(days=1)
    )
    expired.expires_at = timezone.now() - timedelta(seconds=1)
    expired.save()
    client = APIClient()
    for raw in (raw_revoked, raw_expired, "mcp_not-a-real-token"):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/v1/admin/maas-sites").status_code == 401


@pytest.mark.django_db
def test_tokens_are_stored_hashed(admin_user: Any) -> None:
    from maas_domain.auth import hash_token
    from maas_domain.models import ApiToken
    from maas_domain.services.tokens import api_token_create

    row, raw = api_token_create(actor=None, user=admin_user, name="ci")
    stored = ApiToken.objects.get(pk=row.pk)
    assert raw not in (stored.key_hash, stored.prefix)
    assert stored.key_hash == hash_token(raw)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert client.get("/api/v1/admin/maas-sites").status_code == 200


@pytest.mark.django_db
def test_staff_session_login_works_for_browsable_api(client: Any, admin_user: Any) -> None:
    client.force_login(admin_user)
    response = client.get("/api/v1/admin/maas-sites", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"maas-sites" in response.content.lower() or b"Site" in response.content


@pytest.mark.django_db
def test_unknown_api_path_is_json_404(api: APIClient) -> None:
    response = api.get("/api/v1/admin/no-such-thing")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.django_db
def test_non_json_bodies_are_refused(api: APIClient) -> None:
    response = api.post("/api/v1/admin/maas-sites", data="name=x", content_type="text/csv")
    assert response.status_code == 415

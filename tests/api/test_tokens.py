"""/tokens: a token is shown once, listed by prefix only, revoked for good; all audited."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from maas_domain.models import ApiToken, AuditLog

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/tokens"


def test_create_shows_the_token_once_and_it_works_until_revoked(api: APIClient) -> None:
    made = api.post(URL, {"name": "ci", "scope": "operate", "expires_in_days": 30}, format="json")
    assert made.status_code == 201, made.json()
    body = made.json()
    raw = body["token"]
    assert raw.startswith(body["prefix"]) and body["active"] and body["expires_at"]
    assert body["scope"] == "operate"
    listed = api.get(URL).content.decode()
    assert raw not in listed and '"token"' not in listed
    assert raw not in json.dumps(list(AuditLog.objects.values("before", "after", "reason")))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/admin/skus").status_code == 200
    revoked = api.post(f"{URL}/{body['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert client.get("/api/v1/admin/skus").status_code == 401
    again = api.post(f"{URL}/{body['id']}/revoke")
    assert again.status_code == 409  # already revoked: nothing changes
    actions = list(AuditLog.objects.order_by("id").values_list("action", flat=True))
    assert actions[-2:] == ["api_token.create", "api_token.revoke"]


@pytest.mark.parametrize(
    "body",
    [{"name": ""}, {"name": "a\nb"}, {"name": "x", "expires_in_days": 0},
     {"name": "x", "expires_in_days": 99999}, {"name": "x", "scope": "all"},
     {"name": "x", "expires_in_days": 3000}],
)  # fmt: skip
def test_bad_token_requests_are_400_and_create_nothing(api: APIClient, body: dict) -> None:
    before = ApiToken.objects.count()
    response = api.post(URL, body, format="json")
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert ApiToken.objects.count() == before


def test_unknown_token_is_404_and_tokens_are_admin_only(
    api: APIClient, user_api: APIClient
) -> None:
    assert api.post(f"{URL}/999999/revoke").status_code == 404
    assert user_api.get(URL).status_code == 403


def test_a_read_scoped_token_of_an_admin_sees_only_its_users_tokens(admin_user: object) -> None:
    """The token's scope bounds every check of the request, the service's own included."""
    from django.contrib.auth import get_user_model

    from tests.support.tokens import bearer_token

    other = get_user_model().objects.create_user("someone-else", is_staff=True)
    bearer_token(other, scope="admin", name="theirs")
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(admin_user, scope='read')}")
    names = {row["name"] for row in reader.get(URL).json()["results"]}
    assert "theirs" not in names and names
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(admin_user, scope='admin')}")
    assert "theirs" in {row["name"] for row in admin.get(URL).json()["results"]}

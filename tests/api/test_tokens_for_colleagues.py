"""Tokens for a colleague (docs/security.md, docs/admin.md "Tokens", docs/cli.md): an admin
makes, lists and revokes another user's token with a scope within that user's role and an
expiry, from the API and the admin pages; audited; the token is shown once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from maas_domain.models import ApiToken, AuditLog
from tests.factories import make_site

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/tokens"
PAGE = "/admin/maas_domain/apitoken/"


@pytest.fixture
def bob(db: None) -> Any:
    user = get_user_model().objects.create_user("bob", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    return user


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_an_admin_makes_a_colleague_a_token_that_acts_as_them(api: APIClient, bob: Any) -> None:
    made = api.post(URL, {"name": "bob-laptop", "user": "bob", "scope": "operate",
                          "expires_in_days": 7}, format="json")  # fmt: skip
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["user"], body["scope"], body["created_by"]) == ("bob", "operate", "ops-admin")
    token = ApiToken.objects.get(pk=body["id"])
    assert token.user == bob and (token.expires_at - token.created_at).days == 6  # 7 d, minus µs
    # it is bob's: what it does is audited under bob's name
    site = make_site()
    ran = bearer(body["token"]).post(
        "/api/v1/admin/reconciliation/run", {"site_id": site.pk}, format="json"
    )
    assert ran.status_code in (200, 201, 202), ran.json()
    assert AuditLog.objects.get(action="reconciliation.run").actor_name == "bob"
    # listed (filtered by user) without its value; the audit row names bob, never the token
    listed = api.get(URL, {"user": "bob"})
    assert [row["name"] for row in listed.json()["results"]] == ["bob-laptop"]
    assert body["token"] not in listed.content.decode()
    create = AuditLog.objects.get(action="api_token.create", target_id=str(token.pk))
    assert create.actor_name == "ops-admin" and create.after["user"] == "bob"
    assert body["token"] not in json.dumps([create.before, create.after, create.reason])
    revoked = api.post(f"{URL}/{token.pk}/revoke", {"reason": "left the team"}, format="json")
    assert revoked.status_code == 200
    assert bearer(body["token"]).get("/api/v1/admin/skus").status_code == 401


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        ({"user": "nobody"}, "user", "No such user"),
        ({"user": "bob", "scope": "admin"}, "scope", "bob's role allows operate"),
        ({"user": "idle"}, "user", "idle is not an active user"),
        ({"user": "loner"}, "scope", "allows nothing"),
        ({"user": "bob\u202e"}, "user", "bidirectional formatting character"),  # free text rule
        ({"user": ""}, "user", "blank"),
        ({"user": ["bob"]}, "user", "valid string"),
    ],
)
def test_a_token_nobody_could_use_as_asked_is_400_and_makes_nothing(
    api: APIClient, bob: Any, extra: dict[str, Any], field: str, says: str
) -> None:
    get_user_model().objects.create_user("idle", is_active=False).groups.add(
        Group.objects.get(name="maascp-read")
    )
    get_user_model().objects.create_user("loner")  # in no maascp group
    before = ApiToken.objects.count()
    response = api.post(URL, {"name": "t", **extra}, format="json")
    assert response.status_code == 400, response.json()
    assert says.lower() in " ".join(response.json()["fields"][field]).lower()
    assert ApiToken.objects.count() == before


@pytest.mark.parametrize("bad", ["%00", "a%00b", "x" * 151, "%ff%fe", "bob%1b[2J", ""])
def test_a_user_filter_no_user_name_could_be_is_400(api: APIClient, bad: str) -> None:
    response = api.get(f"{URL}?user={bad}")
    assert response.status_code == 400, response.content
    assert "user" in response.json()["fields"]


def test_only_an_admin_may_make_a_colleague_s_token(bob: Any) -> None:
    from tests.support.tokens import bearer_token

    get_user_model().objects.create_user("carol")
    response = bearer(bearer_token(bob, scope="operate")).post(
        URL, {"name": "t", "user": "carol"}, format="json"
    )
    assert response.status_code == 403
    assert not ApiToken.objects.filter(user__username="carol").exists()


# -- the admin pages ------------------------------------------------------------------------------


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def test_the_admin_makes_a_colleague_a_token_shown_once(ops: Any, bob: Any) -> None:
    form = ops.get(f"{PAGE}add/")
    assert form.status_code == 200 and 'value="bob"' in form.content.decode()
    made = ops.post(f"{PAGE}add/", {"user": "bob", "name": "bob-ci", "scope": "operate",
                                    "expires_in_days": "30"})  # fmt: skip
    assert made.status_code == 201, made.content.decode()[:3000]
    assert "no-store" in made["Cache-Control"]
    token = ApiToken.objects.get(name="bob-ci")
    html = made.content.decode()
    raw = html.split('id="token-value" class="wf-wrap">')[1].split("<")[0]
    assert raw.startswith(token.prefix) and "shown on this page only" in html
    assert bearer(raw).get("/api/v1/admin/skus").status_code == 200
    assert raw not in ops.get(PAGE).content.decode()  # never again
    row = AuditLog.objects.get(action="api_token.create", target_id=str(token.pk))
    assert row.actor_name == "ops-admin" and row.after["user"] == "bob"


def test_the_admin_form_names_a_scope_beyond_the_role_and_makes_nothing(ops: Any, bob: Any) -> None:
    response = ops.post(f"{PAGE}add/", {"user": "bob", "name": "x", "scope": "admin"})
    assert response.status_code == 400
    assert "bob&#x27;s role allows operate" in response.content.decode()
    assert not ApiToken.objects.filter(user=bob).exists()


def test_only_admins_are_offered_the_token_form(client: Any, bob: Any) -> None:
    client.force_login(bob)  # operate
    assert client.get(f"{PAGE}add/").status_code == 403
    assert (
        client.post(f"{PAGE}add/", {"user": "bob", "name": "x", "scope": "read"}).status_code == 403
    )
    assert not ApiToken.objects.exists()

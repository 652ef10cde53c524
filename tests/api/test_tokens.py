"""/tokens: a token is shown once, listed by prefix only, revoked for good; all audited."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.errors import InvalidInput
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


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def minted(client: APIClient, **body: object) -> Any:
    return client.post(URL, {"name": "child", **body}, format="json")


def test_a_token_cannot_mint_a_wider_or_longer_lived_token(admin_user: Any) -> None:
    """A 1-day admin token created a 365-day one; a read token an admin one."""
    from datetime import timedelta

    from django.utils import timezone

    from maas_domain.services.tokens import api_token_create

    _, short = api_token_create(
        actor=None, user=admin_user, name="1d", scope="admin", expires_in=timedelta(days=1)
    )
    longer = minted(bearer(short), scope="admin", expires_in_days=365)
    assert longer.status_code == 400 and "expires_in" in longer.json()["fields"]
    clamped = minted(bearer(short), scope="operate")  # no expiry asked: the parent's at most
    assert clamped.status_code == 201, clamped.content
    made = ApiToken.objects.get(pk=clamped.json()["id"])
    assert made.expires_at <= timezone.now() + timedelta(days=1)
    assert ApiToken.objects.filter(name="child").count() == 1
    # only admin-scoped tokens reach POST /tokens; the service holds any parent to its scope
    operate, _ = api_token_create(actor=None, user=admin_user, name="o", scope="operate")
    with pytest.raises(InvalidInput) as refused:
        api_token_create(actor=admin_user, user=admin_user, name="w", scope="admin", parent=operate)
    assert "scope" in refused.value.extra["fields"]


def test_children_die_with_their_parent(admin_user: object, api: APIClient) -> None:
    from maas_domain.services.tokens import api_token_create

    parent, raw = api_token_create(actor=None, user=admin_user, name="p", scope="admin")
    child = minted(bearer(raw), scope="admin").json()
    grandchild = minted(bearer(child["token"]), scope="read").json()
    assert bearer(grandchild["token"]).get("/api/v1/admin/skus").status_code == 200
    revoked = api.post(f"{URL}/{parent.pk}/revoke", {"reason": "leaked"}, format="json")
    assert revoked.status_code == 200
    for raw_token in (raw, child["token"], grandchild["token"]):
        assert bearer(raw_token).get("/api/v1/admin/skus").status_code == 401
    row = AuditLog.objects.filter(action="api_token.revoke").latest("id")
    assert sorted(row.after["revoked_children"]) == sorted([child["id"], grandchild["id"]])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pause", ["children_collected", "before_commit"])
@pytest.mark.parametrize("depth", [1, 2])
def test_a_token_minted_while_its_ancestor_is_being_revoked_dies_too(
    depth: int, pause: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack pass minted children through a token while it was being revoked (2 of 120
    survived, created up to 121 ms after): the revocation is held open here (right after it
    collected the children, or just before it commits), the minting runs during it, and
    whatever the order no child of the revoked token may stay live."""
    import threading

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from maas_domain.errors import DomainError
    from maas_domain.services import tokens
    from maas_domain.services.tokens import api_token_create, api_token_revoke

    user = get_user_model().objects.create_user("racer", is_superuser=True)
    root, _ = api_token_create(actor=None, user=user, name="root", scope="admin")
    through = root
    for level in range(depth - 1):
        through, _ = api_token_create(
            actor=user, user=user, name=f"l{level}", scope="admin", parent=through
        )
    revoking, release = threading.Event(), threading.Event()
    outcome: list[object] = []
    collect = tokens._descendants

    def collected_then_pause(token: ApiToken) -> list[int]:
        found = collect(token)
        if pause == "children_collected":
            revoking.set()
            release.wait(30)
        return found

    monkeypatch.setattr(tokens, "_descendants", collected_then_pause)

    def revoke() -> None:
        try:
            with transaction.atomic():
                api_token_revoke(actor=None, token_id=root.pk, reason="leaked")
                revoking.set()
                release.wait(30)
        finally:
            connection.close()

    def mint() -> None:
        try:  # ``through`` as the request's authentication read it: before the revocation
            outcome.append(
                api_token_create(actor=user, user=user, name="late", scope="read", parent=through)
            )
        except DomainError as refused:
            outcome.append(refused)
        finally:
            connection.close()

    revoker = threading.Thread(target=revoke)
    revoker.start()
    assert revoking.wait(30)
    minter = threading.Thread(target=mint)
    minter.start()
    minter.join(1.0)  # the old code committed the child here, inside the revocation's window
    release.set()
    revoker.join(30)
    minter.join(30)
    assert len(outcome) == 1
    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists(), outcome
    if isinstance(outcome[0], DomainError):
        assert outcome[0].status == 403 and "revoked" in str(outcome[0])

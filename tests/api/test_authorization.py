"""Authorization by action, the same in the API and the admin pages (docs/security.md, T8).

The table below says which action class each route needs; a route it does not name must need
``read`` for GET and ``admin`` for anything else (the fail-closed default), so a route added
later is checked the moment it is routed. Every route is called by every role.
"""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from maas_domain.models import ApiToken, AuditLog
from tests.factories import make_onboarding, make_site
from tests.support.routes import routes
from tests.support.tokens import bearer_token

pytestmark = pytest.mark.django_db
RANK = {"read": 1, "operate": 2, "admin": 3}
# (method, route name) -> the class it needs; verbs are listed per verb.
EXPECTED = {
    ("POST", "onboarding-list"): "operate",
    ("POST", "onboarding-batch"): "operate",
    ("POST", "onboarding-batch-resume"): "operate",  # continues work, like resume
    ("POST", "site-probe"): "operate",
    ("POST", "node-cordon"): "operate",  # protective; uncordon stays admin
    ("POST", "repair-requalify"): "operate",  # continues the repair's work
    ("POST", "reconciliation-run"): "operate",
    ("POST", "reconciliation-drift-resolve"): "operate",
    ("POST", "reconciliation-machine-drift-resolve"): "operate",
    ("POST", "node-decommission"): "admin",
    ("POST", "node-storage-cleanup"): "admin",
    ("POST", "site-credentials"): "admin",
    ("POST", "site-list"): "admin",
    ("PATCH", "site-detail"): "admin",
    ("DELETE", "site-detail"): "admin",
    ("PATCH", "profile-detail"): "admin",
}
VERBS = {
    "retry": "operate",
    "resume": "operate",
    "rerun": "operate",
    "adopt": "operate",
    "mark-manual-intervention": "operate",
    "restart-clean": "admin",
    "cancel": "admin",
}
ROLES = {
    # name: (group, token scope); rank is what the role may do
    "staff-view-only": (None, "admin"),
    "reader": ("maascp-read", "admin"),
    "operator": ("maascp-operate", "admin"),
    "admin": ("maascp-admin", "admin"),
    "admin-with-read-token": ("maascp-admin", "read"),
    "operator-with-operate-token": ("maascp-operate", "operate"),
}
ROLE_RANK = {
    "staff-view-only": 0,
    "reader": 1,
    "operator": 2,
    "admin": 3,
    "admin-with-read-token": 1,
    "operator-with-operate-token": 2,
}


def calls() -> list[tuple[str, str, str]]:
    """(method, path, class) for every admin API route; ids name no row (nothing changes)."""
    out = []
    for method, name, regex, _ in routes():
        if not regex.startswith("api/v1/admin/"):
            continue
        verbs = list(VERBS) if name.endswith("-verb") else [""]
        for verb in verbs:

            def sample(m: re.Match[str], verb: str = verb) -> str:
                return verb if m.group(1) == "verb" else "999999"

            path = "/" + re.sub(r"\(\?P<(\w+)>[^)]*\)", sample, regex)
            path = path.replace("/?$", "").replace("$", "")
            need = VERBS[verb] if verb else EXPECTED.get((method, name))
            if need is None:
                need = "read" if method in ("GET", "HEAD") else "admin"
            out.append((method, path, need))
    return out


CALLS = calls()


def client_for(role: str) -> APIClient:
    group, scope = ROLES[role]
    user = get_user_model().objects.create_user(f"u-{role}", password="x", is_staff=True)
    if group is None:  # staff with Django's view permissions only: no action class
        user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    else:
        user.groups.add(Group.objects.get(name=group))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope=scope)}")
    return client


def test_the_table_covers_every_workflow_verb_and_the_matrix_is_big() -> None:
    assert len(CALLS) >= 40
    assert {c for _, _, c in CALLS} == {"read", "operate", "admin"}


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_route_for_every_role(role: str) -> None:
    client = client_for(role)
    wrong = []
    for method, path, need in CALLS:
        response = client.generic(method, path, data="{}", content_type="application/json")
        denied = response.status_code in (401, 403)
        if denied != (ROLE_RANK[role] < RANK[need]):
            wrong.append((method, path, need, response.status_code))
    assert wrong == [], f"{role}: {wrong}"


# -- the admin pages follow the same rules ---------------------------------------------------------


def admin_client(client: Any, group: str) -> Any:
    user = get_user_model().objects.create_user(f"page-{group}", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("group", "retry", "cancel", "credentials"),
    [
        ("maascp-read", 403, 403, 403),
        ("maascp-operate", 302, 403, 403),
        ("maascp-admin", 302, 200, 200),
    ],
)
def test_admin_pages_offer_and_allow_by_the_same_classes(
    client: Any, group: str, retry: int, cancel: int, credentials: int
) -> None:
    site = make_site()
    wf = make_onboarding(site, state="failed", stage="deploy")
    c = admin_client(client, group)
    page = c.get(f"/admin/onboarding/onboarding/{wf.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert ("/verb/retry/" in html) == (retry != 403)
    assert ("/verb/restart-clean/" in html) == (cancel != 403)
    assert c.post(f"/admin/onboarding/onboarding/{wf.pk}/verb/retry/").status_code == retry
    # a destructive verb's confirmation page opens only for those allowed to run it
    confirm = c.get(f"/admin/onboarding/onboarding/{wf.pk}/verb/restart-clean/").status_code
    assert (confirm == 403) == (cancel == 403)
    assert c.get(f"/admin/maas_domain/maassite/{site.pk}/credentials/").status_code == credentials


# -- API tokens ------------------------------------------------------------------------------------


def test_tokens_expire_by_default_carry_a_scope_and_are_audited(admin_user: Any) -> None:
    from maas_domain.services.tokens import api_token_create, api_token_revoke

    token, raw = api_token_create(actor=admin_user, user=admin_user, name="ci")
    assert token.scope == "read"
    assert token.expires_at is not None
    assert timedelta(days=89) < token.expires_at - timezone.now() <= timedelta(days=90)
    row = AuditLog.objects.get(action="api_token.create")
    assert row.after["name"] == "ci" and row.after["scope"] == "read"
    assert raw not in str(row.after) and token.key_hash not in str(row.after)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/admin/maas-sites").status_code == 200
    assert client.post("/api/v1/admin/maas-sites", {}, format="json").status_code == 403
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None
    api_token_revoke(actor=admin_user, token_id=token.pk, reason="rotated")
    assert client.get("/api/v1/admin/maas-sites").status_code == 401
    revoked = AuditLog.objects.get(action="api_token.revoke")
    assert revoked.reason == "rotated"


def test_a_token_never_outlives_the_maximum(admin_user: Any) -> None:
    from maas_domain.errors import InvalidInput
    from maas_domain.services.tokens import api_token_create

    with pytest.raises(InvalidInput):
        api_token_create(
            actor=admin_user, user=admin_user, name="forever", expires_in=timedelta(days=10_000)
        )


def test_a_user_cannot_mint_or_revoke_tokens_for_someone_else(admin_user: Any) -> None:
    from maas_domain.errors import Forbidden
    from maas_domain.services.tokens import api_token_create, api_token_revoke

    other = get_user_model().objects.create_user("other", password="x")
    other.groups.add(Group.objects.get(name="maascp-operate"))
    with pytest.raises(Forbidden):
        api_token_create(actor=other, user=admin_user, name="steal", scope="admin")
    token, _ = api_token_create(actor=admin_user, user=admin_user, name="mine")
    with pytest.raises(Forbidden):
        api_token_revoke(actor=other, token_id=token.pk)


def test_the_command_creates_lists_and_revokes(admin_user: Any) -> None:
    out = StringIO()
    call_command(
        "api_token", "create", "--user", admin_user.username, "--scope", "operate", stdout=out
    )
    raw = out.getvalue().strip()
    token = ApiToken.objects.get(prefix=raw[:12])
    assert token.scope == "operate" and token.created_by == "system"
    listing = StringIO()
    call_command("api_token", "list", stdout=listing)
    assert token.prefix in listing.getvalue() and raw not in listing.getvalue()
    call_command("api_token", "revoke", str(token.pk), "--reason", "left", stdout=StringIO())
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by == "system"
    assert AuditLog.objects.filter(action="api_token.revoke", target_id=str(token.pk)).exists()


def test_every_audit_row_names_the_token_that_acted(admin_user: Any) -> None:
    from maas_domain.services.tokens import api_token_create

    token, raw = api_token_create(actor=admin_user, user=admin_user, name="bot", scope="admin")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.post(
        "/api/v1/admin/maas-sites",
        {"name": "dc7", "maas_url": "http://maas.test:5240/MAAS/"},
        format="json",
    )
    assert response.status_code == 201
    row = AuditLog.objects.get(action="maas_site.create")
    assert row.api_token_id == token.pk
    # a session (no token) leaves it empty, and the next request does not inherit it
    session = APIClient()
    session.force_login(admin_user)
    patched = session.patch(
        f"/api/v1/admin/maas-sites/{response.json()['id']}", {"description": "x"}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert AuditLog.objects.get(action="maas_site.update").api_token_id is None


def test_a_reader_sees_only_their_own_tokens_on_the_admin_page(client: Any) -> None:
    from tests.support.tokens import bearer_token

    other = get_user_model().objects.create_user("token-owner", is_staff=True)
    bearer_token(other, scope="admin", name="owner-token")
    page = admin_client(client, "maascp-read").get("/admin/maas_domain/apitoken/")
    assert page.status_code == 200
    assert "owner-token" not in page.content.decode()
    boss = get_user_model().objects.create_user("boss", password="x", is_staff=True)
    boss.groups.add(Group.objects.get(name="maascp-admin"))
    client.force_login(boss)
    assert "owner-token" in client.get("/admin/maas_domain/apitoken/").content.decode()

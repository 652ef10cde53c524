"""Privileged changes outside the API leave audit rows (docs/security.md, T11): user and group
changes in the admin, beat schedule edits, API tokens minted or revoked anywhere."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from maas_domain.models import ApiToken, AuditLog

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def actions() -> list[str]:
    return list(AuditLog.objects.order_by("id").values_list("action", flat=True))


def test_user_creation_group_membership_and_password_changes_are_audited(ops: Any) -> None:
    response = ops.post(
        "/admin/auth/user/add/",
        {"username": "newop", "password1": "Very-Long-Pass-123", "password2": "Very-Long-Pass-123"},
    )
    assert response.status_code == 302, response.content[:500]
    user = get_user_model().objects.get(username="newop")
    admins = Group.objects.get(name="maascp-admin")
    form = {
        "username": "newop",
        "is_active": "on",
        "is_staff": "on",
        "groups": [admins.pk],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }
    response = ops.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert response.status_code == 302, response.content[:2000]
    change = AuditLog.objects.filter(action="auth.user.change").latest("id")
    assert change.after["groups"] == ["maascp-admin"] and change.before["groups"] == []
    assert change.actor_name == "ops-admin"
    ops.post(
        f"/admin/auth/user/{user.pk}/password/",
        {"password1": "Another-Pass-456", "password2": "Another-Pass-456"},
    )
    assert "auth.user.create" in actions() and "auth.user.password" in actions()
    text = str(list(AuditLog.objects.values_list("before", "after")))
    assert "Very-Long-Pass-123" not in text and "Another-Pass-456" not in text
    assert "pbkdf2" not in text and "md5$" not in text  # no hash either


def test_group_permission_changes_are_audited(ops: Any) -> None:
    response = ops.post("/admin/auth/group/add/", {"name": "night-shift", "permissions": []})
    assert response.status_code == 302
    group = Group.objects.get(name="night-shift")
    ops.post(f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"})
    assert actions()[-2:] == ["auth.group.create", "auth.group.delete"]


def test_beat_schedule_edits_and_bulk_toggles_are_audited(ops: Any) -> None:
    every = IntervalSchedule.objects.create(every=30, period="seconds")
    task = PeriodicTask.objects.create(name="probe-all", task="x.y", interval=every)
    form = {
        "name": "probe-all",
        "regtask": "",
        "task": "x.y",
        "enabled": "on",
        "interval": every.pk,
        "args": "[]",
        "kwargs": "{}",
        "expire_seconds": "",
        "queue": "",
        "exchange": "",
        "routing_key": "",
        "priority": "",
        "headers": "{}",
        "description": "changed",
    }
    response = ops.post(f"/admin/django_celery_beat/periodictask/{task.pk}/change/", form)
    assert response.status_code in (200, 302)
    ops.post(
        "/admin/django_celery_beat/periodictask/",
        {"action": "disable_tasks", "_selected_action": [task.pk]},
    )
    names = actions()
    assert "django_celery_beat.periodictask.change" in names, names
    assert "django_celery_beat.periodictask.disable_tasks" in names, names


def test_token_minting_and_revocation_anywhere_are_audited(ops: Any, admin_user: Any) -> None:
    out = StringIO()
    call_command("api_token", "create", "--user", admin_user.username, stdout=out)
    token = ApiToken.objects.get(prefix=out.getvalue().strip()[:12])
    assert AuditLog.objects.filter(action="api_token.create", target_id=str(token.pk)).exists()
    asked = ops.post(
        "/admin/maas_domain/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [token.pk]},
    )
    assert asked.status_code == 200 and "Reason" in asked.content.decode()  # asks first
    token.refresh_from_db()
    assert token.revoked_at is None
    ops.post(
        "/admin/maas_domain/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [token.pk], "post": "yes",
         "reason": "laptop lost"},
    )  # fmt: skip
    token.refresh_from_db()
    assert token.revoked_at is not None
    row = AuditLog.objects.get(action="api_token.revoke", target_id=str(token.pk))
    assert row.actor_name == "ops-admin" and row.reason == "laptop lost"

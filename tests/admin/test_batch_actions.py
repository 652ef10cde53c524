"""The batch page: an operator sees why a batch paused and resumes or cancels it from there,
through the same services as the API (audited); a read-only user cannot."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from config import celery_app
from maas_domain.models import AuditLog
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding, OnboardingBatch
from tests.factories import make_profile, make_site, make_sku

pytestmark = pytest.mark.django_db
PAGE = "/admin/onboarding/onboardingbatch/{}/change/"


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(celery_app, "send_task", lambda *a, **kw: None)


def paused_batch(admin_user: Any) -> OnboardingBatch:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    batch = onboarding_start_batch(
        actor=admin_user,
        site_id=site.pk,
        profile_id=make_profile(site).pk,
        sku_id=make_sku().pk,
        rows=[{"hostname": f"ad{i}", "ipmi_ip": f"10.71.0.{i + 1}"} for i in range(3)],
    )
    OnboardingBatch.objects.filter(pk=batch.pk).update(
        state="paused", paused_reason="canary ad0 (onboarding 1) failed: <curtin>"
    )
    return batch


def test_the_page_shows_the_pause_and_resumes_the_batch(client: Any, admin_user: Any) -> None:
    client.force_login(admin_user)
    batch = paused_batch(admin_user)
    html = client.get(PAGE.format(batch.pk)).content.decode()
    assert 'id="batch-state"' in html and "paused" in html
    assert "canary ad0 (onboarding 1) failed: &lt;curtin&gt;" in html  # escaped
    assert f'action="/admin/onboarding/onboardingbatch/{batch.pk}/resume/"' in html
    answer = client.post(f"/admin/onboarding/onboardingbatch/{batch.pk}/resume/", {"reason": "ok"})
    assert answer.status_code == 302
    batch.refresh_from_db()
    assert batch.state == "running"
    assert AuditLog.objects.get(action="onboarding.batch_resume").actor_name == admin_user.username


def test_cancel_from_the_page_needs_a_confirmation(client: Any, admin_user: Any) -> None:
    client.force_login(admin_user)
    batch = paused_batch(admin_user)
    url = f"/admin/onboarding/onboardingbatch/{batch.pk}/cancel/"
    client.post(url, {"reason": "wrong lot"})  # not confirmed: nothing happens
    batch.refresh_from_db()
    assert batch.state == "paused"
    client.post(url, {"reason": "wrong lot", "confirmed": "yes"})
    batch.refresh_from_db()
    assert batch.state == "cancelled"
    assert set(Onboarding.objects.filter(batch=batch).values_list("state", flat=True)) == {
        "cancelled"
    }


def role_user(name: str, action: str) -> Any:
    user = get_user_model().objects.create_user(name, is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename=f"access_{action}"))
    return user


def test_buttons_and_posts_follow_the_action_classes(client: Any, admin_user: Any) -> None:
    """read sees the page only; operate may resume (it continues work); cancelling a whole
    batch is a cancel, an admin action (maas_domain/access.py)."""
    batch = paused_batch(admin_user)
    client.force_login(role_user("reader", "read"))
    page = client.get(PAGE.format(batch.pk))
    assert page.status_code == 200
    html = page.content.decode()
    assert "/resume/" not in html and "/cancel/" not in html
    assert (
        client.post(f"/admin/onboarding/onboardingbatch/{batch.pk}/resume/", {}).status_code == 403
    )
    client.force_login(role_user("operator", "operate"))
    html = client.get(PAGE.format(batch.pk)).content.decode()
    assert "/resume/" in html and "/cancel/" not in html
    cancel = {"reason": "x", "confirmed": "yes"}
    assert (
        client.post(f"/admin/onboarding/onboardingbatch/{batch.pk}/cancel/", cancel).status_code
        == 403
    )
    batch.refresh_from_db()
    assert batch.state == "paused"
    assert (
        client.post(f"/admin/onboarding/onboardingbatch/{batch.pk}/resume/", {}).status_code == 302
    )
    batch.refresh_from_db()
    assert batch.state == "running"

"""A verb that reopens a workflow runs MAAS work on its node again (a redeploy, an erase): it is
refused while a tenant holds the node, unless an admin forces it with a reason (docs/api.md,
"Recovery verbs"). The operate role could rerun or adopt the onboarding of a tenant's node."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from maas_domain.models import Allocation, AuditLog
from tests.factories import make_node, make_onboarding, make_site
from tests.support.tokens import bearer_token

pytestmark = pytest.mark.django_db
REOPENING = ["retry", "resume", "rerun", "adopt"]


def held_onboarding(state: str) -> Any:
    site = make_site()
    node = make_node(site, hostname="ten01", state="active")
    allocation = Allocation.objects.create(node=node, holder="tenant-a")
    wf = make_onboarding(site, node=node, hostname="ten01", state=state, stage="deploy")
    return wf, allocation


def operator() -> APIClient:
    user = get_user_model().objects.create_user("op-ten", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='operate')}")
    return client


@pytest.mark.parametrize("verb", ["retry", "rerun"])
def test_reopening_a_tenants_node_is_refused_naming_the_allocation(
    api: APIClient, verb: str
) -> None:
    wf, allocation = held_onboarding("failed")
    url = f"/api/v1/admin/onboardings/{wf.pk}/{verb}"
    for client in (api, operator()):
        refused = client.post(url, {}, format="json")
        assert refused.status_code == 409, refused.content
        assert refused.json()["allocations"] == [{"id": allocation.pk, "holder": "tenant-a"}]
    wf.refresh_from_db()
    assert wf.state == "failed"
    plan = api.post(url + "?dry_run=true", {}, format="json")
    assert plan.status_code == 409  # a dry run says the same


def test_only_an_admin_forces_it_and_only_with_a_reason(api: APIClient) -> None:
    wf, _ = held_onboarding("failed")
    url = f"/api/v1/admin/onboardings/{wf.pk}/rerun"
    forced = {"force": True, "reason": "tenant agreed to the redeploy (ticket 4411)"}
    assert operator().post(url, forced, format="json").status_code == 403
    assert api.post(url, {"force": True}, format="json").status_code == 400
    done = api.post(url, forced, format="json")
    assert done.status_code == 202, done.content
    row = AuditLog.objects.filter(action="onboarding.rerun").latest("id")
    assert "ticket 4411" in row.reason


def test_a_free_node_needs_no_force(api: APIClient) -> None:
    wf, allocation = held_onboarding("failed")
    allocation.release()
    allocation.save()
    retried = api.post(f"/api/v1/admin/onboardings/{wf.pk}/retry", {}, format="json")
    assert retried.status_code == 202

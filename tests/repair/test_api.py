"""Starting a repair and reporting it done through the API: a node in the wrong state, with an
open workflow or a tenant is a 409 naming why, nothing changed; the roles; dry runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from maas_domain.models import Allocation, AuditLog, Node
from maas_domain.services import cordons
from repair.models import Repair
from tests.factories import make_node, make_onboarding, make_site
from tests.support.tokens import bearer_token

pytestmark = pytest.mark.django_db
API = "/api/v1/admin"


def node_in(state: str, **fields: Any) -> Node:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    node = make_node(site, state=state, maas_system_id=f"s{state[:4]}", **fields)
    make_onboarding(site, node=node, hostname=node.hostname, state="failed")  # its profile
    return node


def operator() -> APIClient:
    user, _ = get_user_model().objects.get_or_create(username="op-repair", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='operate')}")
    return client


def test_a_quarantined_node_is_handed_to_repair(api: APIClient) -> None:
    node = node_in("quarantined")
    body = {"ticket": "RMA-1", "reason": "GPU fell off the bus"}
    started = api.post(f"{API}/nodes/{node.pk}/repair", body, format="json")
    assert started.status_code == 202, started.json()
    body = started.json()
    assert (body["state"], body["stage"], body["ticket"]) == ("pending", "preflight", "RMA-1")
    assert body["prior_node_state"] == "quarantined"
    assert AuditLog.objects.filter(action="repair.start", target_id=str(body["id"])).exists()
    again = api.post(f"{API}/nodes/{node.pk}/repair", {}, format="json")
    assert again.status_code == 409 and again.json()["open_workflows"][0]["kind"] == "repair"


@pytest.mark.parametrize("state", ["active", "provisioning", "draining", "retired", "in_repair"])
def test_a_node_in_the_wrong_state_is_a_409_naming_it(api: APIClient, state: str) -> None:
    node = node_in(state)
    refused = api.post(f"{API}/nodes/{node.pk}/repair", {}, format="json")
    assert refused.status_code == 409, refused.json()
    assert refused.json()["current_state"] == state and state in refused.json()["detail"]
    assert not Repair.objects.exists()
    rehearsed = api.post(f"{API}/nodes/{node.pk}/repair?dry_run=true", {}, format="json")
    assert rehearsed.status_code == 409  # a dry run says the same


def test_an_active_node_needs_a_cordon_and_no_tenant(api: APIClient) -> None:
    node = node_in("active")
    cordons.operator_cordon(actor=None, node_id=node.pk, reason="suspect NVLink")
    held = Allocation.objects.create(node=node, holder="tenant-a")
    refused = api.post(f"{API}/nodes/{node.pk}/repair", {}, format="json")
    assert refused.status_code == 409
    assert refused.json()["allocations"] == [{"id": held.pk, "holder": "tenant-a"}]
    held.release()
    held.save()
    plan = api.post(f"{API}/nodes/{node.pk}/repair?dry_run=true", {}, format="json")
    assert plan.status_code == 200 and not Repair.objects.exists()
    assert api.post(f"{API}/nodes/{node.pk}/repair", {}, format="json").status_code == 202


def test_starting_is_an_admins_and_bad_bodies_are_refused(api: APIClient) -> None:
    node = node_in("quarantined")
    url = f"{API}/nodes/{node.pk}/repair"
    assert operator().post(url, {}, format="json").status_code == 403
    assert api.post(url, {"ticket": "x" * 201}, format="json").status_code == 400
    assert api.post(url, {"surprise": 1}, format="json").status_code == 400
    wrong = api.post(url, {"profile_id": 999999}, format="json")
    assert wrong.status_code == 400 and "profile_id" in wrong.json()["fields"]
    assert api.post(f"{API}/nodes/999999/repair", {}, format="json").status_code == 404
    assert not Repair.objects.exists()


def test_requalify_only_while_it_waits_in_repair(api: APIClient) -> None:
    node = node_in("quarantined")
    wf = Repair.objects.get(pk=api.post(f"{API}/nodes/{node.pk}/repair", {},
                                        format="json").json()["id"])  # fmt: skip
    url = f"{API}/repairs/{wf.pk}/requalify"
    ops = operator()
    early = ops.post(url, {"note": "done"}, format="json")
    assert early.status_code == 409 and early.json()["stage"] == "preflight"
    Repair.objects.filter(pk=wf.pk).update(state="waiting", stage="in_repair")
    assert ops.post(url + "?dry_run=true", {}, format="json").status_code == 200
    assert Repair.objects.get(pk=wf.pk).repaired_at is None
    done = ops.post(url, {"note": "GPU 7 replaced"}, format="json")
    assert done.status_code == 202, done.json()
    wf.refresh_from_db()
    assert (wf.repaired_by, wf.repair_note) == ("op-repair", "GPU 7 replaced")
    assert wf.events.filter(kind="operator.requalify").exists()
    twice = ops.post(url, {}, format="json")
    assert twice.status_code == 409 and "already" in twice.json()["detail"]

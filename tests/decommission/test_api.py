"""Decommission API without running workflows: input rules, 409s, guardrails, reads."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from decommission.models import Decommission
from maas_domain.models import Allocation, AuditLog, MaasSite, Node, OutboxEvent
from tests.factories import make_profile, make_site, make_sku

URL = "/api/v1/admin/decommissions"
pytestmark = pytest.mark.django_db


@pytest.fixture
def site() -> MaasSite:
    return make_site(health="healthy", last_probe_at=timezone.now())


_BMC = itertools.count()


def make_node(site: MaasSite, hostname: str = "n01", state: str = "active") -> Node:
    return Node.objects.create(
        site=site,
        sku=make_sku(code=f"sku-{hostname}"),
        hostname=hostname,
        ipmi_ip=f"10.9.{next(_BMC) // 250}.{next(_BMC) % 250 + 1}",  # one BMC per live node
        maas_system_id=f"s{hostname}",
        state=state,
    )


def start(api: APIClient, node: Node, path: str = "decommission", **body: Any) -> Any:
    return api.post(f"/api/v1/admin/nodes/{node.pk}/{path}", body, format="json")


def test_start_answers_202_with_the_decommission_audit_and_event(
    api: APIClient, site: MaasSite
) -> None:
    node = make_node(site)
    profile = make_profile(site)
    response = start(api, node, mode="reimage", profile_id=profile.pk, reason="new image")
    assert response.status_code == 202, response.content
    data = response.json()
    assert (data["mode"], data["state"], data["stage"], data["queued"]) == (
        "reimage",
        data["state"],
        "preflight",
        data["state"] == "pending",
    )
    assert (data["node_id"], data["profile_id"], data["hostname"]) == (node.pk, profile.pk, "n01")
    assert data["requested_by"] == "ops-admin" and data["request_reason"] == "new image"
    audit = AuditLog.objects.get(action="decommission.start.reimage")
    assert audit.target_id == str(data["id"]) and audit.actor_name == "ops-admin"
    event = OutboxEvent.objects.get(type="node.decommission.started")
    assert event.payload["workflow_id"] == data["id"] and event.payload["mode"] == "reimage"
    detail = api.get(f"{URL}/{data['id']}", {"diagnostics": "false"}).json()
    assert detail["timeline"][0]["kind"] == "workflow.created"
    assert detail["allowed_verbs"] == ["cancel", "mark-manual-intervention"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("decommission", {"mode": "shred"}, "mode"),
        ("decommission", {}, "mode"),
        ("decommission", {"mode": "full", "confirm": False}, "confirm"),
        ("decommission", {"mode": "reimage", "profile_id": 424242}, "profile_id"),
        ("decommission", {"mode": "reimage"}, "profile_id"),  # nothing to redeploy with
        ("decommission", {"mode": "full", "confirm": True, "script": "rm -rf /"}, "script"),
        ("storage-cleanup", {"mode": "full"}, "mode"),
        ("storage-cleanup", {"force_release": "maybe"}, "force_release"),
    ],
)
def test_bad_input_is_400_with_the_field_and_changes_nothing(
    api: APIClient, site: MaasSite, path: str, body: dict[str, Any], field: str
) -> None:
    node = make_node(site)
    response = start(api, node, path, **body)
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]
    assert not Decommission.objects.exists()
    assert Node.objects.get(pk=node.pk).state == "active"
    assert not AuditLog.objects.filter(action__startswith="decommission").exists()


def test_unknown_node_is_404(api: APIClient) -> None:
    assert start(api, Node(pk=424242), mode="full", confirm=True).status_code == 404
    assert api.get(f"{URL}/424242").status_code == 404


@pytest.mark.parametrize("state", ["registered", "provisioning", "retired"])
def test_node_in_a_state_that_cannot_be_decommissioned_is_409(
    api: APIClient, site: MaasSite, state: str
) -> None:
    node = make_node(site, state=state)
    response = start(api, node, "storage-cleanup")
    assert response.status_code == 409
    assert response.json()["node"] == {"id": node.pk, "state": state}


def test_second_open_decommission_is_409(api: APIClient, site: MaasSite) -> None:
    node = make_node(site)
    first = start(api, node, "storage-cleanup").json()
    response = start(api, node, mode="full", confirm=True)
    assert response.status_code == 409
    assert response.json()["open_workflows"][0]["id"] == first["id"]
    assert Decommission.objects.count() == 1


def test_guardrails_refuse_unhealthy_or_guarded_sites(api: APIClient, site: MaasSite) -> None:
    node = make_node(site)
    site.health = "unhealthy"
    site.save()
    assert start(api, node, "storage-cleanup").status_code == 409
    site.health, site.guarded, site.approved_hosts = "healthy", True, ["n01"]
    site.save()
    refused = start(api, node, mode="full", confirm=True)
    assert refused.status_code == 409 and "confirm_host" in refused.json()["detail"]
    assert start(api, node, mode="full", confirm=True, confirm_host="n01").status_code == 202


def test_storage_cleanup_needs_an_erasing_policy(api: APIClient, site: MaasSite) -> None:
    site.policy = {"erase_mode": "none"}
    site.save()
    response = start(api, make_node(site), "storage-cleanup")
    assert response.status_code == 409
    assert "erase_mode is none" in response.json()["detail"]


def test_allocations_are_listed_and_nothing_changes_without_force(
    api: APIClient, site: MaasSite
) -> None:
    node = make_node(site)
    a = Allocation.objects.create(node=node, holder="tenant-a")
    Allocation.objects.create(node=node, holder="tenant-b", state="released")
    response = start(api, node, "storage-cleanup")
    assert response.status_code == 409
    assert [x["holder"] for x in response.json()["allocations"]] == ["tenant-a"]
    assert Allocation.objects.get(pk=a.pk).state == "active"
    assert not Decommission.objects.exists()


def test_list_filters_search_and_constant_queries(api: APIClient, site: MaasSite) -> None:
    for i in range(30):
        node = make_node(site, hostname=f"rack{i:02d}")
        Decommission.objects.create(
            site=site,
            node=node,
            hostname=node.hostname,
            mode=["reimage", "full", "storage_cleanup"][i % 3],
            state="failed" if i % 2 else "succeeded",
            stage="release",
            correlation_id="c",
        )
    assert api.get(URL, {"mode": "full"}).json()["count"] == 10
    assert api.get(URL, {"state": "failed"}).json()["count"] == 15
    assert api.get(URL, {"search": "rack0"}).json()["count"] == 10
    assert api.get(URL, {"node": node.pk}).json()["results"][0]["hostname"] == "rack29"
    assert api.get(URL, {"mode": "shred"}).status_code == 400
    counts = []
    for limit in (1, 30):
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(URL, {"limit": limit}).status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def test_admission_is_one_queue_across_kinds_oldest_first(site: MaasSite) -> None:
    from datetime import timedelta

    from tests.factories import make_onboarding
    from workflows.scheduling import admit

    site.policy = {"max_concurrent_workflows": 1}
    site.save()
    node = make_node(site)
    older = Decommission.objects.create(
        site=site, node=node, hostname=node.hostname, mode="storage_cleanup", stage="preflight",
        correlation_id="c",
    )  # fmt: skip
    newer = make_onboarding(site, hostname="later01", state="pending")
    Decommission.objects.filter(pk=older.pk).update(
        updated_at=timezone.now() - timedelta(minutes=5)
    )
    assert admit(site.pk) == 1
    assert Decommission.objects.get(pk=older.pk).state == "running"
    assert type(newer).objects.get(pk=newer.pk).state == "pending"  # queued behind it

"""SKUs, nodes and allocations through the API (docs/api.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from maas_domain.models import Allocation, AuditLog, Node, Sku
from onboarding.models import Onboarding
from tests.factories import make_node, make_onboarding, make_site, make_sku

pytestmark = pytest.mark.django_db
BASE = "/api/v1/admin"


# -- SKUs -----------------------------------------------------------------------------------------


def test_sku_lifecycle_create_patch_with_if_match_and_duplicate(api: APIClient) -> None:
    body = {"code": "gpu-8x-h100", "name": "8x H100", "gpu_model": "H100", "gpu_count": 8}
    created = api.post(f"{BASE}/skus", body, format="json")
    assert created.status_code == 201, created.json()
    sku = created.json()
    assert (sku["active"], sku["node_count"], sku["revision"]) == (True, 0, 1)
    assert created["ETag"] == '"1"'
    again = api.post(f"{BASE}/skus", body, format="json")
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    stale = api.patch(f"{BASE}/skus/{sku['id']}", {"name": "x"}, format="json", HTTP_IF_MATCH='"7"')
    assert stale.status_code == 409 and stale.json()["error"] == "revision_mismatch"
    ok = api.patch(f"{BASE}/skus/{sku['id']}", {"name": "8x H100 SXM5"}, format="json",
                   HTTP_IF_MATCH='"1"')  # fmt: skip
    assert ok.status_code == 200 and ok.json()["revision"] == 2
    assert Sku.objects.get().name == "8x H100 SXM5"
    assert [a.action for a in AuditLog.objects.order_by("id")] == ["sku.create", "sku.update"]


@pytest.mark.parametrize(
    "body",
    [
        {"code": "has space", "name": "x"},
        {"code": "ok", "name": "x", "gpu_count": -1},
        {"code": "ok", "name": "x", "node_count": 3},  # read-only
        {"code": "ok", "name": "x", "colour": "red"},  # unknown
        {"name": "no code"},
    ],
)
def test_bad_sku_bodies_are_400_and_create_nothing(api: APIClient, body: dict[str, Any]) -> None:
    response = api.post(f"{BASE}/skus", body, format="json")
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert not Sku.objects.exists()


def test_delete_removes_an_unused_sku_and_disables_a_referenced_one(api: APIClient) -> None:
    unused, used = make_sku(), make_sku()
    make_node(make_site(), sku=used)
    assert api.delete(f"{BASE}/skus/{unused.pk}").status_code == 204
    assert not Sku.objects.filter(pk=unused.pk).exists()
    kept = api.delete(f"{BASE}/skus/{used.pk}")
    assert kept.status_code == 200 and kept.json()["active"] is False
    assert kept.json()["node_count"] == 1
    assert Sku.objects.get(pk=used.pk).active is False
    actions = list(AuditLog.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["sku.delete", "sku.disable"]
    assert api.get(f"{BASE}/skus", {"active": "false"}).json()["count"] == 1


def test_sku_list_runs_a_constant_number_of_queries(api: APIClient) -> None:
    site = make_site()
    for _ in range(3):
        make_node(site, sku=make_sku())
    api.get(f"{BASE}/skus")  # the token's last-used time is written on the first call
    with CaptureQueriesContext(connection) as few:
        assert api.get(f"{BASE}/skus").status_code == 200
    for _ in range(20):
        make_node(site, sku=make_sku())
    with CaptureQueriesContext(connection) as many:
        assert api.get(f"{BASE}/skus").json()["count"] == 23
    assert len(many) == len(few)


# -- nodes ----------------------------------------------------------------------------------------


def test_node_list_filters_and_constant_queries(api: APIClient) -> None:
    east, west = make_site(name="east"), make_site(name="west")
    sku = make_sku()
    make_node(east, hostname="gpu-a1", sku=sku, state="active")
    make_node(east, hostname="gpu-a2", sku=sku, state="quarantined")
    make_node(west, hostname="cpu-b1", state="active")
    page = api.get(f"{BASE}/nodes", {"site": str(east.pk)}).json()
    assert [n["hostname"] for n in page["results"]] == ["gpu-a1", "gpu-a2"]
    assert page["results"][0]["site_name"] == "east" and page["results"][0]["sku_code"] == sku.code
    assert api.get(f"{BASE}/nodes", {"state": "active", "sku": str(sku.pk)}).json()["count"] == 1
    assert api.get(f"{BASE}/nodes", {"search": "B1"}).json()["count"] == 1
    bad = api.get(f"{BASE}/nodes", {"state": "on-fire"})
    assert bad.status_code == 400 and "state" in bad.json()["fields"]
    with CaptureQueriesContext(connection) as few:
        api.get(f"{BASE}/nodes")
    for i in range(20):
        make_node(west, hostname=f"n{i}")
    with CaptureQueriesContext(connection) as many:
        assert api.get(f"{BASE}/nodes").json()["count"] == 23
    assert len(many) == len(few)


def test_node_detail_shows_workflows_allocations_and_no_observation_yet(api: APIClient) -> None:
    site = make_site()
    node = make_node(site, hostname="gpu-7", state="active", maas_system_id="abc123")
    done = make_onboarding(site, node=node, hostname="gpu-7")
    Onboarding.objects.filter(pk=done.pk).update(state="succeeded")
    Allocation.objects.create(node=node, holder="tenant-a")
    Allocation.objects.create(node=node, holder="tenant-b", state="released")
    data = api.get(f"{BASE}/nodes/{node.pk}").json()
    assert (data["state"], data["maas_system_id"]) == ("active", "abc123")
    assert data["open_workflows"] == []
    assert [(w["kind"], w["id"], w["state"]) for w in data["recent_workflows"]] == [
        ("onboarding", done.pk, "succeeded")
    ]
    assert [a["holder"] for a in data["active_allocations"]] == ["tenant-a"]
    assert data["maas_observation"] is None
    assert api.get(f"{BASE}/nodes/999999").status_code == 404


# -- allocations ----------------------------------------------------------------------------------


def test_allocate_release_and_the_rules(api: APIClient) -> None:
    site = make_site()
    active = make_node(site, state="active")
    draining = make_node(site, state="draining")
    made = api.post(f"{BASE}/allocations", {"node_id": active.pk, "holder": "job-42"},
                    format="json")  # fmt: skip
    assert made.status_code == 201, made.json()
    allocation = made.json()
    assert (allocation["state"], allocation["hostname"]) == ("active", active.hostname)
    refused = api.post(f"{BASE}/allocations", {"node_id": draining.pk, "holder": "x"},
                       format="json")  # fmt: skip
    assert refused.status_code == 409 and refused.json()["node"]["state"] == "draining"
    missing = api.post(f"{BASE}/allocations", {"node_id": 999999, "holder": "x"}, format="json")
    assert missing.status_code == 400 and "node_id" in missing.json()["fields"]
    hostile = api.post(f"{BASE}/allocations", {"node_id": active.pk, "holder": "a\nb"},
                       format="json")  # fmt: skip
    assert hostile.status_code == 400
    released = api.post(f"{BASE}/allocations/{allocation['id']}/release",
                        {"reason": "job done"}, format="json")  # fmt: skip
    assert released.status_code == 200 and released.json()["state"] == "released"
    assert released.json()["release_reason"] == "job done"
    twice = api.post(f"{BASE}/allocations/{allocation['id']}/release", {}, format="json")
    assert twice.status_code == 409 and twice.json()["current_state"] == "released"
    assert list(AuditLog.objects.order_by("id").values_list("action", flat=True)) == [
        "allocation.create",
        "allocation.release",
    ]
    listed = api.get(f"{BASE}/allocations", {"node": str(active.pk), "state": "released"}).json()
    assert listed["count"] == 1
    assert Node.objects.get(pk=active.pk).state == "active"


def test_index_lists_every_resource_with_a_working_link(api: APIClient) -> None:
    index = api.get(f"{BASE}/")
    assert index.status_code == 200
    links = index.json()["resources"]
    for name in ("maas_sites", "skus", "nodes", "allocations", "onboardings", "decommissions"):
        path = links[name].split("testserver", 1)[1]
        assert api.get(path).status_code == 200, name


def test_the_index_is_admin_only(anon_api: APIClient, user_api: APIClient) -> None:
    assert anon_api.get(f"{BASE}/").status_code == 401
    assert user_api.get(f"{BASE}/").status_code == 403


@pytest.mark.parametrize("path", ["/nodes", "/skus", "/nodes/{node}/timeline"])
def test_an_offset_past_any_database_is_a_400(api: APIClient, path: str) -> None:
    """Found by the fuzzing gate: OFFSET 10**25 overflowed PostgreSQL's bigint (a 500)."""
    node = make_node(make_site())
    response = api.get(BASE + path.format(node=node.pk), {"offset": str(10**25)})
    assert response.status_code == 400 and "offset" in response.json()["fields"]

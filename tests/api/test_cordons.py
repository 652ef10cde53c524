"""Cordons (docs/operations.md, "Cordons"): a cordoned node takes no new allocation (409 naming
every reason), keeps the tenant it has, and announces it; an operator cordons with a reason and
only an admin uncordons, with a reason; every change audited, every route rehearsable."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from maas_domain.models import Allocation, AuditLog, Cordon, OutboxEvent
from maas_domain.services import cordons
from maas_domain.services import evidence as evidence_services
from tests.factories import make_node, make_site
from tests.support.asyncapi import validate
from tests.support.tokens import bearer_token

pytestmark = pytest.mark.django_db
API = "/api/v1/admin"


def operator() -> APIClient:
    user = get_user_model().objects.create_user("op-cordon", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='operate')}")
    return client


def events_of(kind: str) -> list[dict[str, Any]]:
    from maas_domain.events import envelope

    rows = [envelope(e) for e in OutboxEvent.objects.filter(type=kind).order_by("occurred_at")]
    for row in rows:
        validate(row)  # the asyncapi.draft.yaml contract
    return rows


def allocate(api: APIClient, node_id: int) -> Any:
    return api.post(f"{API}/allocations", {"node_id": node_id, "holder": "t"}, format="json")


def test_a_cordoned_node_refuses_new_allocations_and_keeps_its_tenant(api: APIClient) -> None:
    node = make_node(make_site(), hostname="cd01", state="active")
    held = Allocation.objects.create(node=node, holder="tenant-a")
    done = operator().post(
        f"{API}/nodes/{node.pk}/cordon", {"reason": "fan noise, RMA pending"}, format="json"
    )
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["schedulable"] is False
    assert [(c["reason"], c["detail"], c["created_by"]) for c in body["cordons"]] == [
        ("operator", "fan noise, RMA pending", "op-cordon")
    ]
    refused = allocate(api, node.pk)
    assert refused.status_code == 409, refused.content
    assert "cordoned (operator: fan noise, RMA pending)" in refused.json()["detail"]
    assert [c["reason"] for c in refused.json()["cordons"]] == ["operator"]
    held.refresh_from_db()
    assert held.state == "active"  # not touched: the allocation domain drains it
    [event] = events_of("node.cordoned")
    assert (event["node_id"], event["cordon_reason"], event["reason"]) == (
        node.pk,
        "operator",
        "fan noise, RMA pending",
    )
    assert AuditLog.objects.filter(action="node.cordon", target_id=str(node.pk)).exists()
    # the list shows the same, in a constant number of queries (prefetched)
    listed = api.get(f"{API}/nodes?search=cd01").json()["results"]
    assert listed[0]["schedulable"] is False and listed[0]["cordons"][0]["reason"] == "operator"


def test_only_an_admin_uncordons_and_only_with_a_reason(api: APIClient) -> None:
    node = make_node(make_site(), hostname="cd02", state="active")
    cordons.operator_cordon(actor=None, node_id=node.pk, reason="suspect NVLink")
    url = f"{API}/nodes/{node.pk}/uncordon"
    assert operator().post(url, {"reason": "fixed"}, format="json").status_code == 403
    missing = api.post(url, {}, format="json")
    assert missing.status_code == 400 and "reason" in missing.json()["fields"]
    blank = api.post(url, {"reason": "   "}, format="json")
    assert blank.status_code == 400 and "reason" in blank.json()["fields"]
    rehearsed = api.post(url + "?dry_run=true", {"reason": "ok"}, format="json")
    assert rehearsed.status_code == 200
    assert cordons.active([node.pk]).count() == 1  # a dry run changes nothing
    done = api.post(url, {"reason": "reseated the cable, DCGM level 3 passed"}, format="json")
    assert done.status_code == 200, done.content
    assert done.json()["schedulable"] is True and done.json()["cordons"] == []
    lifted = Cordon.objects.get(node=node)
    assert (lifted.lifted_by, lifted.lift_reason) == (
        "ops-admin",
        "reseated the cable, DCGM level 3 passed",
    )
    assert allocate(api, node.pk).status_code == 201
    [event] = events_of("node.uncordoned")
    assert event["reason"] == "reseated the cable, DCGM level 3 passed"
    again = api.post(url, {"reason": "twice"}, format="json")
    assert again.status_code == 409 and "not cordoned" in again.json()["detail"]


@pytest.mark.parametrize("state", ["retired", "registered"])
def test_cordoning_a_node_in_the_wrong_state_is_a_409_naming_it(api: APIClient, state: str) -> None:
    node = make_node(make_site(), hostname="cd03", state=state)
    refused = api.post(f"{API}/nodes/{node.pk}/cordon", {"reason": "x"}, format="json")
    assert refused.status_code == 409
    assert refused.json()["current_state"] == state and state in refused.json()["detail"]
    assert not Cordon.objects.exists()


def test_a_second_operator_cordon_is_a_409_and_a_dry_run_changes_nothing(api: APIClient) -> None:
    node = make_node(make_site(), hostname="cd04", state="active")
    url = f"{API}/nodes/{node.pk}/cordon"
    assert api.post(url + "?dry_run=true", {"reason": "x"}, format="json").status_code == 200
    assert not Cordon.objects.exists() and not OutboxEvent.objects.exists()
    assert api.post(url, {"reason": "first"}, format="json").status_code == 200
    assert api.post(url, {"reason": "second"}, format="json").status_code == 409
    assert cordons.active([node.pk]).count() == 1


def test_unknown_fields_and_hostile_reasons_are_refused(api: APIClient) -> None:
    node = make_node(make_site(), hostname="cd05", state="active")
    url = f"{API}/nodes/{node.pk}/cordon"
    assert api.post(url, {"reason": "x", "force": True}, format="json").status_code == 400
    assert api.post(url, {"reason": "x" * 501}, format="json").status_code == 400
    assert api.post(url, {"reason": ["a"]}, format="json").status_code == 400
    assert not Cordon.objects.exists()


def test_quarantine_evidence_cordons_the_node_once(api: APIClient) -> None:
    node = make_node(make_site(), hostname="cd06", state="active")
    evidence = evidence_services.freeze(
        node=node,
        kind="hardware_nonconformant",
        workflow_kind="onboarding",
        workflow_id=1,
        maas_system_id="abc123",
        reason="7 GPUs, SKU states 8",
        report={},
        timeline=[],
    )
    [cordon] = cordons.active([node.pk])
    assert (cordon.reason, cordon.source) == ("quarantine", f"evidence:{evidence.pk}")
    assert "7 GPUs" in cordon.detail
    api.post(f"{API}/nodes/{node.pk}/uncordon", {"reason": "checked"}, format="json")
    # the same evidence never cordons again once an operator lifted it
    assert cordons.cordon(node, "quarantine", "again", source=f"evidence:{evidence.pk}") is None


def test_the_metric_counts_active_cordons_by_site_and_reason() -> None:
    site = make_site(name="gauge-site")
    node = make_node(site, hostname="cd07", state="active")
    [family] = cordons.cordons_gauge()
    before = {tuple(s.labels.values()): s.value for s in family.samples}
    assert before[("gauge-site", "operator")] == 0  # every reason present: no vanishing series
    cordons.operator_cordon(actor=None, node_id=node.pk, reason="x")
    [family] = cordons.cordons_gauge()
    after = {tuple(s.labels.values()): s.value for s in family.samples}
    assert after[("gauge-site", "operator")] == 1 and after[("gauge-site", "drift")] == 0

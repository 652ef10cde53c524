"""/api/v1/admin/maas-sites/{id}/roce-assignments: all-or-nothing bulk upsert, list, delete."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, RoceAssignment
from tests.factories import make_site

pytestmark = pytest.mark.django_db


def url(site_id: int, assignment_id: int | None = None) -> str:
    base = f"/api/v1/admin/maas-sites/{site_id}/roce-assignments"
    return f"{base}/{assignment_id}" if assignment_id else base


SEED_EXAMPLE = {
    "items": [
        {"hostname": "c07u31", "interface": "enp28s0np0", "ipv4_cidr": "172.30.9.61/31"},
        {"hostname": "c07u31", "interface": "enp29s0np0", "ipv4_cidr": "172.29.1.219/31"},
    ]
}


def rows(site: Any) -> list[tuple[str, str, str]]:
    return list(
        RoceAssignment.objects.filter(site=site)
        .order_by("hostname", "interface")
        .values_list("hostname", "interface", "ipv4_cidr")
    )


def test_seed_example_creates_then_upserts(api: APIClient) -> None:
    site = make_site()
    first = api.post(url(site.pk), SEED_EXAMPLE, format="json")
    assert first.status_code == 200, first.json()
    assert first.json() == {"created": 2, "updated": 0, "unchanged": 0}
    again = api.post(
        url(site.pk),
        {
            "items": [
                {"hostname": "c07u31", "interface": "enp28s0np0", "ipv4_cidr": "172.30.9.61/31"},
                {"hostname": "c07u31", "interface": "enp29s0np0", "ipv4_cidr": "172.29.1.221/31"},
                {"hostname": "c07u32", "interface": "enp28s0np0", "ipv4_cidr": "172.30.9.63/31"},
            ]
        },
        format="json",
    )
    assert again.json() == {"created": 1, "updated": 1, "unchanged": 1}
    assert rows(site) == [
        ("c07u31", "enp28s0np0", "172.30.9.61/31"),
        ("c07u31", "enp29s0np0", "172.29.1.221/31"),
        ("c07u32", "enp28s0np0", "172.30.9.63/31"),
    ]
    actions = list(AuditLog.objects.values_list("action", flat=True))
    assert actions == ["roce.bulk_upsert", "roce.bulk_upsert"]
    latest = AuditLog.objects.first()
    assert latest is not None
    assert latest.before["updated"][0]["ipv4_cidr"] == "172.29.1.219/31"


@pytest.mark.parametrize(
    ("item", "field", "reason"),
    [
        (
            {"hostname": "C07U31!", "interface": "eth0", "ipv4_cidr": "10.0.0.1/31"},
            "hostname",
            "hostname",
        ),
        (
            {
                "hostname": "c07u31",
                "interface": "a-very-long-interface",
                "ipv4_cidr": "10.0.0.1/31",
            },
            "interface",
            "interface",
        ),
        (
            {"hostname": "c07u31", "interface": "eth0", "ipv4_cidr": "10.0.0.1"},
            "ipv4_cidr",
            "prefix",
        ),
        (
            {"hostname": "c07u31", "interface": "eth0", "ipv4_cidr": "10.0.0.300/24"},
            "ipv4_cidr",
            "valid",
        ),
        (
            {"hostname": "c07u31", "interface": "eth0", "ipv4_cidr": "10.0.0.0/24"},
            "ipv4_cidr",
            "network",
        ),
        (
            {"hostname": "c07u31", "interface": "eth0", "ipv4_cidr": "fd00::1/64"},
            "ipv4_cidr",
            "valid",
        ),
        ({"hostname": "c07u31", "interface": "eth0"}, "ipv4_cidr", "required"),
        (
            {"hostname": "c07u31", "interface": "eth0", "ipv4_cidr": "10.0.0.1/31", "vlan": 5},
            "vlan",
            "Unknown",
        ),
    ],
)
def test_one_bad_row_rejects_the_whole_batch(
    api: APIClient, item: dict[str, Any], field: str, reason: str
) -> None:
    site = make_site()
    good = {"hostname": "c07u30", "interface": "eth1", "ipv4_cidr": "10.9.0.1/31"}
    response = api.post(url(site.pk), {"items": [good, item]}, format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["rows"]
    assert {"index": 1, "field": field} == {k: errors[0][k] for k in ("index", "field")}
    assert reason.lower() in errors[0]["reason"].lower()
    assert rows(site) == []
    assert not AuditLog.objects.exists()


def test_duplicates_inside_the_request_are_reported_per_row(api: APIClient) -> None:
    site = make_site()
    items = [
        {"hostname": "a1", "interface": "eth0", "ipv4_cidr": "10.0.0.1/31"},
        {"hostname": "a1", "interface": "eth0", "ipv4_cidr": "10.0.0.3/31"},
        {"hostname": "a2", "interface": "eth0", "ipv4_cidr": "10.0.0.1/31"},
    ]
    response = api.post(url(site.pk), {"items": items}, format="json")
    assert response.status_code == 400
    assert [(e["index"], e["field"]) for e in response.json()["rows"]] == [
        (1, "interface"),
        (2, "ipv4_cidr"),
    ]
    assert "row 0" in response.json()["rows"][0]["reason"]


def test_address_collision_with_existing_row_in_site(api: APIClient) -> None:
    site, other = make_site(), make_site()
    api.post(url(site.pk), SEED_EXAMPLE, format="json")
    clash = {"items": [{"hostname": "c08u01", "interface": "eth0", "ipv4_cidr": "172.30.9.61/31"}]}
    response = api.post(url(site.pk), clash, format="json")
    assert response.status_code == 400
    assert "c07u31/enp28s0np0" in response.json()["rows"][0]["reason"]
    assert len(rows(site)) == 2
    # the same address on another site is not a collision
    assert api.post(url(other.pk), clash, format="json").status_code == 200


def test_moving_an_address_between_rows_in_one_request_is_allowed(api: APIClient) -> None:
    site = make_site()
    api.post(url(site.pk), SEED_EXAMPLE, format="json")
    move = {
        "items": [
            {"hostname": "c07u31", "interface": "enp28s0np0", "ipv4_cidr": "172.30.9.99/31"},
            {"hostname": "c07u40", "interface": "enp28s0np0", "ipv4_cidr": "172.30.9.61/31"},
        ]
    }
    response = api.post(url(site.pk), move, format="json")
    assert response.status_code == 200, response.json()
    assert ("c07u40", "enp28s0np0", "172.30.9.61/31") in rows(site)


@pytest.mark.parametrize(
    "body", [{"items": []}, {"items": "x"}, {}, {"items": [1]}, {"items": [], "extra": 1}, [1]]
)
def test_malformed_bodies_are_400(api: APIClient, body: Any) -> None:
    site = make_site()
    response = api.post(url(site.pk), body, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_list_filter_and_delete(api: APIClient) -> None:
    site = make_site()
    api.post(url(site.pk), SEED_EXAMPLE, format="json")
    listed = api.get(url(site.pk), {"hostname": "c07u31", "interface": "enp29s0np0"}).json()
    assert listed["count"] == 1
    assignment_id = listed["results"][0]["id"]
    assert api.delete(url(site.pk, assignment_id)).status_code == 204
    assert api.delete(url(site.pk, assignment_id)).status_code == 404
    assert len(rows(site)) == 1
    deleted = AuditLog.objects.get(action="roce.delete")
    assert deleted.before["ipv4_cidr"] == "172.29.1.219/31"
    assert api.get(url(424242)).status_code == 404


def test_thousand_row_upsert(api: APIClient) -> None:
    site = make_site()
    items = [
        {
            "hostname": f"h{i:04d}",
            "interface": "enp28s0np0",
            "ipv4_cidr": f"10.1.{i // 250}.{i % 250 + 1}/16",
        }
        for i in range(1000)
    ]
    response = api.post(url(site.pk), {"items": items}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["created"] == 1000

"""The hardware profile of a SKU, an onboarding's reports and a node's quarantine evidence,
through the API as a client sees them (docs/hardware.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, Sku
from maas_domain.services import evidence as evidence_services
from tests.factories import make_node, make_onboarding, make_site, make_sku

pytestmark = pytest.mark.django_db
BASE = "/api/v1/admin"
PROFILE = {
    "gpu": {"pci_ids": ["10de:2330"], "per_numa_node": {"0": 4, "1": 4}},
    "cpu": {"min": 112, "max": 224},
    "nics": [{"role": "fabric", "count": 8, "min_speed_mbps": 400000}],
}


def test_a_sku_carries_its_hardware_profile_and_the_change_is_audited(api: APIClient) -> None:
    body = {"code": "h100x8", "name": "8x H100", "gpu_model": "H100", "gpu_count": 8,
            "hardware": PROFILE}  # fmt: skip
    created = api.post(f"{BASE}/skus", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["hardware"] == PROFILE
    sku = Sku.objects.get()
    assert sku.hardware == PROFILE
    assert AuditLog.objects.get(action="sku.create").after["hardware"] == PROFILE
    # the profile is replaced as a whole
    patched = api.patch(f"{BASE}/skus/{sku.pk}", {"hardware": {"memory": {"min_gib": 2000}}},
                        format="json")  # fmt: skip
    assert patched.status_code == 200 and patched.json()["hardware"] == {
        "memory": {"min_gib": 2000}
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpu_count": 8, "hardware": {"cpu": {"min": 300, "max": 200}}}, "hardware.cpu.min"),
        ({"gpu_count": 0, "hardware": {"gpu": {"pci_ids": ["10de:2330"]}}}, "hardware.gpu"),
        ({"gpu_count": 8, "hardware": {"nics": [{"role": "x"}]}}, "hardware.nics.0.count"),
        ({"gpu_count": 8, "hardware": {"disk": []}}, "hardware.disk"),
        ({"gpu_count": 8, "hardware": "8x H100"}, "hardware"),
    ],
)
def test_an_impossible_profile_is_a_400_naming_the_field_and_creates_nothing(
    api: APIClient, body: dict[str, Any], field: str
) -> None:
    response = api.post(f"{BASE}/skus", {"code": "bad", "name": "bad", **body}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert not Sku.objects.exists() and not AuditLog.objects.exists()


def test_a_gpu_count_that_no_longer_adds_up_is_refused_and_changes_nothing(api: APIClient) -> None:
    sku = make_sku(
        code="h100x8", gpu_count=8, hardware={"gpu": {"per_numa_node": {"0": 4, "1": 4}}}
    )
    response = api.patch(f"{BASE}/skus/{sku.pk}", {"gpu_count": 4}, format="json")
    assert response.status_code == 400
    assert "Adds up to 8" in response.json()["fields"]["hardware.gpu.per_numa_node"][0]
    sku.refresh_from_db()
    assert (sku.gpu_count, sku.revision) == (8, 1)


def test_an_onboarding_shows_its_hardware_report(api: APIClient) -> None:
    check = {"requirement": "gpu.count", "expected": "8", "observed": "7", "passed": False}
    report = {"sku": "gpu-8x", "mode": "enforce", "conformant": False, "checks": [check]}
    wf = make_onboarding(make_site(), state="failed", hardware_report=report)
    got = api.get(f"{BASE}/onboardings/{wf.pk}").json()
    assert got["hardware_report"] == report
    assert got["acceptance_report"] == {}


def _evidence(node: Any, **fields: Any) -> Any:
    values = {"kind": "hardware_nonconformant", "workflow_kind": "onboarding", "workflow_id": 7,
              "maas_system_id": "abc123", "reason": "7 GPUs", "timeline": [],
              "report": {"checks": [], "maas_events": [{"created": "x", "level": "INFO",
                                                         "message": "GPU gone"}]}}  # fmt: skip
    with transaction.atomic():
        return evidence_services.freeze(node=node, **{**values, **fields})


def test_a_node_lists_and_shows_its_frozen_evidence(api: APIClient) -> None:
    site = make_site()
    node, other = make_node(site, hostname="g01"), make_node(site, hostname="g02")
    first = _evidence(node)
    second = _evidence(node, kind="acceptance_failed", reason="burn-in failed")
    _evidence(other)
    listed = api.get(f"{BASE}/nodes/{node.pk}/evidence").json()
    assert [e["id"] for e in listed["results"]] == [second.pk, first.pk]  # newest first
    assert listed["results"][0]["kind"] == "acceptance_failed"
    detail = api.get(f"{BASE}/nodes/{node.pk}/evidence/{first.pk}").json()
    assert detail["maas_events"] == [{"created": "x", "level": "INFO", "message": "GPU gone"}]
    assert detail["report"] == {"checks": []}
    # evidence is read through its own node only, and no one writes it through the API
    assert api.get(f"{BASE}/nodes/{other.pk}/evidence/{first.pk}").status_code == 404
    assert api.get(f"{BASE}/nodes/999999/evidence").status_code == 404
    assert api.delete(f"{BASE}/nodes/{node.pk}/evidence/{first.pk}").status_code == 405
    assert api.post(f"{BASE}/nodes/{node.pk}/evidence", {}, format="json").status_code == 405

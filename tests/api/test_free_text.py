"""Free text holds no control or bidirectional formatting character (docs/security.md, T18):
SKU names, hardware strings, site descriptions, reasons, token names were stored as given, so a
name could display in another order than it is stored ("Trojan Source") or carry terminal
escapes into maasctl's tables. Every string of a request, a value or a field name, on every
route (the admin API, the node routes, the admin pages' forms), is held to one rule
(``maas_domain.validators.text_error``): a 400 naming the field, nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite, Sku
from tests.factories import make_onboarding, make_site

pytestmark = pytest.mark.django_db

HOSTILE = {
    "right-to-left override": "\u202e",
    "first strong isolate": "\u2068",
    "right-to-left mark": "\u200f",
    "arabic letter mark": "\u061c",
    "next line (C1)": "\x85",
    "control sequence introducer (C1)": "\x9b",
    "escape (C0)": "\x1b",
    "delete": "\x7f",
}
SITE = {"name": "dc1", "maas_url": "http://maas.test:5240/MAAS/"}


def bodies(bad: str) -> list[tuple[str, dict[str, Any], str]]:
    """(path, body, the field the answer must name)."""
    sku = {"code": "h100x8", "name": "8x H100"}
    return [
        ("/api/v1/admin/skus", {**sku, "name": f"8x H100{bad}"}, "name"),
        ("/api/v1/admin/skus", {**sku, "gpu_model": f"H{bad}100"}, "gpu_model"),
        (
            "/api/v1/admin/skus",
            {**sku, "hardware": {"firmware": {"mainboard_firmware_version": ["2.1", f"2{bad}"]}}},
            "hardware.firmware.mainboard_firmware_version[1]",
        ),
        ("/api/v1/admin/maas-sites", {**SITE, "description": f"east {bad}hall"}, "description"),
        ("/api/v1/admin/maas-sites", {**SITE, "policy": {f"erase{bad}": 1}}, "policy"),
        ("/api/v1/admin/tokens", {"name": f"ci{bad}"}, "name"),
    ]


@pytest.mark.parametrize("char", sorted(HOSTILE))
def test_the_admin_api_refuses_it_naming_the_field(api: APIClient, char: str) -> None:
    for path, body, field in bodies(HOSTILE[char]):
        answer = api.post(path, body, format="json")
        assert answer.status_code == 400, (path, answer.content[:300])
        assert answer.json()["error"] == "validation_error"
        assert list(answer.json()["fields"]) == [field], (path, answer.json())
        assert "not accepted in text" in answer.json()["fields"][field][0]
    assert not Sku.objects.exists() and not MaasSite.objects.exists()
    assert not AuditLog.objects.exists()


def test_a_reason_and_a_node_report_are_held_to_it_too(api: APIClient) -> None:
    wf = make_onboarding(make_site(), state="failed", stage="deploy")
    verb = api.post(f"/api/v1/admin/onboardings/{wf.pk}/retry",
                    {"reason": "flaky \u202eBMC"}, format="json")  # fmt: skip
    assert verb.status_code == 400 and list(verb.json()["fields"]) == ["reason"], verb.content
    report = {"onboarding_id": wf.pk, "attempt": 1, "hostname": "c07u31", "phase": "site_bundle",
              "status": "failed", "bootstrap_token": "t" * 40}  # fmt: skip
    report["detail"] = "disk \x9b31m full"
    node = APIClient().post("/api/v1/node/report", report, format="json")
    assert node.status_code == 400 and list(node.json()["fields"]) == ["detail"], node.content
    assert not AuditLog.objects.exists()


def test_text_that_only_looks_foreign_is_kept(api: APIClient) -> None:
    """The rule refuses formatting and control characters, never scripts or layout."""
    name = "8\u00d7 H100 \u2014 Gr\u00fcnwald \u6771\u4eac \u0639\u0631\u0628\u064a"
    answer = api.post("/api/v1/admin/skus", {"code": "h100x8", "name": name}, format="json")
    assert answer.status_code == 201, answer.content
    layout = {**SITE, "description": "row 7\thall B\nsecond line"}
    site = api.post("/api/v1/admin/maas-sites", layout, format="json")
    assert site.status_code == 201, site.content
    assert Sku.objects.get().name == name


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("char", ["\u202e", "\x85"])
def test_the_admin_pages_refuse_it_naming_the_field(ops: Any, char: str) -> None:
    sku = {"code": "h100x8", "name": f"8x{char}H100", "gpu_model": "H100", "gpu_count": 8,
           "active": "on", "hardware": "{}"}  # fmt: skip
    answer = ops.post("/admin/maas_domain/sku/add/", sku)
    assert answer.status_code == 400 and answer.content.decode().startswith("Not accepted: name:")
    wf = make_onboarding(make_site(), state="failed", stage="deploy")
    reason = ops.post(f"/admin/onboarding/onboarding/{wf.pk}/verb/retry/",
                      {"reason": f"x{char}y", "confirmed": "yes"})  # fmt: skip
    assert reason.status_code == 400 and b"reason:" in reason.content
    assert not Sku.objects.filter(code="h100x8").exists() and not AuditLog.objects.exists()
    wf.refresh_from_db()
    assert wf.state == "failed"

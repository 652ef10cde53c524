"""POST /api/v1/admin/maas-sites/{id}/probe against the simulator."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite, SiteCredential
from maas_domain.secrets.sites import maas_api_key
from maas_simulator.users import User
from tests.factories import make_profile, make_site
from tests.support.maas import API_KEY, Sim

pytestmark = pytest.mark.django_db
OTHER_ADMIN_KEY = "OtherConsumer12345:OtherToken12345678:OtherSecretABCDEFGHIJKLMNOPQRSTU"


def setup_site(
    api: APIClient, sim: Sim, *, key: str = API_KEY, ipmi: bool = True, **site: Any
) -> MaasSite:
    created = make_site(maas_url=sim.url, pxe_subnet="10.20.0.0/16", **site)
    payload: dict[str, Any] = {"maas_api_key": key}
    if ipmi:
        payload["ipmi"] = {"username": "maas", "password": "ipmi-secret"}
    assert (
        api.post(
            f"/api/v1/admin/maas-sites/{created.pk}/credentials", payload, format="json"
        ).status_code
        == 200
    )
    make_profile(created, name="h100", distro_series="jammy", architecture="amd64/generic")
    return created


def probe(api: APIClient, site: MaasSite) -> dict[str, Any]:
    response = api.post(f"/api/v1/admin/maas-sites/{site.pk}/probe")
    assert response.status_code == 200, response.content
    return response.json()


def checks(result: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    return {c["name"]: (c["ok"], c["detail"]) for c in result["checks"]}


def test_healthy_probe_records_result_on_site_and_audits(api: APIClient, sim: Sim) -> None:
    site = setup_site(api, sim)
    result = probe(api, site)
    assert result["health"] == "healthy", result
    assert set(checks(result)) == {
        "connectivity",
        "authentication",
        "version",
        "boot_resources",
        "pxe_subnets",
        "testing_scripts",
        "power_credentials",
        "node_trust",
    }
    assert all(ok for ok, _ in checks(result).values())
    assert "admin" in checks(result)["authentication"][1]
    assert all(c["duration_ms"] >= 0 for c in result["checks"])
    site.refresh_from_db()
    assert site.health == "healthy" and site.last_probe_at is not None
    assert site.probe_result["checks"] == result["checks"]
    assert SiteCredential.objects.get(site=site, kind="maas_api_key").confirmed_at is not None
    audit = AuditLog.objects.get(action="maas_site.probe")
    assert audit.after["health"] == "healthy"
    detail = api.get(f"/api/v1/admin/maas-sites/{site.pk}").json()
    assert detail["health"] == "healthy"
    assert detail["probe_result"]["health"] == "healthy"


def test_unreachable_maas_is_a_failed_check_not_a_500(api: APIClient) -> None:
    site = make_site(maas_url="http://127.0.0.1:9/MAAS/")
    api.post(
        f"/api/v1/admin/maas-sites/{site.pk}/credentials", {"maas_api_key": API_KEY}, format="json"
    )
    result = probe(api, site)
    assert result["health"] == "unhealthy"
    found = checks(result)
    assert found["connectivity"][0] is False
    assert "transient" in found["connectivity"][1]
    assert found["authentication"] == (False, "not checked: MAAS is unreachable")


def test_bad_key_fails_authentication(api: APIClient, sim: Sim) -> None:
    consumer, token, _ = API_KEY.split(":")
    site = setup_site(api, sim, key=f"{consumer}:{token}:wrongsecret")
    result = probe(api, site)
    assert result["health"] == "unhealthy"
    ok, detail = checks(result)["authentication"]
    assert not ok and "Invalid signature" in detail
    assert checks(result)["version"] == (False, "not checked: not authenticated")


def test_slow_maas_fails_within_the_probe_timeout(api: APIClient, sim: Sim, settings: Any) -> None:
    settings.MAAS_PROBE_TIMEOUT = 0.3
    site = setup_site(api, sim)
    sim.faults({"kind": "slow", "count": 5, "delay": 1.0})
    result = probe(api, site)
    assert result["health"] == "unhealthy"
    assert "ReadTimeout" in checks(result)["connectivity"][1]


def test_missing_boot_resource_subnet_and_power_credentials_degrade(
    api: APIClient, sim: Sim
) -> None:
    site = setup_site(api, sim, ipmi=False)
    make_profile(site, name="focal", distro_series="focal", pxe_subnet="10.99.0.0/24")
    result = probe(api, site)
    assert result["health"] == "degraded"
    found = checks(result)
    assert found["boot_resources"] == (False, "no boot resource for: amd64/focal")
    assert found["pxe_subnets"] == (False, "PXE subnet(s) not in MAAS: 10.99.0.0/24")
    assert found["power_credentials"][0] is False
    assert found["authentication"][0] is True


def test_non_admin_key_fails(api: APIClient, sim: Sim) -> None:
    sim.model.users["viewer"] = User(
        "viewer", False, "ViewerConsumer1234", "ViewerToken1234567", "ViewerSecret"
    )
    site = setup_site(api, sim, key="ViewerConsumer1234:ViewerToken1234567:ViewerSecret")
    ok, detail = checks(probe(api, site))["authentication"]
    assert not ok and "not an administrator" in detail


def test_expected_maas_user_is_checked(api: APIClient, sim: Sim) -> None:
    site = setup_site(api, sim, maas_user="gpuaas-deployer")
    ok, detail = checks(probe(api, site))["authentication"]
    assert not ok and "expected 'gpuaas-deployer'" in detail


def test_rotation_is_confirmed_by_the_probe(api: APIClient, sim: Sim) -> None:
    ck, tk, ts = OTHER_ADMIN_KEY.split(":")
    sim.model.users["admin2"] = User("admin2", True, ck, tk, ts)
    site = setup_site(api, sim)
    probe(api, site)
    api.post(
        f"/api/v1/admin/maas-sites/{site.pk}/credentials",
        {"maas_api_key": OTHER_ADMIN_KEY},
        format="json",
    )
    assert maas_api_key(site=site) == API_KEY  # still the proven key
    result = probe(api, site)
    assert "new key confirmed" in checks(result)["authentication"][1]
    ref = SiteCredential.objects.get(site=site, kind="maas_api_key")
    assert (ref.version, ref.pending_version) == (2, None)
    assert maas_api_key(site=site) == OTHER_ADMIN_KEY
    assert (
        AuditLog.objects.filter(action="maas_site.probe")
        .first()
        .after["confirmed_maas_key_version"]
        == 2
    )


def test_rejected_rotation_stays_pending_and_old_key_keeps_working(
    api: APIClient, sim: Sim
) -> None:
    site = setup_site(api, sim)
    probe(api, site)
    api.post(
        f"/api/v1/admin/maas-sites/{site.pk}/credentials",
        {"maas_api_key": "not:a:realkey"},
        format="json",
    )
    result = probe(api, site)
    assert result["health"] == "healthy"
    assert "was rejected; it stays pending" in checks(result)["authentication"][1]
    ref = SiteCredential.objects.get(site=site, kind="maas_api_key")
    assert (ref.version, ref.pending_version) == (1, 2)
    assert maas_api_key(site=site) == API_KEY


def test_probe_rejects_parameters_and_unknown_site(api: APIClient, sim: Sim) -> None:
    site = setup_site(api, sim)
    bad = api.post(f"/api/v1/admin/maas-sites/{site.pk}/probe", {"deep": True}, format="json")
    assert bad.status_code == 400
    assert "deep" in bad.json()["fields"]
    assert api.post("/api/v1/admin/maas-sites/424242/probe").status_code == 404
    assert not AuditLog.objects.filter(action="maas_site.probe").exists()


def test_probe_names_the_field_and_fix_when_nodes_could_not_trust_us(
    api: APIClient, sim: Sim, settings: Any
) -> None:
    """A site made with the deployment's CA whose deployment then lost it (production without
    MAASCP_NODE_CA_FILE): the probe flags it (degraded), so it is seen before any onboarding
    reaches preflight."""
    site = setup_site(api, sim)
    assert checks(probe(api, site))["node_trust"][0] is True
    settings.NODE_CA_PEM = ""
    result = probe(api, site)
    ok, detail = checks(result)["node_trust"]
    assert not ok and result["health"] == "degraded"
    assert detail.startswith("ca_bundle_pem: No CA bundle") and "MAASCP_NODE_CA_FILE" in detail

"""POST /api/v1/admin/maas-sites/{id}/credentials: write-only secrets, metadata answers."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, SecretVersion, SiteCredential
from maas_domain.secrets import SecretsUnavailable
from maas_domain.secrets.sites import ipmi_credentials, maas_api_key
from tests.factories import make_site

pytestmark = pytest.mark.django_db

API_KEY = "ConsumerKey1234567:TokenKey1234567890:TokenSecretABCDEFGHIJKLMNOPQRSTU12"
ROTATED_KEY = "ConsumerKey1234567:TokenKey1234567890:RotatedSecretZZZZZZZZZZZZZZZZZZZ9"
IPMI_PASSWORD = "ipmi-pa55-Very-Secret"
OVERRIDE_PASSWORD = "override-pa55-Secret"
ALL_SECRETS = ("TokenSecretABCDEF", "RotatedSecretZZZ", IPMI_PASSWORD, OVERRIDE_PASSWORD)


def url(site_id: int) -> str:
    return f"/api/v1/admin/maas-sites/{site_id}/credentials"


def full_payload() -> dict[str, Any]:
    return {
        "maas_api_key": API_KEY,
        "ipmi": {"username": "maas", "password": IPMI_PASSWORD},
        "power_overrides": [
            {"hostname": "c07u31", "username": "root", "password": OVERRIDE_PASSWORD}
        ],
    }


def assert_no_secret_in(text: str) -> None:
    for secret in ALL_SECRETS:
        assert secret not in text


def test_write_answers_metadata_only_and_secret_is_readable_by_backend(
    api: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    site = make_site()
    response = api.post(url(site.pk), full_payload(), format="json")
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["maas_api_key"]["fields_set"] == ["api_key"]
    assert data["maas_api_key"]["version"] == 1
    assert data["maas_api_key"]["confirmed_at"] is None  # a probe confirms it
    assert data["maas_api_key"]["rotated_by"] == "ops-admin"
    assert data["ipmi"]["fields_set"] == ["username", "password"]
    assert data["power_overrides"][0]["hostname"] == "c07u31"
    # nothing secret anywhere a person or a log shipper can see
    assert_no_secret_in(response.content.decode())
    assert_no_secret_in(api.get(f"/api/v1/admin/maas-sites/{site.pk}").content.decode())
    assert_no_secret_in(json.dumps(list(AuditLog.objects.values("before", "after"))))
    assert_no_secret_in(caplog.text)
    assert_no_secret_in(
        " ".join(bytes(v).hex() for v in SecretVersion.objects.values_list("ciphertext", flat=True))
    )
    assert_no_secret_in(
        b"".join(
            bytes(v) for v in SecretVersion.objects.values_list("ciphertext", flat=True)
        ).decode("latin-1")
    )
    # ...but the backend gives the values back to the code that needs them
    assert maas_api_key(site=site) == API_KEY
    assert ipmi_credentials(site=site, hostname="c07u31").password == OVERRIDE_PASSWORD
    assert ipmi_credentials(site=site, hostname="c07u99").password == IPMI_PASSWORD
    assert IPMI_PASSWORD not in repr(ipmi_credentials(site=site, hostname="c07u99"))
    audit = AuditLog.objects.get(action="maas_site.credentials.write")
    assert audit.after["maas_api_key"]["version"] == 1


def test_api_key_rotation_keeps_previous_version_until_confirmed(api: APIClient) -> None:
    site = make_site()
    api.post(url(site.pk), {"maas_api_key": API_KEY}, format="json")
    response = api.post(url(site.pk), {"maas_api_key": ROTATED_KEY}, format="json")
    meta = response.json()["maas_api_key"]
    assert (meta["version"], meta["pending_version"]) == (1, 2)
    assert maas_api_key(site=site) == API_KEY  # workflows keep using the proven key
    assert maas_api_key(site=site, pending=True) == ROTATED_KEY  # the probe tries the new one
    audit = AuditLog.objects.filter(action="maas_site.credentials.write").first()
    assert audit is not None
    assert audit.before["maas_api_key"]["pending_version"] is None
    assert audit.after["maas_api_key"]["pending_version"] == 2


def test_ipmi_rotation_takes_effect_at_once(api: APIClient) -> None:
    site = make_site()
    api.post(url(site.pk), {"ipmi": {"username": "a", "password": "first-pass"}}, format="json")
    api.post(url(site.pk), {"ipmi": {"username": "a", "password": "second-pass"}}, format="json")
    assert ipmi_credentials(site=site, hostname="any").password == "second-pass"
    assert SiteCredential.objects.get(site=site, kind="ipmi_default").version == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"maas_api_key": "only:two"}, "maas_api_key"),
        ({"maas_api_key": "a:b:c:d"}, "maas_api_key"),
        ({"maas_api_key": "a::c"}, "maas_api_key"),
        ({"ipmi": {"username": "u"}}, "ipmi.password"),
        ({"ipmi": {"username": "u", "password": "p", "port": 623}}, "ipmi.port"),
        (
            {"power_overrides": [{"hostname": "Bad Host", "username": "u", "password": "p"}]},
            "power_overrides[0].hostname",
        ),
        (
            {
                "power_overrides": [
                    {"hostname": "h1", "username": "u", "password": "p"},
                    {"hostname": "h1", "username": "u", "password": "q"},
                ]
            },
            "power_overrides[1].hostname",
        ),
        ({}, "non_field_errors"),
        ({"token": "x"}, "token"),
    ],
)
def test_bad_credentials_are_400_and_store_nothing(api: APIClient, body: dict, field: str) -> None:
    site = make_site()
    response = api.post(url(site.pk), body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert not SecretVersion.objects.exists()
    assert not AuditLog.objects.exists()
    # a rejected secret is not echoed back in the error either
    assert "only:two" not in json.dumps(response.json()["fields"])


def test_unknown_site_is_404(api: APIClient) -> None:
    assert api.post(url(424242), {"maas_api_key": API_KEY}, format="json").status_code == 404


def test_backend_outage_is_503_and_changes_nothing(
    api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from maas_domain.secrets.database import DatabaseBackend

    def down(self: Any, path: str, data: dict, *, cas: int | None = None) -> int:
        raise SecretsUnavailable("Vault unavailable: VaultDown")

    monkeypatch.setattr(DatabaseBackend, "write", down)
    site = make_site()
    response = api.post(url(site.pk), full_payload(), format="json")
    assert response.status_code == 503
    assert response.json()["error"] == "unavailable"
    assert not SiteCredential.objects.exists()
    assert not AuditLog.objects.exists()


def test_a_process_reads_a_key_version_once_and_a_rotation_at_once(
    admin_user: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every workflow step needs the site's MAAS key: a version (which never changes) is read
    from the backend once per process; a confirmed rotation is a new version, used at once."""
    from maas_domain.secrets import get_backend
    from maas_domain.services.credentials import site_credentials_write

    site = make_site()
    backend = get_backend()
    reads: list[tuple[str, Any]] = []
    real_read = backend.read

    def counted(path: str, version: int | None = None) -> dict[str, str]:
        reads.append((path, version))
        return real_read(path, version)

    monkeypatch.setattr(backend, "read", counted)
    key1, key2 = "aaaa:bbbb:cccc", "dddd:eeee:ffff"
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": key1})
    SiteCredential.objects.filter(site=site).update(version=1, pending_version=None)
    assert [maas_api_key(site=site) for _ in range(3)] == [key1] * 3
    assert len(reads) == 1
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": key2})
    assert maas_api_key(site=site) == key1  # pending until a probe confirms it
    SiteCredential.objects.filter(site=site).update(version=2, pending_version=None)
    assert maas_api_key(site=site) == key2  # confirmed: read at once
    settings.SECRETS_CACHE_SECONDS = 0
    reads.clear()
    assert [maas_api_key(site=site) for _ in range(2)] == [key2] * 2
    assert len(reads) == 2  # the cache turned off

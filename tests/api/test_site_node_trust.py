"""A site made through the API alone can onboard: CA bundle, node API URL, the first-live-run
guard, all writable and shown (the CA as subject, fingerprint and validity)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from rest_framework.test import APIClient

from devtools.demo import demo_ca_pem
from maas_domain.models import AuditLog, MaasSite

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/maas-sites"


def expired_ca() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=30))
        .not_valid_after(now - datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def private_key_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def create(api: APIClient, **fields: Any) -> Any:
    body = {"name": "lab", "maas_url": "http://maas.lab.test:5240/MAAS/", **fields}
    return api.post(URL, body, format="json")


def test_node_trust_and_guard_fields_round_trip(api: APIClient) -> None:
    ca = demo_ca_pem()
    response = create(
        api,
        ca_bundle_pem=ca + "\n",  # a trailing newline is kept as written
        node_api_url="https://cp.lab.test:8443",
        payload_allowed_hosts=["cp.lab.test"],
        guarded=True,
        approved_hosts=["c07u31", "c07u32", "c07u31"],
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["ca_bundle_pem"] == ca + "\n"
    assert data["node_api_url"] == "https://cp.lab.test:8443"
    assert data["guarded"] is True
    assert data["approved_hosts"] == ["c07u31", "c07u32"]  # duplicates dropped, order kept
    [cert] = data["ca_certificates"]
    assert cert["subject"] == "CN=maascp demo CA"
    assert len(cert["fingerprint_sha256"].split(":")) == 32
    assert cert["not_after"] > cert["not_before"]
    site = MaasSite.objects.get()
    assert (site.guarded, site.node_api_url) == (True, "https://cp.lab.test:8443")
    patched = api.patch(f"{URL}/{site.pk}", {"guarded": False, "ca_bundle_pem": ""}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["ca_certificates"] == [] and patched.json()["guarded"] is False
    assert AuditLog.objects.filter(action="maas_site.update").count() == 1


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("ca_bundle_pem", "not a certificate", "Not PEM"),
        ("ca_bundle_pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
         "does not parse"),
        ("ca_bundle_pem", None, "Only CERTIFICATE blocks"),  # a private key pasted by mistake
        ("ca_bundle_pem", "expired", "expired on"),
        ("node_api_url", "ftp://cp.lab.test/", "valid URL"),
        ("node_api_url", "javascript:alert(1)", "valid URL"),
        ("approved_hosts", ["ok-host", "Bad_Host"], "Not a valid hostname"),
        ("approved_hosts", "c07u31", "list"),
        ("guarded", "maybe", "valid boolean"),
    ],
)  # fmt: skip
def test_bad_trust_or_guard_values_are_refused_and_change_nothing(
    api: APIClient, field: str, value: Any, reason: str
) -> None:
    if value is None:
        value = demo_ca_pem() + private_key_pem()
    elif value == "expired":
        value = expired_ca()
    response = create(api, **{field: value})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error"
    reasons = " ".join(r for k, rs in body["fields"].items() if k.startswith(field) for r in rs)
    assert reason in reasons, body
    assert "PRIVATE KEY" not in response.content.decode().replace("found PRIVATE KEY", "")
    assert not MaasSite.objects.exists() and not AuditLog.objects.exists()


def test_a_stored_bundle_cannot_be_replaced_by_a_bad_one(api: APIClient) -> None:
    site = create(api, ca_bundle_pem=demo_ca_pem()).json()
    response = api.patch(f"{URL}/{site['id']}", {"ca_bundle_pem": "junk"}, format="json")
    assert response.status_code == 400
    assert MaasSite.objects.get().ca_bundle_pem == site["ca_bundle_pem"]


def test_a_site_made_as_readme_says_gets_the_deployments_node_url_and_ca(
    api: APIClient, settings: Any
) -> None:
    """README's curl sends a name and a MAAS URL only: its nodes get the deployment's node URL
    and CA (embedded: the stack's own), shown on the site, put in the first-boot payload, and
    the preflight's trust check passes (it used to fail there: "no CA material")."""
    from maas_domain.nodetrust import trust_problems
    from onboarding import payload
    from tests.factories import make_onboarding

    settings.NODE_API_URL = "http://127.0.0.1:18100"
    response = create(api)
    assert response.status_code == 201, response.json()
    trust = response.json()["node_trust"]
    assert trust["node_api_url"] == "http://127.0.0.1:18100"
    assert (trust["node_api_url_source"], trust["ca_source"]) == ("deployment", "deployment")
    assert [c["subject"] for c in trust["ca_certificates"]] == ["CN=maascp embedded node CA"]
    assert trust["problems"] == {}
    site = MaasSite.objects.get()
    wf = make_onboarding(site, hostname="c07u31")
    fb = payload.first_boot(wf, site.effective_policy(), payload.Tokens("x" * 43, "y" * 43))
    assert fb.ca_pem == settings.NODE_CA_PEM.strip() and fb.node_api_url.endswith(":18100")
    assert trust_problems(site) == {}  # what the preflight stage checks
    # the site's own values win, and say so
    own = api.patch(
        f"{URL}/{site.pk}",
        {
            "ca_bundle_pem": demo_ca_pem(),
            "node_api_url": "https://cp.lab.test",
            "payload_allowed_hosts": ["cp.lab.test"],
        },
        format="json",
    ).json()["node_trust"]
    assert (own["node_api_url_source"], own["ca_source"]) == ("site", "site")
    assert [c["subject"] for c in own["ca_certificates"]] == ["CN=maascp demo CA"]


def test_without_a_deployment_ca_a_site_without_its_own_is_refused_with_the_fix(
    api: APIClient, settings: Any
) -> None:
    """Production without MAASCP_NODE_CA_FILE: the create names the field and both fixes; a
    site with its own CA is accepted, and cannot drop it later."""
    settings.NODE_CA_PEM = ""
    refused = create(api)
    assert refused.status_code == 400
    [reason] = refused.json()["fields"]["ca_bundle_pem"]
    assert "set ca_bundle_pem on the site" in reason and "MAASCP_NODE_CA_FILE" in reason
    assert not MaasSite.objects.exists()
    made = create(api, ca_bundle_pem=demo_ca_pem())
    assert made.status_code == 201, made.json()
    assert made.json()["node_trust"]["ca_source"] == "site"
    dropped = api.patch(f"{URL}/{made.json()['id']}", {"ca_bundle_pem": ""}, format="json")
    assert dropped.status_code == 400
    assert "MAASCP_NODE_CA_FILE" in dropped.json()["fields"]["ca_bundle_pem"][0]
    # other edits (disabling, a description) still work on it
    described = api.patch(f"{URL}/{made.json()['id']}", {"description": "x"}, format="json")
    assert described.status_code == 200

"""A MAAS credential is bound to the URL and TLS setting it was written for (docs/security.md, T2).

Changing a site's ``maas_url`` or ``verify_tls`` resets its health and the key's confirmation;
nothing that carries the key (the OAuth PLAINTEXT signature is the token secret in clear) or an
IPMI password goes to the new address until an operator confirms it: a probe with
``{"confirm_maas_url": <the new URL>}``, or new credentials. Each step is audited.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite, SiteCredential
from maas_domain.secrets import SecretsError
from maas_domain.site_client import client_for_site
from tests.factories import make_profile, make_site
from tests.support.maas import API_KEY, Sim
from tests.support.recorder import Recorder

pytestmark = pytest.mark.django_db
TOKEN_SECRET = API_KEY.split(":")[2]
SITES = "/api/v1/admin/maas-sites"


def healthy_site(api: APIClient, sim: Sim) -> MaasSite:
    site = make_site(maas_url=sim.url, pxe_subnet="10.20.0.0/16")
    make_profile(site, name="h100", distro_series="jammy", architecture="amd64/generic")
    body = {"maas_api_key": API_KEY, "ipmi": {"username": "maas", "password": "ipmi-secret-9"}}
    assert api.post(f"{SITES}/{site.pk}/credentials", body, format="json").status_code == 200
    assert api.post(f"{SITES}/{site.pk}/probe").json()["health"] == "healthy"
    site.refresh_from_db()
    return site


def leaked(rec: Recorder) -> list[str]:
    text = rec.everything()
    return [
        what
        for what, needle in (
            ("token secret", TOKEN_SECRET),
            ("Authorization header", "Authorization"),
            ("oauth signature", "oauth_signature"),
            ("IPMI password", "ipmi-secret-9"),
        )
        if needle.lower() in text.lower()
    ]


@pytest.mark.parametrize(
    "change", [lambda rec: {"maas_url": rec.url + "/MAAS/"}, lambda rec: {"verify_tls": False}]
)
def test_changing_url_or_tls_resets_health_and_confirmation(
    api: APIClient, sim: Sim, recorder: Recorder, change: Any
) -> None:
    site = healthy_site(api, sim)
    response = api.patch(f"{SITES}/{site.pk}", change(recorder), format="json")
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["health"] == "unknown"
    assert data["credentials"]["maas_api_key"]["confirmed_at"] is None
    row = AuditLog.objects.filter(action="maas_site.update").latest("id")
    assert row.after["health"] == "unknown"
    assert "credentials_unbound" in row.reason


def test_nothing_secret_reaches_a_changed_maas_url_without_confirmation(
    api: APIClient, sim: Sim, recorder: Recorder
) -> None:
    site = healthy_site(api, sim)
    new_url = recorder.url + "/MAAS/"
    assert api.patch(f"{SITES}/{site.pk}", {"maas_url": new_url}, format="json").status_code == 200
    site.refresh_from_db()
    # a poll, a workflow stage, a reconcile: anything that builds the site's client
    with pytest.raises(SecretsError, match="confirm"):
        client_for_site(site)
    # a probe without confirmation checks reachability only
    result = api.post(f"{SITES}/{site.pk}/probe").json()
    assert result["health"] == "unhealthy"
    auth = next(c for c in result["checks"] if c["name"] == "authentication")
    assert not auth["ok"] and "confirm_maas_url" in auth["detail"]
    assert recorder.seen, "the probe should still test connectivity"
    assert leaked(recorder) == []
    # a confirmation naming another URL is refused and sends nothing
    wrong = api.post(f"{SITES}/{site.pk}/probe", {"confirm_maas_url": sim.url}, format="json")
    assert wrong.status_code == 400
    assert "confirm_maas_url" in wrong.json()["fields"]
    assert leaked(recorder) == []


def test_an_explicit_confirmation_binds_the_key_to_the_new_url(
    api: APIClient, sim: Sim, recorder: Recorder
) -> None:
    site = healthy_site(api, sim)
    # the region moved: same MAAS, new address (here: the same simulator under another URL)
    moved = sim.url.replace("127.0.0.1", "localhost")
    assert api.patch(f"{SITES}/{site.pk}", {"maas_url": moved}, format="json").status_code == 200
    response = api.post(f"{SITES}/{site.pk}/probe", {"confirm_maas_url": moved}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["health"] == "healthy"
    site.refresh_from_db()
    client_for_site(site).close()  # bound again: workflows may use it
    row = AuditLog.objects.get(action="maas_site.credentials.confirm_url")
    assert row.after["maas_url"] == moved and row.after["verify_tls"] is True


def test_new_credentials_bind_to_the_current_url_and_the_old_key_is_not_sent(
    api: APIClient, sim: Sim, recorder: Recorder
) -> None:
    site = healthy_site(api, sim)
    new_url = recorder.url + "/MAAS/"
    assert api.patch(f"{SITES}/{site.pk}", {"maas_url": new_url}, format="json").status_code == 200
    fresh = "FreshConsumer12345:FreshToken12345678:FreshSecretABCDEFGHIJKLMNOPQRST"
    body = {"maas_api_key": fresh}
    assert api.post(f"{SITES}/{site.pk}/credentials", body, format="json").status_code == 200
    ref = SiteCredential.objects.get(site=site, kind="maas_api_key")
    # written for this URL: in use at once (the old key was for another address)
    assert ref.pending_version is None
    api.post(f"{SITES}/{site.pk}/probe")
    assert TOKEN_SECRET not in recorder.everything()
    assert "FreshSecret" in recorder.everything()  # the new key went where it was written for


def test_the_admin_offers_the_confirmation_and_it_rebinds(
    api: APIClient, client: Any, admin_user: Any, sim: Sim
) -> None:
    site = healthy_site(api, sim)
    client.force_login(admin_user)
    page = f"/admin/maas_domain/maassite/{site.pk}/change/"
    assert 'id="probe-confirm"' not in client.get(page).content.decode()
    moved = sim.url.replace("127.0.0.1", "localhost")
    assert api.patch(f"{SITES}/{site.pk}", {"maas_url": moved}, format="json").status_code == 200
    assert 'id="probe-confirm"' in client.get(page).content.decode()
    probe = f"/admin/maas_domain/maassite/{site.pk}/probe/"
    client.post(probe, {"confirm_maas_url": moved})
    site.refresh_from_db()
    assert site.health == "healthy"
    assert AuditLog.objects.filter(action="maas_site.credentials.confirm_url").count() == 1


def operator_client() -> APIClient:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from tests.support.tokens import bearer_token

    user = get_user_model().objects.create_user("op-1", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='operate')}")
    return client


def test_confirming_a_new_address_is_an_admin_action(api: APIClient, sim: Sim) -> None:
    """The operate role may probe, but a confirmation sends the API key to the new host: it
    needs the admin role, in the service (so the admin pages hold to it too)."""
    site = healthy_site(api, sim)
    moved = sim.url.replace("127.0.0.1", "localhost")
    assert api.patch(f"{SITES}/{site.pk}", {"maas_url": moved}, format="json").status_code == 200
    operator = operator_client()
    assert operator.post(f"{SITES}/{site.pk}/probe").status_code == 200  # probing: operate
    refused = operator.post(f"{SITES}/{site.pk}/probe", {"confirm_maas_url": moved}, format="json")
    assert refused.status_code == 403, refused.content
    site.refresh_from_db()
    assert not SiteCredential.objects.get(site=site, kind="maas_api_key").bound_to(site)
    assert not AuditLog.objects.filter(action="maas_site.credentials.confirm_url").exists()


def test_a_confirmation_is_recorded_only_when_the_probe_authenticates(
    api: APIClient, sim: Sim
) -> None:
    site = healthy_site(api, sim)
    moved = sim.url.replace("127.0.0.1", "localhost")
    assert api.patch(f"{SITES}/{site.pk}", {"maas_url": moved}, format="json").status_code == 200
    sim.faults({"kind": "502", "count": 1, "op": "whoami"})
    answer = api.post(f"{SITES}/{site.pk}/probe", {"confirm_maas_url": moved}, format="json")
    assert answer.status_code == 200
    checks = {c["name"]: c["ok"] for c in answer.json()["checks"]}
    assert checks["authentication"] is False
    site.refresh_from_db()
    assert not SiteCredential.objects.get(site=site, kind="maas_api_key").bound_to(site)
    assert not AuditLog.objects.filter(action="maas_site.credentials.confirm_url").exists()
    # MAAS answers again: the same confirmation now takes
    again = api.post(f"{SITES}/{site.pk}/probe", {"confirm_maas_url": moved}, format="json")
    assert again.json()["health"] == "healthy"
    site.refresh_from_db()
    assert SiteCredential.objects.get(site=site, kind="maas_api_key").bound_to(site)

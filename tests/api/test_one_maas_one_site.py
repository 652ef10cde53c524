"""One MAAS, one site (docs/api.md, "One MAAS, one site"): a second site on a MAAS another site
uses is refused naming it, unless the request names every such site to share with; the same
rule from the API, the admin's site form and maasctl."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite
from maas_domain.services.sites import maas_endpoint, site_create
from tests.factories import make_site

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/maas-sites"
MAAS = "http://maas.lab.test:5240/MAAS/"


def body(**overrides: Any) -> dict[str, Any]:
    return {"name": "lab-west", "maas_url": MAAS, **overrides}


@pytest.mark.parametrize(
    "same",
    [MAAS, "http://maas.lab.test:5240/MAAS", "http://MAAS.lab.test:5240/MAAS/",
     "https://maas.lab.test:5240/MAAS/"],
)  # fmt: skip
def test_a_second_site_on_a_used_maas_is_409_naming_the_other(api: APIClient, same: str) -> None:
    first = make_site(name="lab-east", maas_url=MAAS)
    audits = AuditLog.objects.count()
    response = api.post(URL, body(maas_url=same), format="json")
    assert response.status_code == 409, response.json()
    data = response.json()
    assert data["error"] == "maas_in_use"
    assert "'lab-east'" in data["detail"] and "share_maas_with" in data["detail"]
    assert data["sites_on_maas"] == [{"id": first.pk, "name": "lab-east", "maas_url": MAAS}]
    assert MaasSite.objects.count() == 1 and AuditLog.objects.count() == audits


def test_naming_the_other_site_confirms_the_share_and_is_audited(api: APIClient) -> None:
    make_site(name="lab-east", maas_url=MAAS)
    response = api.post(URL, body(share_maas_with=["lab-east"]), format="json")
    assert response.status_code == 201, response.json()
    assert "share_maas_with" not in response.json()  # a confirmation, not a stored field
    row = AuditLog.objects.get(action="maas_site.create")
    assert row.reason == "shares its MAAS with lab-east (confirmed)"


def test_every_site_on_the_maas_must_be_named(api: APIClient) -> None:
    make_site(name="lab-east", maas_url=MAAS)
    site_create(actor=None, data={"name": "lab-north", "maas_url": MAAS,
                                  "share_maas_with": ["lab-east"]})  # fmt: skip
    response = api.post(URL, body(share_maas_with=["lab-east"]), format="json")
    assert response.status_code == 409
    assert "'lab-north'" in response.json()["detail"]
    assert "'lab-east'" not in response.json()["detail"]
    assert len(response.json()["sites_on_maas"]) == 2


def test_naming_a_site_that_is_not_on_that_maas_is_400(api: APIClient) -> None:
    make_site(name="lab-east", maas_url=MAAS)
    make_site(name="elsewhere", maas_url="http://other.test:5240/MAAS/")
    response = api.post(URL, body(share_maas_with=["elsewhere"]), format="json")
    assert response.status_code == 400
    assert (
        "'elsewhere' is not a site on this MAAS" in response.json()["fields"]["share_maas_with"][0]
    )
    assert not MaasSite.objects.filter(name="lab-west").exists()


def test_a_disabled_site_does_not_hold_its_maas_until_it_is_enabled_again(api: APIClient) -> None:
    old = make_site(name="lab-east", maas_url=MAAS, status="disabled")
    assert api.post(URL, body(), format="json").status_code == 201
    response = api.patch(f"{URL}/{old.pk}", {"status": "active"}, format="json")
    assert response.status_code == 409 and "'lab-west'" in response.json()["detail"]
    assert MaasSite.objects.get(pk=old.pk).status == "disabled"
    response = api.patch(f"{URL}/{old.pk}", {"status": "active", "share_maas_with": ["lab-west"]},
                         format="json")  # fmt: skip
    assert response.status_code == 200, response.json()


def test_moving_a_site_onto_a_used_maas_is_409_and_changes_nothing(api: APIClient) -> None:
    make_site(name="lab-east", maas_url=MAAS)
    other = make_site(name="lab-west", maas_url="http://maas2.lab.test:5240/MAAS/")
    response = api.patch(f"{URL}/{other.pk}", {"maas_url": MAAS}, format="json")
    assert response.status_code == 409 and response.json()["error"] == "maas_in_use"
    other.refresh_from_db()
    assert other.maas_url == "http://maas2.lab.test:5240/MAAS/" and other.revision == 1
    # any other change of a site that already shares (confirmed earlier) needs no new word
    response = api.patch(f"{URL}/{other.pk}", {"description": "rack 7"}, format="json")
    assert response.status_code == 200


def test_a_dry_run_answers_the_refusal_too(api: APIClient) -> None:
    make_site(name="lab-east", maas_url=MAAS)
    response = api.post(f"{URL}?dry_run=true", body(), format="json")
    assert response.status_code == 409 and response.json()["error"] == "maas_in_use"


def test_hostile_names_in_the_confirmation_are_400(api: APIClient) -> None:
    for bad in (["lab east"], ["\u202eevil"], "lab-east", [""], ["x" * 64], [None], {"a": 1}):
        response = api.post(URL, body(share_maas_with=bad), format="json")
        assert response.status_code == 400, (bad, response.json())
        assert "share_maas_with" in str(response.json()["fields"])
    assert not MaasSite.objects.exists()


def test_the_endpoint_ignores_the_scheme_case_and_trailing_slash_only() -> None:
    assert maas_endpoint("http://M.test/MAAS/") == maas_endpoint("http://m.test:80/MAAS")
    assert maas_endpoint("http://m.test:5240/MAAS/") == maas_endpoint("https://m.test:5240/MAAS")
    assert maas_endpoint("http://m.test/MAAS/") != maas_endpoint("https://m.test/MAAS/")  # 80/443
    assert maas_endpoint("http://m.test:5240/MAAS/") != maas_endpoint("http://m.test:5241/MAAS/")
    assert maas_endpoint("http://m.test:5240/MAAS/") != maas_endpoint("http://m.test:5240/other/")

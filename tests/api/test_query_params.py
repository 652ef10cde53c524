"""Strict query parameters (docs/api.md, "Query parameters"): a parameter the OpenAPI document
does not declare for the operation is a 400 naming it, on every route; ids are bounded; an
oversize request target is a JSON 414."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.api.query import MAX_TARGET
from tests.factories import make_node, make_site
from tests.support.openapi import openapi_document

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
OPERATIONS = [
    (method, path, op)
    for path, ops in openapi_document()["paths"].items()
    for method, op in ops.items()
    if method in ("get", "post", "put", "patch", "delete")
]


def concrete(path: str, op: dict[str, Any]) -> str:
    """The path with every parameter filled in: ids 1, a choice's first value."""
    for param in op.get("parameters", []):
        if param["in"] == "path":
            value = param["schema"].get("enum", ["1"])[0]
            path = path.replace("{" + param["name"] + "}", str(value))
    return path


def sample(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return str(schema["enum"][0])
    if schema.get("type") == "array":
        return sample(schema["items"])
    return {
        "boolean": "true",
        "integer": "1",
        "number": "1",
    }.get(schema.get("type", ""), "2026-01-01T00:00:00Z" if schema.get("format") else "x")


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=lambda v: str(v)[:60])
def test_an_undeclared_query_parameter_is_refused_on_every_route(
    api: APIClient, method: str, path: str, op: dict[str, Any]
) -> None:
    url = concrete(path, op) + "?zz_typo=1"
    response = api.generic(method.upper(), url, data="{}", content_type="application/json")
    assert response.status_code == 400, (method, url, response.content)
    body = response.json()
    assert body["error"] == "validation_error"
    assert "zz_typo" in body["fields"]
    assert "zz_typo" in body["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=lambda v: str(v)[:60])
def test_every_declared_query_parameter_is_accepted(
    api: APIClient, method: str, path: str, op: dict[str, Any]
) -> None:
    params = [p for p in op.get("parameters", []) if p["in"] == "query"]
    for param in params:
        url = f"{concrete(path, op)}?{param['name']}={sample(param['schema'])}"
        response = api.generic(method.upper(), url, data="{}", content_type="application/json")
        fields = response.json().get("fields", {}) if response.status_code == 400 else {}
        refusal = " ".join(fields.get(param["name"], []))
        assert "Unknown query parameter" not in refusal, (url, response.content)


@pytest.mark.django_db
def test_a_mistyped_drift_filter_acts_on_nothing(api: APIClient) -> None:
    response = api.get("/api/v1/admin/reconciliation/drift?site_id=1")
    assert response.status_code == 400
    body = response.json()
    assert "site_id" in body["fields"]
    assert "site" in body["fields"]["site_id"][0]  # it says what the route accepts
    assert api.get("/api/v1/admin/reconciliation/drift?site=1").status_code == 200


@pytest.mark.django_db
def test_a_single_valued_parameter_given_twice_is_refused(api: APIClient) -> None:
    site = make_site()
    other = make_site()
    response = api.get(f"/api/v1/admin/nodes?site={site.pk}&site={other.pk}")
    assert response.status_code == 400
    assert "site" in response.json()["fields"]
    # an array parameter repeats by design
    ok = api.get("/api/v1/admin/nodes?state=active&state=draining")
    assert ok.status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "value", ["99999999999999999999", "9223372036854775808", "0", "-1", "1.5", "1e3", "one"]
)
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/admin/nodes?site={}",
        "/api/v1/admin/nodes?sku={}",
        "/api/v1/admin/allocations?node={}",
        "/api/v1/admin/onboardings?site={}",
        "/api/v1/admin/onboardings?batch={}",
        "/api/v1/admin/decommissions?node={}",
        "/api/v1/admin/reconciliation/drift?site={}",
        "/api/v1/admin/onboardings/batches?site={}",
    ],
)
def test_an_id_filter_out_of_range_is_a_400(api: APIClient, url: str, value: str) -> None:
    response = api.get(url.format(value))
    assert response.status_code == 400, response.content
    name = url.split("?")[1].split("=")[0]
    assert name in response.json()["fields"]


@pytest.mark.django_db
def test_the_largest_id_is_a_plain_miss(api: APIClient) -> None:
    node = make_node(make_site())
    assert api.get("/api/v1/admin/nodes?site=9223372036854775807").json()["count"] == 0
    assert api.get(f"/api/v1/admin/nodes?site={node.site_id}").json()["count"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/admin/nodes/9999999999999999999",
        "/api/v1/admin/onboardings/99999999999999999999/timeline",
        "/api/v1/admin/maas-sites/99999999999999999999999/profiles",
    ],
)
def test_an_id_past_the_range_in_a_path_is_a_json_404(api: APIClient, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.django_db
def test_an_integer_in_a_body_past_the_range_is_a_400(api: APIClient) -> None:
    body = {"site_id": 2**64, "profile_id": 1, "sku_id": -(2**70), "hostname": "h1",
            "ipmi_ip": "10.0.0.1"}  # fmt: skip
    response = api.post("/api/v1/admin/onboardings", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"
    assert "out of range" in response.json()["detail"]


@pytest.mark.django_db
def test_an_oversize_request_target_is_a_json_414(api: APIClient) -> None:
    long = "x" * MAX_TARGET
    response = api.get(f"/api/v1/admin/nodes?search={long}")
    assert response.status_code == 414
    assert response.json()["error"] == "uri_too_long"
    assert api.get(f"/api/v1/admin/nodes?search={'x' * 1000}").status_code == 200


@pytest.mark.django_db
def test_health_and_node_routes_are_strict_too(anon_api: APIClient) -> None:
    assert anon_api.get("/health/live").status_code == 200
    for url in ("/health/live?verbose=1", "/health/ready?x=1", "/api/v1/node/health?probe=1"):
        response = anon_api.get(url)
        assert response.status_code == 400, url
        assert response.json()["fields"]


@pytest.mark.django_db
def test_a_workflow_timeline_takes_paging_only(api: APIClient) -> None:
    from tests.factories import make_onboarding

    wf = make_onboarding(make_site())
    assert api.get(f"/api/v1/admin/onboardings/{wf.pk}/timeline?limit=5").status_code == 200
    response = api.get(f"/api/v1/admin/onboardings/{wf.pk}/timeline?state=failed")
    assert response.status_code == 400
    assert "state" in response.json()["fields"]


@pytest.mark.django_db
def test_an_unconfirmed_maas_address_is_a_409_not_an_outage(api: APIClient, sim: Any) -> None:
    """adopt reads MAAS first: with the site's address changed and not confirmed, the answer
    names the decision an operator must make (it was a 503 blaming the secrets backend)."""
    from maas_domain.services.credentials import site_credentials_write
    from tests.factories import make_onboarding
    from tests.support.maas import API_KEY

    site = make_site(maas_url=sim.url)
    site_credentials_write(actor=None, site=site, payload={"maas_api_key": API_KEY})
    sid = sim.add(hostname="unconf1", status="deployed")
    wf = make_onboarding(site, hostname="unconf1", maas_system_id=sid, state="failed")
    moved = sim.url.replace("127.0.0.1", "localhost")
    assert api.patch(f"/api/v1/admin/maas-sites/{site.pk}", {"maas_url": moved}, format="json")
    response = api.post(f"/api/v1/admin/onboardings/{wf.pk}/adopt", {}, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["error"] == "credentials_unconfirmed"
    assert "confirm_maas_url" in response.json()["detail"]
    details = api.get(f"/api/v1/admin/onboardings/{wf.pk}?diagnostics=refresh").json()
    assert details["diagnostics"]["detail"].startswith("credentials unconfirmed")


def test_the_table_of_declared_parameters_is_built_once_whatever_the_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A web process's threads take their first requests together; drf-spectacular's generator
    run in two of them at once answered 500s (the engine budget test saw it): one builds, the
    others wait for its table."""
    import threading
    import time

    from maas_domain.api import query

    builds: list[int] = []

    def slow_build() -> dict[Any, Any]:
        builds.append(threading.get_ident())
        time.sleep(0.05)  # long enough for every thread to arrive while the first builds
        return {("view", "GET"): query.Accepted(frozenset({"site"}))}

    monkeypatch.setattr(query, "_table", None)
    monkeypatch.setattr(query, "_build", slow_build)
    tables: list[Any] = []
    threads = [threading.Thread(target=lambda: tables.append(query.documented())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1
    assert len(tables) == 8 and all(t is tables[0] for t in tables)

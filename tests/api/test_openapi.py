"""The OpenAPI document: served, committed, complete, and its browsers use no CDN."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.support.openapi import openapi_document

pytestmark = pytest.mark.django_db
COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"


def generated() -> str:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    return out.getvalue()


def test_committed_document_equals_the_generated_one() -> None:
    assert generated() == COMMITTED.read_text(), (
        "docs/openapi.yaml is stale: run `make openapi` and commit it"
    )


def test_every_operation_has_responses_errors_auth_and_bodies_where_it_takes_one() -> None:
    doc = openapi_document()
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    error = doc["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"error", "detail"} and error["additionalProperties"]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            where = f"{method.upper()} {path}"
            codes = op["responses"]
            ok = [c for c in codes if c.startswith("2")]
            assert ok, where
            for code in ok:
                if code != "204" and "metrics" not in path:
                    schema = codes[code]["content"]["application/json"]["schema"]
                    # a described body: a component, a list, or (a 200 that is also a dry
                    # run's answer) one of two components
                    choices = schema.get("oneOf", [schema])
                    assert all("$ref" in s or s.get("type") == "array" for s in choices), where
            assert codes["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
                "/Error"
            ), where
            if path.startswith("/api/v1/admin/"):
                assert {"401", "403"} <= set(codes), where
                assert {"bearerAuth": []} in op["security"], where
            if method in ("post", "patch"):
                assert "409" in codes, where
                if not path.endswith(("/probe/", "/revoke/")):  # the two bodiless actions
                    assert "requestBody" in op, where


def test_examples_for_onboarding_batch_and_the_verbs() -> None:
    doc = openapi_document()
    ops = {op["operationId"]: op for p in doc["paths"].values() for op in p.values()}
    for name in ("onboardings_start", "onboardings_start_batch", "onboardings_verb",
                 "decommissions_verb", "nodes_decommission"):  # fmt: skip
        assert ops[name]["requestBody"]["content"]["application/json"]["examples"], name


def test_schema_is_served_as_yaml_and_json_to_admins_only(
    api: APIClient, anon_api: APIClient
) -> None:
    as_yaml = api.get("/api/v1/schema/")
    assert as_yaml.status_code == 200
    assert yaml.safe_load(as_yaml.content)["openapi"].startswith("3.")
    as_json = api.get("/api/v1/schema/", {"format": "json"})
    assert as_json.status_code == 200 and "paths" in as_json.json()
    assert anon_api.get("/api/v1/schema/").status_code == 401


@pytest.mark.parametrize("page", ["/api/v1/docs/", "/api/v1/redoc/"])
def test_swagger_ui_and_redoc_load_their_assets_locally(api: APIClient, page: str) -> None:
    html = api.get(page).content.decode()
    assert "/static/drf_spectacular_sidecar/" in html
    assert "cdn." not in html and "unpkg" not in html and "//fonts." not in html
    asset = html.split('src="', 1)[1].split('"', 1)[0] if 'src="' in html else ""
    assert asset.startswith("/static/drf_spectacular_sidecar/")
    assert APIClient().get(asset).status_code == 200


@pytest.mark.parametrize(("group", "code"), [(None, 403), ("maascp-read", 200)])
def test_the_schema_needs_the_read_role_not_just_staff(group: str | None, code: int) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from tests.support.tokens import bearer_token

    user = get_user_model().objects.create_user(f"staff-{code}", is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='read')}")
    assert client.get("/api/v1/schema/").status_code == code


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.upper(), p, op) for p, ops in doc["paths"].items() for m, op in ops.items()]


def test_every_operation_reads_like_a_product_summary_and_description() -> None:
    """A summary and a user-facing description on every operation, each its own: never a
    developer's docstring (``double backticks``, "For a workflow API view: ...")."""
    doc = openapi_document()
    seen: dict[str, str] = {}
    for method, path, op in operations(doc):
        where = f"{method} {path}"
        summary, description = op.get("summary", ""), op.get("description", "")
        assert summary and len(summary) <= 60 and not summary.endswith("."), where
        assert len(description) >= 30, where
        assert "``" not in description and "For a workflow API view" not in description, where
        assert seen.setdefault(description, where) == where, (where, seen[description])


def test_ids_in_paths_are_integers_and_bodies_refuse_unknown_fields() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]

    def resolve(schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref", "")
        return schemas[ref.rsplit("/", 1)[1]] if ref else schema

    for method, path, op in operations(doc):
        where = f"{method} {path}"
        for param in op.get("parameters", []):
            if param["in"] == "path" and param["name"] not in ("verb", "system_id"):
                assert param["schema"]["type"] == "integer", (where, param)
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body:
            schema = resolve(body["schema"])
            assert schema["additionalProperties"] is False, where
            assert "Unknown field" in op["responses"]["400"]["description"], where
        for code in ("429", "503"):
            if code in op["responses"]:
                assert "Retry-After" in op["responses"][code]["headers"], (where, code)
        assert "414" in op["responses"], where

"""Bad bodies answer 400 on every route, the anonymous node routes included, and change nothing
(docs/security.md, T5): deep nesting, huge or non-finite numbers, invalid UTF-8, NUL characters
and bodies of the wrong type. Never a 500.

The routes come from the URL configuration itself, so an endpoint added later is covered the
moment it is routed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from maas_domain.api.body import body_limit
from maas_domain.models import AuditLog, RoceAssignment
from tests.factories import make_node, make_onboarding, make_profile, make_site
from tests.support.routes import routes

pytestmark = pytest.mark.django_db


def send(client: APIClient, method: str, path: str, body: bytes) -> Any:
    """Raw bytes as the body (the stubs say str; Django sends bytes as they are)."""
    return client.generic(method, path, data=body, content_type="application/json")  # type: ignore[arg-type]


ROUTES = routes()
DEEP = b"[" * 100_000 + b"]" * 100_000
HOSTILE = {
    "deep list": DEEP,
    "deep object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "deep but valid-looking": b'{"rows": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "invalid utf-8": b'{"name": "\xff\xfe\xfd", "hostname": "\xc3\x28"}',
    "huge integer": b'{"site_id": 1' + b"0" * 5000 + b"}",
    "out-of-range integer": b'{"site_id": 100000000000000000000000000000, "onboarding_id": '
    b"100000000000000000000000000000}",
    "infinite float": b'{"site_id": 1e999, "attempt": -1e999}',
    "nan": b'{"site_id": NaN}',
    "NUL character": b'{"name": "a\\u0000b", "hostname": "\\u0000"}',
    # a lone surrogate is valid JSON text but no Unicode string: as a field name it made every
    # node POST and the admin routes that list unknown fields or policy keys answer 500 HTML
    "lone surrogate field name": b'{"\\ud800": 1, "policy": {"\\udfff": 1}}',
    "lone surrogate value": b'{"name": "a\\udc80", "hostname": "\\ud800"}',
    "nested lone surrogate key": b'{"hardware": {"gpus": {"\\udbff": 1}}, "policy": '
    b'{"stage_timeouts": {"\\ud800x": 5}}}',
}
WRONG_TYPES = {"number": b"5", "string": b'"x"', "list": b"[1, 2]", "null": b"null"}


@pytest.fixture
def world(db: None) -> dict[str, Any]:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    profile = make_profile(site)
    node = make_node(site, state="active", maas_system_id="abc123", ipmi_ip="10.1.1.1")
    roce = RoceAssignment.objects.create(
        site=site,
        hostname="c07u31",
        interface="ens1f0",
        ipv4_cidr="172.30.9.61/31",
        ipv4_address="172.30.9.61",
    )
    onboarding = make_onboarding(site, profile=profile, state="failed")
    return {"site": site, "profile": profile, "node": node, "roce": roce, "wf": onboarding}


def path_for(name: str, regex: str, groups: list[str], world: dict[str, Any]) -> tuple[str, bool]:
    """A concrete path for the route, and whether its ids name real rows."""
    ids = {
        "site_pk": world["site"].pk,
        "node_pk": world["node"].pk,
        "node_id": world["node"].pk,
        "system_id": "abc123",
        "verb": "retry",
        "version": "1.4.2",
    }
    pk = {
        "site-detail": world["site"].pk,
        "site-credentials": world["site"].pk,
        "site-probe": world["site"].pk,
        "profile-detail": world["profile"].pk,
        "roce-detail": world["roce"].pk,
        "onboarding-detail": world["wf"].pk,
        "onboarding-verb": world["wf"].pk,
    }
    known = all(g in ids for g in groups if g != "pk") and ("pk" not in groups or name in pk)
    values = {**ids, "pk": pk.get(name, 999999)}

    def sample(match: re.Match[str]) -> str:
        return str(values.get(match.group(1), "1"))

    path = "/" + re.sub(r"\(\?P<(\w+)>[^)]*\)", sample, regex)
    path = path.replace("/?$", "").replace("$", "").replace("\\Z", "").replace("\\.", ".")
    return path, known


@pytest.mark.parametrize("body_name", sorted(HOSTILE))
@pytest.mark.parametrize("caller", ["staff", "anonymous"])
def test_hostile_bodies_are_400_on_every_route(
    api: APIClient, anon_api: APIClient, world: dict[str, Any], body_name: str, caller: str
) -> None:
    client = api if caller == "staff" else anon_api
    before = AuditLog.objects.count()
    answers = {}
    for method, name, regex, groups in ROUTES:
        path, _ = path_for(name, regex, groups, world)
        response = send(client, method, path, HOSTILE[body_name])
        answers[(method, path)] = response.status_code
        # refused by the parser, or before it by the route's size limit ("Limits")
        expected = 413 if len(HOSTILE[body_name]) > body_limit(path) else 400
        assert response.status_code == expected, (method, path, response.content[:300])
        if method != "HEAD":
            assert response.json()["error"] in ("parse_error", "validation_error", "too_large")
    assert len(answers) >= 25
    assert AuditLog.objects.count() == before


@pytest.mark.parametrize("body_name", sorted(WRONG_TYPES))
def test_bodies_of_the_wrong_type_are_400(
    api: APIClient, anon_api: APIClient, world: dict[str, Any], body_name: str
) -> None:
    before = AuditLog.objects.count()
    checked = 0
    for method, name, regex, groups in ROUTES:
        if method in ("GET", "HEAD", "DELETE"):
            continue  # no body is read
        path, known = path_for(name, regex, groups, world)
        client = anon_api if path.startswith("/api/v1/node/") else api
        response = send(client, method, path, WRONG_TYPES[body_name])
        assert response.status_code < 500, (method, path, response.content[:300])
        if known:
            checked += 1
            assert response.status_code == 400, (method, path, response.content[:300])
    assert checked >= 10
    assert AuditLog.objects.count() == before


def test_a_numeric_body_to_the_probe_is_400(api: APIClient, world: dict[str, Any]) -> None:
    site = world["site"]
    response = api.post(f"/api/v1/admin/maas-sites/{site.pk}/probe", 5, format="json")
    assert response.status_code == 400, response.content


def test_an_over_long_confirm_host_is_400(api: APIClient, world: dict[str, Any]) -> None:
    site, profile = world["site"], world["profile"]
    body = {
        "site_id": site.pk,
        "profile_id": profile.pk,
        "sku_id": world["node"].sku_id,
        "hostname": "c07u31",
        "ipmi_ip": "10.10.7.31",
        "confirm_host": "h" * 5000,
    }
    response = api.post("/api/v1/admin/onboardings", body, format="json")
    assert response.status_code == 400, response.content
    assert "confirm_host" in response.json()["fields"]


def test_an_oversized_body_is_refused_without_a_500(anon_api: APIClient, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = b'{"onboarding_id": 1, "hostname": "' + b"a" * 20_000 + b'"}'
    response = send(anon_api, "POST", "/api/v1/node/enroll", body)
    assert response.status_code in (400, 413), response.content


def test_a_body_built_to_make_a_pattern_backtrack_is_refused_at_once(
    anon_api: APIClient,
) -> None:
    """An unterminated run of escaped quotes: a regular expression over the raw text took time
    quadratic in its length (hours at the upload limit), before authentication or throttling.
    The parser is linear; the bound here is a gate against that, not a speed target."""
    import time

    body = b'{"hostname": "' + b'\\"' * 1_000_000  # 2 MB: to a bulk route, which takes it
    started = time.monotonic()
    response = send(anon_api, "POST", "/api/v1/admin/onboardings/batch", body)
    assert response.status_code == 400, response.content
    assert time.monotonic() - started < 10


def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(api: APIClient) -> None:
    """``"\\\\u0000"`` is a backslash then ``u0000``: no NUL, so no parse error (the serializer
    judges the value)."""
    body = b'{"name": "a\\\\u0000b"}'
    response = send(api, "POST", "/api/v1/admin/maas-sites", body)
    assert response.status_code == 400
    assert response.json()["error"] != "parse_error", response.json()


def unknown_keys(n: int, width: int = 8) -> bytes:
    return json.dumps({f"k{i:0{width}d}": 1 for i in range(n)}).encode()


def test_each_route_takes_a_body_up_to_its_own_limit(api: APIClient, anon_api: APIClient) -> None:
    """The node routes are anonymous and take a few hundred bytes: a 1.29 MB body of unknown
    fields got a 2.79 MB answer in seconds. Each route has its limit (docs/api.md, "Limits"),
    judged from Content-Length before the body is read, whatever its type."""
    node = send(anon_api, "POST", "/api/v1/node/enroll", b" " * (64 * 1024 + 1))
    assert node.status_code == 413, node.content[:300]
    assert node.json() == {
        "error": "too_large",
        "detail": "The request body is larger than this route takes (65536 bytes).",
        "limit": 65536,
    }
    form = anon_api.generic("POST", "/api/v1/node/report", "a" * 70_000, "text/plain")
    assert form.status_code == 413
    admin = send(api, "POST", "/api/v1/admin/skus", unknown_keys(90_000))  # ~1.4 MB
    assert admin.status_code == 413 and admin.json()["limit"] == 1024 * 1024
    rows = [{"hostname": f"h{i}", "ipmi_ip": "10.0.0.1", "note": "x" * 200} for i in range(5000)]
    big = json.dumps({"site_id": 1, "profile_id": 1, "sku_id": 1, "rows": rows}).encode()
    batch = send(api, "POST", "/api/v1/admin/onboardings/batch", big)
    assert batch.status_code == 400, batch.content[:300]  # 1.1 MB: the bulk routes take more


def test_an_error_lists_a_bounded_number_of_fields(api: APIClient, anon_api: APIClient) -> None:
    before = AuditLog.objects.count()
    node = send(anon_api, "POST", "/api/v1/node/enroll", unknown_keys(4000))  # 60 KB
    assert node.status_code == 400
    body = node.json()
    assert len(body["fields"]) == 50 and body["fields_omitted"] == 3950
    assert len(node.content) < 5000
    sku = send(api, "POST", "/api/v1/admin/skus", unknown_keys(60_000))  # ~900 KB
    assert sku.status_code == 400
    assert len(sku.json()["fields"]) == 50 and sku.json()["fields_omitted"] == 59_950
    assert len(sku.content) < 5000
    long_name = send(api, "POST", "/api/v1/admin/skus", json.dumps({"x" * 100_000: 1}).encode())
    [(name, reasons)] = long_name.json()["fields"].items()
    assert len(name) == 200 and name.endswith("…") and reasons == ["Unknown field."]
    policy = send(api, "POST", "/api/v1/admin/maas-sites",
                  json.dumps({"name": "s", "maas_url": "http://m.test:5240/MAAS/",
                              "policy": {f"p{i}": 1 for i in range(5000)}}).encode())  # fmt: skip
    assert policy.status_code == 400 and len(policy.content) < 10_000, policy.content[:300]
    assert AuditLog.objects.count() == before


def test_a_batch_error_lists_a_bounded_number_of_rows(
    api: APIClient, world: dict[str, Any]
) -> None:
    rows = [{"hostname": "h", "ipmi_ip": "bad", "extra": 1} for _ in range(5000)]
    target = {"site_id": world["site"].pk, "profile_id": world["profile"].pk,
              "sku_id": world["node"].sku_id}  # fmt: skip
    body = json.dumps({**target, "rows": rows}).encode()
    answer = send(api, "POST", "/api/v1/admin/onboardings/batch", body)
    assert answer.status_code == 400, answer.content[:300]
    listed = answer.json()["rows"]
    assert len(listed) == 1000 and answer.json()["rows_omitted"] > 10_000 - 1000
    assert listed[0]["index"] == 0

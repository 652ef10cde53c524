"""Bad bodies answer 400 on every route, the anonymous node routes included, and change nothing
(docs/security.md, T5): deep nesting, huge or non-finite numbers, invalid UTF-8, NUL characters
and bodies of the wrong type. Never a 500.

The routes come from the URL configuration itself, so an endpoint added later is covered the
moment it is routed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

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
        assert response.status_code == 400, (method, path, response.content[:300])
        if method != "HEAD":
            assert response.json()["error"] in ("parse_error", "validation_error")
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

    body = b'{"hostname": "' + b'\\"' * 1_000_000
    started = time.monotonic()
    response = send(anon_api, "POST", "/api/v1/node/enroll", body)
    assert response.status_code == 400, response.content
    assert time.monotonic() - started < 10


def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(api: APIClient) -> None:
    """``"\\\\u0000"`` is a backslash then ``u0000``: no NUL, so no parse error (the serializer
    judges the value)."""
    body = b'{"name": "a\\\\u0000b"}'
    response = send(api, "POST", "/api/v1/admin/maas-sites", body)
    assert response.status_code == 400
    assert response.json()["error"] != "parse_error", response.json()

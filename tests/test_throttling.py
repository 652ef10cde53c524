"""Limits on every door (docs/security.md, T6 and T7): the node-facing endpoints refuse
uniformly, cheaply and boundedly, and are throttled; API mutations and the admin login are
throttled; node routes can be served on a listener that has nothing else."""

from __future__ import annotations

import io
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.cache.backends.redis import RedisCache
from django.test import Client
from django.urls import clear_url_caches
from rest_framework.test import APIClient

from onboarding.models import OnboardingEvent
from tests.factories import make_onboarding, make_site
from tests.observability import scrape

pytestmark = pytest.mark.django_db
ENROLL = "/api/v1/node/enroll"


def enroll_body(wf: Any, token: str = "not-the-token-" + "x" * 30) -> dict[str, Any]:
    return {
        "onboarding_id": wf.pk if wf is not None else 987654,
        "attempt": 1,
        "hostname": getattr(wf, "hostname", "c07u31"),
        "enrollment_token": token,
        "agent_version": "1.4.2",
    }


def post(client: Any, body: dict[str, Any], addr: str = "10.0.0.1") -> Any:
    return client.post(ENROLL, body, format="json", REMOTE_ADDR=addr)


def refusals() -> float:
    return scrape.value(
        scrape.local(), "maascp_node_refusals_total", endpoint="enroll", reason="invalid"
    )


def test_unknown_ids_and_wrong_tokens_get_one_uniform_refusal(anon_api: APIClient) -> None:
    wf = make_onboarding(make_site(), state="waiting", stage="enrollment")
    unknown = post(anon_api, enroll_body(None))
    wrong = post(anon_api, enroll_body(wf))
    assert unknown.status_code == wrong.status_code == 403
    assert unknown.json() == wrong.json()


def test_refusals_are_counted_and_write_a_bounded_timeline(
    anon_api: APIClient, settings: Any
) -> None:
    settings.NODE_REFUSALS_PER_MINUTE = 1000
    wf = make_onboarding(make_site(), state="waiting", stage="enrollment")
    before = scrape.value(
        scrape.local(), "maascp_node_refusals_total", endpoint="enroll", reason="invalid"
    )
    for i in range(40):
        assert post(anon_api, enroll_body(wf), addr=f"10.0.1.{i}").status_code == 403
    rows = OnboardingEvent.objects.filter(onboarding=wf, kind="enrollment.refused").count()
    assert rows == settings.NODE_REFUSAL_EVENTS
    after = scrape.value(
        scrape.local(), "maascp_node_refusals_total", endpoint="enroll", reason="invalid"
    )
    assert after - before == 40


def waiting_for_enrollment() -> tuple[Any, Any]:
    from onboarding import payload
    from onboarding.models import Onboarding

    wf = make_onboarding(make_site(), hostname="enr01")
    tokens, hashes = payload.mint_tokens(wf.pk, wf.attempt)
    Onboarding.objects.filter(pk=wf.pk).update(stage="enrollment", state="waiting", **hashes)
    wf.refresh_from_db()
    return wf, tokens


def test_refusals_are_throttled_per_onboarding_and_address(
    anon_api: APIClient, settings: Any
) -> None:
    settings.NODE_REFUSALS_PER_MINUTE = 5
    wf = make_onboarding(make_site(), state="waiting", stage="enrollment")
    codes = [post(anon_api, enroll_body(wf), addr="10.0.2.66").status_code for _ in range(8)]
    assert codes[:5] == [403] * 5 and codes[5:] == [429] * 3
    last = post(anon_api, enroll_body(wf), addr="10.0.2.66")
    assert last.status_code == 429 and int(last["Retry-After"]) >= 1
    # another address's first refusal is a refusal, not a 429: the bucket is that address's
    assert post(anon_api, enroll_body(wf), addr="10.0.2.67").status_code == 403


def test_bogus_enrollments_do_not_delay_the_node_with_the_valid_token(
    anon_api: APIClient, settings: Any
) -> None:
    """Anyone on a node network could send 21 bogus enrollments a minute per (sequential) id
    and keep the real node at 429 until its onboarding timed out. The token is checked first
    and only refusals are counted, so the valid one goes through, even from the address the
    bogus ones came from."""
    wf, tokens = waiting_for_enrollment()
    for _ in range(21):
        assert post(anon_api, enroll_body(wf), addr="10.0.5.66").status_code in (403, 429)
    assert post(anon_api, enroll_body(wf), addr="10.0.5.66").status_code == 429
    valid = {**enroll_body(wf, tokens.enrollment), "hostname": wf.hostname}
    answer = post(anon_api, valid, addr="10.0.5.66")
    assert answer.status_code == 200, answer.content
    assert answer.json()["enrolled"] is True


def test_node_routes_are_throttled_per_source_address(anon_api: APIClient, settings: Any) -> None:
    settings.NODE_REQUESTS_PER_MINUTE = 10
    codes = [
        anon_api.get("/api/v1/node/health", REMOTE_ADDR="10.0.3.1").status_code for _ in range(12)
    ]
    assert codes[:10] == [200] * 10 and codes[10:] == [429, 429]
    assert anon_api.get("/api/v1/node/health", REMOTE_ADDR="10.0.3.2").status_code == 200
    agent = anon_api.get("/api/v1/node/agent/1.4.2/bootstrap.sh", REMOTE_ADDR="10.0.3.1")
    assert agent.status_code == 429 and "Retry-After" in agent


def test_a_fleet_enrolling_at_once_is_not_held_to_the_api_mutation_limit(
    anon_api: APIClient, settings: Any
) -> None:
    """Nodes are anonymous callers with limits of their own (per address, per onboarding):
    the per-token API limit must not pool every node of every batch into one bucket."""
    settings.API_MUTATIONS_PER_MINUTE = 3
    site = make_site()
    codes = {
        post(anon_api, enroll_body(make_onboarding(site)), addr=f"10.0.4.{i}").status_code
        for i in range(1, 9)
    }
    assert 429 not in codes, codes


def test_api_mutations_are_throttled_per_token(api: APIClient, settings: Any) -> None:
    settings.API_MUTATIONS_PER_MINUTE = 3
    codes = [
        api.post("/api/v1/admin/reconciliation/run", {}, format="json").status_code
        for _ in range(5)
    ]
    assert codes[:3] == [202] * 3 and codes[3:] == [429, 429]
    refused = api.post("/api/v1/admin/reconciliation/run", {}, format="json")
    assert refused.json()["error"] == "throttled" and int(refused["Retry-After"]) >= 1
    assert api.get("/api/v1/admin/maas-sites").status_code == 200  # reads are not limited


def test_admin_login_is_throttled_after_repeated_failures(settings: Any) -> None:
    settings.ADMIN_LOGIN_FAILURES = 3
    get_user_model().objects.create_user("ops", password="right-pass-123", is_staff=True)
    client = Client(REMOTE_ADDR="10.0.4.1")
    for _ in range(3):
        page = client.post("/admin/login/", {"username": "ops", "password": "wrong"})
        assert page.status_code == 200  # the form again, with an error
    locked = client.post("/admin/login/", {"username": "ops", "password": "right-pass-123"})
    assert locked.status_code == 429 and "Retry-After" in locked
    # another address is not locked out of the name (anyone could lock an admin out, renewably)
    other = Client(REMOTE_ADDR="10.0.4.2")
    assert (
        other.post("/admin/login/", {"username": "ops", "password": "right-pass-123"}).status_code
        == 302
    )


def test_one_address_trying_many_names_is_capped(settings: Any) -> None:
    settings.ADMIN_LOGIN_FAILURES = 3
    settings.ADMIN_LOGIN_FAILURES_PER_ADDRESS = 5
    get_user_model().objects.create_user("ops2", password="right-pass-123", is_staff=True)
    client = Client(REMOTE_ADDR="10.0.4.9")
    codes = [
        client.post("/admin/login/", {"username": f"u{i}", "password": "x"}).status_code
        for i in range(7)
    ]
    assert codes[:5] == [200] * 5 and codes[5:] == [429, 429]
    assert (
        client.post("/admin/login/", {"username": "ops2", "password": "right-pass-123"}).status_code
        == 429
    )
    assert (
        Client(REMOTE_ADDR="10.0.4.10")
        .post("/admin/login/", {"username": "ops2", "password": "right-pass-123"})
        .status_code
        == 302
    )


def test_the_limits_hold_in_the_shared_redis_cache(settings: Any) -> None:
    from maas_domain import throttling

    redis_cache = RedisCache(settings.CELERY_BROKER_URL, {"KEY_PREFIX": "maascp-test-throttle"})
    try:
        throttling.cache = redis_cache  # type: ignore[attr-defined]
        results = [throttling.over("probe", "k", allowed=2, period=60) for _ in range(3)]
    finally:
        from django.core.cache import cache

        throttling.cache = cache  # type: ignore[attr-defined]
        redis_cache.clear()
    assert results[:2] == [None, None] and results[2] is not None


# -- the node listener -----------------------------------------------------------------------------


def call_wsgi(app: Any, path: str, method: str = "GET") -> tuple[int, bytes]:
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": method}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(b"")
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h, *a: status.append(s)))
    return int(status[0].split()[0]), body


@pytest.mark.django_db(transaction=True)
def test_the_node_listener_serves_node_routes_and_nothing_else() -> None:
    from config.wsgi_node import application

    assert call_wsgi(application, "/api/v1/node/health")[0] == 200
    assert call_wsgi(application, "/health/live")[0] == 200
    for path in ("/admin/login/", "/admin/", "/api/v1/admin/maas-sites"):
        assert call_wsgi(application, path)[0] == 404, path


def test_with_a_separate_node_listener_the_main_one_has_no_node_routes(settings: Any) -> None:
    import importlib

    import config.urls

    settings.SEPARATE_NODE_LISTENER = True
    try:
        importlib.reload(config.urls)
        clear_url_caches()
        response = Client().get("/api/v1/node/health")
        assert response.status_code == 404
    finally:
        settings.SEPARATE_NODE_LISTENER = False
        importlib.reload(config.urls)
        clear_url_caches()
    assert Client().get("/api/v1/node/health").status_code == 200


def test_compose_runs_a_separate_node_listener() -> None:
    from tests.test_compose import COMPOSE

    spec = yaml.safe_load(COMPOSE.read_text())
    node = spec["services"]["node-api"]
    assert node["command"][:2] == ["gunicorn", "config.wsgi_node"]
    for name in ("api", "worker", "beat", "node-api"):
        env = spec["services"][name]["environment"]
        assert str(env["MAASCP_SEPARATE_NODE_LISTENER"]).lower() == "true", name

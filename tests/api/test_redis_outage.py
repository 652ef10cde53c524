"""Redis gone or hung under the web process (docs/api.md, "Errors"; docs/security.md, T7): a
request that needs it (every API mutation and node POST counts against a rate limit kept there,
and so does the admin login) answers 503 with ``dependency: cache`` and ``Retry-After``, never a
500; reads that need no Redis keep working; everything works again once it is back. The server
is one of the test's own (tests/support/redisserver.py), killed and frozen here."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, Sku
from tests.support.redisserver import PrivateRedis

pytestmark = pytest.mark.django_db

READS = [
    "/api/v1/admin/skus",
    "/api/v1/admin/maas-sites",
    "/api/v1/admin/nodes",
    "/api/v1/admin/onboardings",
    "/api/v1/admin/tokens",
    "/api/v1/node/health",
]
ENROLL = {"onboarding_id": 1, "attempt": 1, "enrollment_token": "t" * 40,
          "hostname": "c07u31", "agent_version": "1.0.0"}  # fmt: skip


@pytest.fixture
def redis_cache(private_redis: PrivateRedis, settings: Any) -> PrivateRedis:
    """The shipped cache settings (config/settings.py: timeouts included) on the private server."""
    import config.settings as shipped

    assert "RedisCache" in str(shipped.CACHES["default"]["BACKEND"])
    settings.CACHES = {"default": {**shipped.CACHES["default"], "LOCATION": private_redis.url}}
    return private_redis


def unavailable(answer: Any) -> None:
    assert answer.status_code == 503, answer.content[:300]
    assert answer["Content-Type"] == "application/json"
    body = answer.json()
    assert body["error"] == "unavailable" and body["dependency"] == "cache", body
    assert "Redis" in body["detail"]
    assert answer["Retry-After"] == "10"


def sku(client: APIClient, code: str) -> Any:
    return client.post("/api/v1/admin/skus", {"code": code, "name": code}, format="json")


def test_redis_gone_mutations_and_node_posts_503_reads_keep_working(
    api: APIClient, redis_cache: PrivateRedis, client: Any
) -> None:
    assert sku(api, "before").status_code == 201
    redis_cache.stop()
    audited = AuditLog.objects.count()
    unavailable(sku(api, "during"))
    unavailable(api.delete(f"/api/v1/admin/skus/{Sku.objects.get().pk}"))
    unavailable(APIClient().post("/api/v1/node/enroll/", ENROLL, format="json"))
    for path in READS:
        answer = (APIClient() if "/node/" in path else api).get(path)
        assert answer.status_code == 200, (path, answer.content[:300])
    get_user_model().objects.create_user("op", password="pw-for-the-test", is_staff=True)
    login = client.post("/admin/login/", {"username": "op", "password": "pw-for-the-test"})
    assert login.status_code == 503 and login["Retry-After"] == "10", login.content[:300]
    ready = APIClient().get("/health/ready")
    assert ready.status_code == 503 and ready.json()["failed"] == ["cache"], ready.json()
    assert AuditLog.objects.count() == audited
    assert list(Sku.objects.values_list("code", flat=True)) == ["before"]
    redis_cache.start()  # the same port: back
    assert sku(api, "after").status_code == 201
    assert "cache" not in APIClient().get("/health/ready").json()["failed"]


def test_redis_hung_answers_503_within_its_timeouts(
    api: APIClient, redis_cache: PrivateRedis
) -> None:
    """A frozen server accepts connections and never answers: without socket timeouts each
    request waited forever, holding a gunicorn thread."""
    assert sku(api, "before").status_code == 201
    redis_cache.freeze()
    try:
        started = time.monotonic()
        unavailable(sku(api, "during"))
        assert time.monotonic() - started < 20  # the shipped timeouts, with room for load
        assert api.get("/api/v1/admin/skus").status_code == 200
    finally:
        redis_cache.thaw()
    assert sku(api, "after").status_code == 201

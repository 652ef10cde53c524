"""The database down or restarting mid-request (a failover, a restart): the admin API and the
node API answer 503 with the JSON error body, ``dependency: database`` and ``Retry-After``
(docs/api.md, "Errors"), never a 500. The first-boot scripts' curl retries a 503 and honours
Retry-After; an API client knows from the body what failed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def database_down() -> Iterator[None]:
    """This process's next query connects to a port nothing listens on (the server gone)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    if connection.vendor != "postgresql":
        pytest.skip(
            "the embedded SQLite file has no server to lose (and its test copy lives in memory)"
        )
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(dead))
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def unavailable(answer: Any) -> None:
    assert answer.status_code == 503, answer.content
    assert answer["Content-Type"] == "application/json"
    body = answer.json()
    assert body["error"] == "unavailable" and body["dependency"] == "database", body
    assert "database" in body["detail"]
    assert answer["Retry-After"] == "10"  # docs/api.md, "Errors"


def test_admin_reads_and_writes_answer_503_naming_the_database(
    api: APIClient, database_down: None
) -> None:
    unavailable(api.get("/api/v1/admin/skus"))
    unavailable(api.post("/api/v1/admin/skus", {"code": "x", "name": "x"}, format="json"))


def test_the_node_api_answers_503_so_the_node_retries(database_down: None) -> None:
    node = APIClient()
    body = {"onboarding_id": 1, "attempt": 1, "hostname": "c07u31", "bootstrap_token": "t" * 40,
            "phase": "site_bundle", "status": "ok"}  # fmt: skip
    unavailable(node.post("/api/v1/node/report/", body, format="json"))
    enroll = {"onboarding_id": 1, "attempt": 1, "enrollment_token": "t" * 40,
              "hostname": "c07u31", "agent_version": "1.0.0"}  # fmt: skip
    unavailable(node.post("/api/v1/node/enroll/", enroll, format="json"))


def test_other_503s_carry_retry_after_too(api: APIClient) -> None:
    """The secrets backend or an unserved region: the same header (the schema declares it)."""
    from tests.factories import make_site

    site = make_site(region="far-away")
    answer = api.post(f"/api/v1/admin/maas-sites/{site.pk}/probe/", {}, format="json")
    assert answer.status_code == 503, answer.content
    assert answer.json()["dependency"] == "region"
    assert answer["Retry-After"] == "10"  # docs/api.md, "Errors"

"""Health endpoints, and the request's correlation id reaching the Celery tasks it causes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from maas_domain import context
from maas_domain.logging import context_of
from maas_domain.secrets.database import DatabaseBackend


@pytest.mark.django_db
def test_liveness_and_readiness(client: Client) -> None:
    assert client.get("/health/live").json() == {"status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200, ready.json()
    assert ready.json()["failed"] == []
    assert set(ready.json()["checks"]) == {"database", "broker", "cache", "secrets"}


@pytest.mark.django_db
def test_readiness_names_what_failed(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    def sealed(self: Any) -> None:
        raise RuntimeError("sealed")

    monkeypatch.setattr(DatabaseBackend, "check", sealed)
    answer = client.get("/health/ready")
    assert answer.status_code == 503
    assert answer.json()["failed"] == ["secrets"]


@pytest.mark.slow
def test_correlation_id_travels_from_request_into_the_task(
    worker: None, caplog: pytest.LogCaptureFixture
) -> None:
    from maas_domain.tasks import ping

    caplog.set_level(logging.INFO)
    with context.bound("req-from-api-42"):
        result = ping.apply_async(("x",), ignore_result=False)
    assert result.get(timeout=20)["pong"] == "x"
    seen = [
        r
        for r in caplog.records
        if r.name == "maas_domain.tasks"
        and context_of(r).get("correlation_id") == "req-from-api-42"
    ]
    assert seen, [(r.name, context_of(r)) for r in caplog.records]


def test_context_never_collides_with_explicit_extra_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A field bound in the context and passed in ``extra`` too must not break logging."""
    caplog.set_level(logging.INFO)
    with context.bound("cid-7", maas_system_id="abc123", site_id=4):
        logging.getLogger("maas.client").info("call", extra={"maas_system_id": "xyz789"})
    (record,) = [r for r in caplog.records if r.getMessage() == "call"]
    assert getattr(record, "maas_system_id") == "xyz789"  # noqa: B009 (explicit extra wins)
    assert context_of(record)["site_id"] == 4
    assert context_of(record)["correlation_id"] == "cid-7"
    from maas_domain.logging import JsonFormatter

    line = JsonFormatter().format(record)
    assert '"maas_system_id": "xyz789"' in line and '"correlation_id": "cid-7"' in line

"""Health endpoints, and the request's correlation id reaching the Celery tasks it causes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from maas_domain import context
from maas_domain.secrets.database import DatabaseBackend


@pytest.mark.django_db
def test_liveness_and_readiness(client: Client) -> None:
    assert client.get("/health/live").json() == {"status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200, ready.json()
    assert ready.json()["failed"] == []
    assert set(ready.json()["checks"]) == {"database", "broker", "secrets"}


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
        r for r in caplog.records
        if r.name == "maas_domain.tasks" and getattr(r, "correlation_id", None) == "req-from-api-42"
    ]  # fmt: skip
    assert seen, [(r.name, getattr(r, "correlation_id", None)) for r in caplog.records]

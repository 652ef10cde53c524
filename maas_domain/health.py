"""Liveness and readiness for orchestrators: cheap, unauthenticated, and named on failure.

``/health/live``: the process answers. ``/health/ready``: the database, the broker and the
secrets backend each answer within a short timeout; 503 names the ones that did not.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from celery import current_app
from django.db import connection
from django.http import HttpRequest, JsonResponse

from maas_domain.secrets import get_backend


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


def _secrets() -> None:
    get_backend().check()


CHECKS: dict[str, Callable[[], None]] = {
    "database": _database,
    "broker": _broker,
    "secrets": _secrets,
}


def live(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def ready(request: HttpRequest) -> JsonResponse:
    results = {}
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            check()
            ok, detail = True, "ok"
        except Exception as exc:
            ok, detail = False, type(exc).__name__
        results[name] = {
            "ok": ok,
            "detail": detail,
            "ms": round((time.monotonic() - started) * 1000, 1),
        }
    failed = [name for name, r in results.items() if not r["ok"]]
    return JsonResponse(
        {"status": "ready" if not failed else "not_ready", "failed": failed, "checks": results},
        status=200 if not failed else 503,
    )

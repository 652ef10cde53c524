"""Liveness and readiness for orchestrators: cheap, unauthenticated, and named on failure.

``/health/live``: the process answers. ``/health/ready``: the database, the broker, the cache
(the rate-limit counters: without it every mutation is a 503) and the secrets backend each
answer within a short timeout; 503 names the ones that did not. Its
``regions`` detail names the regions with work waiting and no live worker of their queue
(``maas_domain/regions.py``): a fact for operators, never a reason to take the API out of
service (its requests do not need a region's worker).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from celery import current_app
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse

from maas_domain import regions
from maas_domain.secrets import get_backend


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


def _cache() -> None:
    cache.get("health-probe")  # the shipped timeouts bound it (config/settings.py, CACHES)


def _secrets() -> None:
    get_backend().check()


CHECKS: dict[str, Callable[[], None]] = {
    "database": _database,
    "broker": _broker,
    "cache": _cache,
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
        {
            "status": "ready" if not failed else "not_ready",
            "failed": failed,
            "checks": results,
            "regions": _regions() if "database" not in failed else {"detail": "unknown"},
        },
        status=200 if not failed else 503,
    )


def _regions() -> dict[str, object]:
    """Regions whose work waits with no live worker of their queue; ``heartbeats`` says
    whether the workers' heartbeats could be read at all (unreadable: none is named)."""
    try:
        states = regions.overview()
    except Exception as exc:
        return {"detail": type(exc).__name__}
    return {
        "heartbeats": "unreadable" if any(s.workers is None for s in states) else "ok",
        "unserved": [
            {"region": s.region, "queue": s.queue, "waiting": s.waiting}
            for s in states
            if s.unserved
        ],
    }

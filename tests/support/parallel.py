"""Parallel runs (pytest-xdist, ``-n 2``): each worker process gets its own resources.

pytest-django already gives each worker its own test database (``test_<name>_gw0``, ...). This
plugin (loaded with ``-p`` from pyproject's ``addopts``, so before Django reads its settings)
gives worker ``gwN`` the rest, through the ``MAASCP_*`` environment, which its subprocesses
(Celery worker processes, ``manage.py`` commands) inherit:

- Redis: database number + N in every Redis URL (broker, result backend, event stream, cache);
  whole-workflow tests ``flushdb`` the broker database. Base 6 with ``-n 2`` uses 6 and 7.
- Files: ``MAASCP_DATA_DIR/gwN`` (and ``MAASCP_METRICS_DIR/gwN`` when that is set), so the
  prometheus multiprocess files, generated keys, SQLite files and logs are the worker's own:
  tests read metric deltas from that directory.

Tests marked ``serial`` (they restart the PostgreSQL or Redis server their settings name) never
run in a worker: there they are skipped, saying so; ``scripts/check`` runs them in a process of
their own, on servers of their own (``scripts/private-services``).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
REDIS_URLS = ("BROKER_URL", "RESULT_BACKEND", "EVENT_REDIS_URL", "CACHE_URL")
SERIAL_ONLY = "serial: restarts its servers; scripts/check runs it on servers of its own, not here"


def worker_index(environ: MutableMapping[str, str]) -> int | None:
    """N for xdist worker ``gwN``; None outside xdist (or in its controller)."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def redis_db_offset(url: str, offset: int) -> str:
    """``url`` with its Redis database number moved up by ``offset`` (no number means 0)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or offset == 0:
        return url
    db = parts.path.strip("/") or "0"
    if not db.isdigit():
        raise pytest.UsageError(f"cannot derive a per-worker Redis database from {url!r}")
    return urlunsplit(parts._replace(path=f"/{int(db) + offset}"))


def isolate(environ: MutableMapping[str, str]) -> None:
    """Point this xdist worker's ``MAASCP_*`` settings at its own Redis databases and files."""
    index = worker_index(environ)
    if index is None:
        return
    name = environ["PYTEST_XDIST_WORKER"]
    for key in REDIS_URLS:
        if value := environ.get(f"MAASCP_{key}"):
            environ[f"MAASCP_{key}"] = redis_db_offset(value, index)
    environ["MAASCP_DATA_DIR"] = str(Path(environ.get("MAASCP_DATA_DIR") or ROOT / "var") / name)
    if metrics := environ.get("MAASCP_METRICS_DIR"):
        environ["MAASCP_METRICS_DIR"] = str(Path(metrics) / name)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # before pytest-django's hook imports config.settings, which reads the environment once
    isolate(os.environ)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if worker_index(os.environ) is None:
        return
    for item in items:
        if item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.skip(reason=SERIAL_ONLY))

"""Celery worker *processes* on the test database and broker (for kill -9 tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kombu.pools
import pytest
from django.conf import settings
from django.db import connection

from maas_simulator.node import NodeSide
from tests.support.flows import Flow

ROOT = Path(__file__).resolve().parents[2]


class Workers:
    """Celery worker processes on the test database and broker."""

    def __init__(self, node_api_url: str) -> None:
        db = connection.settings_dict
        url = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        self.env = {
            **os.environ,
            "MAASCP_DATABASE_URL": url,
            "MAASCP_BROKER_URL": str(settings.CELERY_BROKER_URL),
            "MAASCP_NODE_API_URL": node_api_url,
            "MAASCP_WORKFLOW_LEASE_SECONDS": "3",
            "MAASCP_SECRETS_KEY": ",".join(settings.SECRETS_KEYS),
            "MAASCP_LOG_LEVEL": "WARNING",
        }
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        concurrency: int = 2,
        *,
        queues: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """A worker of ``queues`` (``-Q``; none: Celery's default queue, as in production
        without ``-Q``), with ``env`` over the pool's environment."""
        serve = ["--queues", ",".join(queues)] if queues else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork",
             "--concurrency", str(concurrency), "--loglevel", "WARNING", *serve,
             "--hostname", f"w{len(self.procs)}@%h", "--without-mingle", "--without-gossip"],
            cwd=ROOT, env={**self.env, **(env or {})}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker and its pool children: no cleanup, no ack."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def workers(sweeper: None, flow_site: Flow, live_server: Any) -> Iterator[Workers]:
    flow_site.sim.model.node_side = NodeSide()
    pool = Workers(live_server.url)
    yield pool
    pool.stop_all()


@pytest.fixture
def embedded_broker(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The embedded default's broker for this test, in this process and in the worker processes
    (``Workers`` started after it): kombu's filesystem transport under a new data folder, laid
    out as config/settings.py lays it out for ``MAASCP_BROKER_URL=filesystem://``. Request it
    before ``workers``."""
    from config import celery_app

    folders = {sub: tmp_path / "broker" / sub for sub in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    options = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
        "store_processed": False,
        "polling_interval": 0.1,  # as config/settings.py sets it for this broker
    }
    saved = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)

    def use(url: str, transport_options: dict[str, Any]) -> None:
        celery_app.conf.update(broker_url=url, broker_transport_options=transport_options)
        # The app's connection and producer pools live in kombu's process-wide registry, keyed
        # by broker: closing one there leaves it registered and closed ("Acquire on closed
        # pool" for every later send). reset() closes them all and empties the registry, so
        # the next send makes a new pool for whichever broker the app now names.
        kombu.pools.reset()
        celery_app._pool = None  # type: ignore[attr-defined]  # Celery's own cached pools
        celery_app.amqp._producer_pool = None  # type: ignore[attr-defined]

    use("filesystem://", options)
    settings.CELERY_BROKER_URL = "filesystem://"
    monkeypatch.setenv("MAASCP_DATA_DIR", str(tmp_path))  # the workers' settings find it there
    yield tmp_path
    use(*saved)

"""Celery worker *processes* on the test database and broker (for kill -9 tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

    def start(self, concurrency: int = 2) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork",
             "--concurrency", str(concurrency), "--loglevel", "WARNING",
             "--hostname", f"w{len(self.procs)}@%h", "--without-mingle", "--without-gossip"],
            cwd=ROOT, env=self.env, start_new_session=True,
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

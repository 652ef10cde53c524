"""A worker with MAASCP_WORKER_METRICS_PORT serves what its pool's processes record, from its
own directory, wiped when it starts (docs/observability.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from maas_domain.observability import exposition
from tests.observability.scrape import parse, value
from tests.test_embedded_smoke import free_port

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
from maas_domain.observability import metrics
metrics.maas_request("dc9", "commission", "ok", 200, 0.2)
metrics.maas_request("dc9", "commission", "transient", 503, 0.1)
"""


def test_worker_port_serves_its_processes_metrics_from_a_fresh_directory(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    settings.WORKER_METRICS_PORT, settings.WORKER_METRICS_ADDR = port, "127.0.0.1"
    settings.METRICS_DIR = tmp_path
    private = exposition.worker_dir(tmp_path, port)
    private.mkdir()
    (private / "counter_4242.db").write_bytes(b"left by a worker that died")
    monkeypatch.setenv(exposition.ENV, str(tmp_path))  # restored after the test
    monkeypatch.setattr(exposition, "_worker_server", None)
    exposition.start_worker_metrics()
    server, _ = exposition._worker_server
    try:
        assert os.environ[exposition.ENV] == str(private)
        assert not (private / "counter_4242.db").exists()
        for _ in range(2):  # two pool processes (they inherit the environment)
            subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, check=True, timeout=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            samples = parse(answer.read().decode())
    finally:
        server.shutdown()
    requests = "maascp_maas_requests_total"
    assert value(samples, requests, site="dc9", operation="commission", code="200") == 2
    assert value(samples, requests, site="dc9", outcome="transient", code="503") == 2
    assert value(samples, "maascp_maas_request_duration_seconds_count", operation="commission") == 4
    assert not list(tmp_path.glob("*.db"))  # nothing written where the web endpoint reads

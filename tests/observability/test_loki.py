"""The direct Loki push handler: what Loki receives, and that Loki being down costs nothing but
the dropped (and counted) lines."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from maas_domain import context
from maas_domain.logging import ContextFilter, JsonFormatter
from maas_domain.observability.loki import LokiHandler
from tests.observability import scrape


class FakeLoki:
    def __init__(self) -> None:
        self.pushes: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.pushes.append(json.loads(body))
                owner.headers.append(dict(self.headers))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/loki/api/v1/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def lines(self) -> list[tuple[dict[str, str], dict[str, Any]]]:
        return [
            (stream["stream"], json.loads(line))
            for push in self.pushes
            for stream in push["streams"]
            for _, line in stream["values"]
        ]


@pytest.fixture
def loki() -> Iterator[FakeLoki]:
    fake = FakeLoki()
    yield fake
    fake.server.shutdown()


def attach(handler: LokiHandler, name: str) -> logging.Logger:
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger


def test_log_lines_reach_loki_with_labels_and_the_correlation_id(loki: FakeLoki) -> None:
    handler = LokiHandler(loki.url, labels={"env": "test"}, tenant="team-gpu")
    logger = attach(handler, "onboarding.test-loki")
    try:
        with context.bound("cid-loki-1", site_id=3, onboarding_id=17, node_id=9, hostname="c07u31"):
            logger.info("stage %s done", "discover")
        logger.warning("no context here")
        handler.flush()
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = loki.lines()
    assert len(lines) == 2
    (labels, line), (other_labels, other) = lines
    assert labels == {
        "app": "maascp",
        "env": "test",
        "level": "info",
        "logger": "onboarding.test-loki",
        "site_id": "3",
        "workflow_kind": "onboarding",
    }
    # ids stay in the JSON line, never in labels (one stream per id would explode Loki)
    assert line["correlation_id"] == "cid-loki-1" and line["msg"] == "stage discover done"
    assert (line["onboarding_id"], line["node_id"], line["hostname"]) == (17, 9, "c07u31")
    assert other_labels["level"] == "warning" and "site_id" not in other_labels
    assert other["msg"] == "no context here"
    assert loki.headers[0]["X-Scope-OrgID"] == "team-gpu"


def test_loki_down_drops_and_counts_lines_and_logging_goes_on() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/loki/api/v1/push"
    before = scrape.value(scrape.local(), "maascp_log_records_dropped_total")
    handler = LokiHandler(dead, queue_size=5, batch=2, flush_seconds=0.01)
    logger = attach(handler, "maas_domain.test-loki-down")
    try:
        for i in range(50):
            logger.info("line %s", i)  # never raises, never waits for Loki
        handler.flush()
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert handler.dropped == 50  # some because the queue was full, the rest unreachable
    dropped = scrape.local()
    assert scrape.value(dropped, "maascp_log_records_dropped_total") == before + 50
    assert scrape.value(dropped, "maascp_log_records_dropped_total", reason="unreachable") > 0

"""What Loki receives, checked against its push API contract (``POST /loki/api/v1/push``, JSON:
streams of labels and values ``[ns, line]`` or ``[ns, line, structured metadata]``): the log
handler's lines with the correlation ids as structured metadata, never labels; timeline entries
and MAAS diagnostics shipped by ``export_timelines --to-loki``; and that Loki being down costs
the handler nothing but the dropped (and counted) lines."""

from __future__ import annotations

import io
import json
import logging
import re
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

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# one value per request, workflow or machine: structured metadata, never a label
HIGH_CARDINALITY = {"correlation_id", "onboarding_id", "decommission_id", "node_id",
                    "maas_system_id", "hostname", "site"}  # fmt: skip


def contract_problems(body: Any) -> list[str]:
    """Why Loki's push API would refuse this JSON body (empty: it would take it)."""
    if not isinstance(body, dict) or set(body) != {"streams"} or not body["streams"]:
        return ["the body is {'streams': [...]}, nothing else"]
    problems = []
    for stream in body["streams"]:
        labels, values = stream.get("stream"), stream.get("values")
        if set(stream) != {"stream", "values"} or not isinstance(labels, dict) or not values:
            problems.append(f"a stream is {{stream: labels, values: [...]}}: {stream!r:.80}")
            continue
        for name, value in labels.items():
            if not LABEL_NAME.fullmatch(name) or not isinstance(value, str) or not value:
                problems.append(f"label {name}={value!r}")
            if name in HIGH_CARDINALITY:
                problems.append(f"{name} is a label: one stream per value")
        for value in values:
            if not isinstance(value, list) or len(value) not in (2, 3):
                problems.append(f"a value is [ns, line] or [ns, line, metadata]: {value!r:.80}")
                continue
            if not (isinstance(value[0], str) and value[0].isdigit() and len(value[0]) >= 19):
                problems.append(f"timestamp {value[0]!r} is not nanoseconds as a string")
            if not isinstance(value[1], str):
                problems.append("a line is a string")
            if len(value) == 3 and not (
                isinstance(value[2], dict)
                and value[2]
                and all(isinstance(k, str) and isinstance(v, str) for k, v in value[2].items())
            ):
                problems.append(f"structured metadata is a non-empty string map: {value[2]!r}")
    return problems


class FakeLoki:
    """A push endpoint that enforces the contract: a body Loki would refuse gets its 400."""

    def __init__(self, status: int = 204) -> None:
        self.pushes: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.refused: list[list[str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                problems = contract_problems(body)
                if self.headers.get("Content-Type") != "application/json":
                    problems.append("Content-Type must be application/json")
                if problems:
                    owner.refused.append(problems)
                owner.pushes.append(body)
                owner.headers.append(dict(self.headers))
                self.send_response(400 if problems else status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/loki/api/v1/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def lines(self) -> list[tuple[dict[str, str], dict[str, Any]]]:
        return [(labels, line) for labels, line, _ in self.entries()]

    def entries(self) -> list[tuple[dict[str, str], dict[str, Any], dict[str, str]]]:
        """(labels, the JSON line, structured metadata) of every value received."""
        return [
            (stream["stream"], json.loads(value[1]), value[2] if len(value) == 3 else {})
            for push in self.pushes
            for stream in push["streams"]
            for value in stream["values"]
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


def test_a_registered_kind_labels_its_lines_and_carries_its_id_without_naming_it_here(
    loki: FakeLoki,
) -> None:
    """Loki learns the kinds from their registration (maas_domain/work.py): a new kind's id
    is structured metadata and its lines carry its ``workflow_kind``, with no change to the
    handler; an id field of no registered kind labels nothing."""
    from maas_domain.observability import loki as module

    module.register_kind("rescue")
    try:
        handler = LokiHandler(loki.url)
        logger = attach(handler, "rescue.test-loki")
        try:
            with context.bound("cid-rescue", site_id=4, rescue_id=21, node_id=2):
                logger.info("rescued")
            with context.bound("cid-other", site_id=4, salvage_id=3):
                logger.info("no such kind")
            handler.flush()
        finally:
            logger.removeHandler(handler)
            handler.close()
        (labels, _), (other_labels, _) = loki.lines()
        assert labels["workflow_kind"] == "rescue" and "workflow_kind" not in other_labels
        (_, _, metadata), (_, _, other) = loki.entries()
        assert metadata["rescue_id"] == "21" and "salvage_id" not in other
    finally:
        module._KIND_FIELDS.pop("rescue_id")
        module.register_kind("onboarding")  # recompute the metadata fields without it


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
    # and as structured metadata, filterable without parsing the line (Loki 3)
    (_, _, metadata), (_, _, none) = loki.entries()
    assert metadata == {
        "correlation_id": "cid-loki-1",
        "site_id": "3",
        "onboarding_id": "17",
        "node_id": "9",
        "hostname": "c07u31",
    }
    assert set(none) <= {"correlation_id"} and loki.refused == []  # only what it has


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


# -- timelines and MAAS diagnostics, shipped on demand -------------------------------------------


@pytest.mark.django_db
def test_timelines_and_maas_diagnostics_reach_loki_with_the_correlation_fields(
    loki: FakeLoki, admin_user: Any
) -> None:
    from django.core.management import call_command

    from maas_domain.services.credentials import site_credentials_write
    from onboarding.workflow import KIND as ONBOARDING
    from tests.factories import make_node, make_onboarding, make_site
    from tests.support.maas import API_KEY, make_sim

    sim = make_sim({"users": []})
    try:
        site = make_site(name="rack-7", maas_url=sim.url)
        site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
        sid = sim.add(hostname="c07u31", status="deployed")
        node = make_node(site, hostname="c07u31", maas_system_id=sid)
        wf = make_onboarding(
            site, node=node, hostname="c07u31", maas_system_id=sid, state="succeeded",
            correlation_id="cid-77",
        )  # fmt: skip
        ONBOARDING.add_event(wf, "stage.completed", "deployed", stage="deploy")
        ONBOARDING.add_event(wf, "workflow.succeeded", "all stages completed")
        with sim.model.lock:
            sim.model.event(sim.model.machines[sid], "INFO", "Deployed", "from the simulator")
        out = io.StringIO()
        call_command(
            "export_timelines", "--kind", "onboarding", "--to-loki", loki.url,
            "--maas-diagnostics", stdout=out,
        )  # fmt: skip
    finally:
        sim.server.stop()
    assert loki.refused == []  # every push met the contract
    entries = loki.entries()
    by_source = {s: [e for e in entries if e[0]["source"] == s] for s in ("timeline", "maas")}
    assert [line["message"] for _, line, _ in by_source["timeline"]] == [
        "deployed",
        "all stages completed",
    ]  # oldest first
    assert any(line["type"] == "Deployed" for _, line, _ in by_source["maas"])
    for labels, _, metadata in entries:
        assert labels == {
            "app": "maascp",
            "source": labels["source"],
            "workflow_kind": "onboarding",
            "site_id": str(site.pk),
        }
        assert metadata == {
            "site": "rack-7",
            "site_id": str(site.pk),
            "onboarding_id": str(wf.pk),
            "node_id": str(node.pk),
            "maas_system_id": sid,
            "hostname": "c07u31",
            "correlation_id": "cid-77",
        }
    assert f"sent {len(entries)} line(s) of 1 onboarding timeline(s)" in out.getvalue()


@pytest.mark.django_db
def test_a_loki_that_refuses_is_a_clear_error_without_the_urls_credentials() -> None:
    from django.core.management import CommandError, call_command

    from tests.factories import make_onboarding, make_site

    refusing = FakeLoki(status=500)
    try:
        wf = make_onboarding(make_site(), state="failed")
        wf.events.create(kind="stage.failed", stage="deploy", message="curtin")
        url = refusing.url.replace("http://", "http://user:s3cret@")
        with pytest.raises(CommandError) as refused:
            call_command("export_timelines", "--kind", "onboarding", "--to-loki", url)
    finally:
        refusing.server.shutdown()
    assert "HTTP 500" in str(refused.value) and "s3cret" not in str(refused.value)
    with pytest.raises(CommandError, match="--maas-diagnostics goes with --to-loki"):
        call_command("export_timelines", "--kind", "onboarding", "--out-dir", "/nonexistent",
                     "--maas-diagnostics")  # fmt: skip

"""The simulator's node side calls our node API as the first-boot scripts' curl does
(templates/firstboot/: ``--retry 8 --retry-connrefused --retry-max-time 600``): a 5xx, 408 or
429 and a refused connection are tried again, any other answer is final. Without it a control
plane restarting under a batch lost those nodes' enrollments, which real nodes retry."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from maas_simulator.node import NodeSide
from tests.test_embedded_smoke import free_port


@pytest.fixture
def answers() -> Iterator[tuple[list[int], list[int], str]]:
    """A server answering the statuses queued in the first list (then 200), recording each
    request's status in the second."""
    queued: list[int] = []
    served: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = queued.pop(0) if queued else 200
            served.append(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield queued, served, f"http://127.0.0.1:{server.server_address[1]}/enroll"
    server.shutdown()
    server.server_close()


def test_a_server_error_is_tried_again_until_it_answers(
    answers: tuple[list[int], list[int], str],
) -> None:
    queued, served, url = answers
    queued += [500, 503]  # the database restarting, then the proxy in front of it
    assert NodeSide()._post("m1", url, {"x": 1}) == 200
    assert served == [500, 503, 200]


def test_a_refusal_is_final(answers: tuple[list[int], list[int], str]) -> None:
    queued, served, url = answers
    queued += [403]
    assert NodeSide()._post("m1", url, {"x": 1}) == 403
    assert served == [403]


def test_a_refused_connection_is_tried_again_and_a_stopped_node_gives_up() -> None:
    side = NodeSide()
    threading.Timer(1.5, side.stop).start()  # nothing ever listens; the test ends the node
    assert side._post("m1", f"http://127.0.0.1:{free_port()}/enroll", {}) == 0


def test_a_node_trusts_the_ca_its_payload_wrote(tmp_path: Path) -> None:
    """compose serves the node API over TLS with its own CA, which the payload gives the node
    (/etc/gpuaas/ca.pem, the scripts' --cacert): the simulated node trusts it, and a node
    whose payload has no CA does not (the system's CAs never signed it)."""
    from maas_simulator.node import agent_config
    from tests.support.proxy import make_secrets

    tls = make_secrets(tmp_path / "tls")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls / "node-proxy.crt", tls / "node-proxy.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://localhost:{server.server_address[1]}/enroll"
    payload = yaml.safe_dump({"write_files": [
        {"path": "/etc/gpuaas/ca.pem", "content": (tls / "ca.pem").read_text()},
        {"path": "/etc/gpuaas/node/enroll_url", "content": url},
    ]}).encode()  # fmt: skip
    config = agent_config(payload)
    assert config is not None and "BEGIN CERTIFICATE" in config["ca_pem"]
    try:
        assert NodeSide()._post("m1", url, {"x": 1}, config) == 200
        untrusting = NodeSide()
        untrusting._stopped.set()  # one try: no retries with backoff
        assert untrusting._post("m1", url, {"x": 1}, {**config, "ca_pem": ""}) == 0
    finally:
        server.shutdown()
        server.server_close()

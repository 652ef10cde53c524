"""The simulator's node side calls our node API as the first-boot scripts' curl does
(templates/firstboot/: ``--retry 8 --retry-connrefused --retry-max-time 600``): a 5xx, 408 or
429 and a refused connection are tried again, any other answer is final. Without it a control
plane restarting under a batch lost those nodes' enrollments, which real nodes retry."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

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

"""A stand-in for the admin API that records every request maasctl sends and answers what the
test queued: for what the live server cannot show on demand (a 429 with ``Retry-After``, a
server string with Rich markup or terminal escapes, a dry-run plan of a route whose server side
is not merged yet, a server that ignores ``?dry_run=true``). It speaks plain HTTP on a free
loopback port, so maasctl's real client (requests) is what is tested."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

BASE = "/api/v1/admin"


@dataclass
class Sent:
    """One request as the server saw it."""

    method: str
    path: str  # below /api/v1/admin
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Answer:
    status: int
    body: Any  # or a function of the request's query
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    remaining: int = 1


class FakeApi:
    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._answers: dict[tuple[str, str], list[Answer]] = {}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = parts.path.removeprefix(BASE)
                fake.sent.append(
                    Sent(
                        self.command,
                        path,
                        parse_qs(parts.query),
                        {k.lower(): v for k, v in self.headers.items()},
                        json.loads(raw) if raw else None,
                    )
                )
                answer = fake._next(self.command, path)
                time.sleep(answer.delay)
                body = answer.body(fake.sent[-1].query) if callable(answer.body) else answer.body
                payload = b"" if body is None else json.dumps(body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def on(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        times: int = 1,
        delay: float = 0.0,
    ) -> None:
        """Answer the next ``times`` requests to (method, path) so (``body`` may be a function
        of the query: ``{name: [values]}``); the last answer repeats until another is queued."""
        with self._lock:
            queue = self._answers.setdefault((method, path), [])
            queue[:] = [a for a in queue if a.remaining]  # an answer used up and repeating
            queue.append(Answer(status, body, headers or {}, delay, times))

    def _next(self, method: str, path: str) -> Answer:
        with self._lock:
            queue = self._answers.get((method, path))
            if not queue:
                detail = f"no fake answer for {method} {path}"
                return Answer(404, {"error": "not_found", "detail": detail})
            answer = queue[0]
            answer.remaining = max(answer.remaining - 1, 0)
            if not answer.remaining and len(queue) > 1:
                queue.pop(0)
            return answer

    def to(self, method: str, path: str) -> list[Sent]:
        return [s for s in self.sent if (s.method, s.path) == (method, path)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def page(results: list[dict[str, Any]], count: int | None = None) -> dict[str, Any]:
    count = len(results) if count is None else count
    return {"count": count, "next": None, "previous": None, "results": results}


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    api = FakeApi()
    yield api
    api.close()

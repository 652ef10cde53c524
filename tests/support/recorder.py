"""A small HTTP server that records every request and answers what a test scripts.

Used as a host we must *not* leak to (a changed MAAS URL, a redirect target) and as a
misbehaving one (redirects, huge or endless bodies, slow answers). Binds to a free port.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        head = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n\n{self.body.decode('latin-1')}"


@dataclass
class Answer:
    status: int = 200
    body: bytes | Callable[[], Iterator[bytes]] = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay: float = 0.0


MAAS_VERSION = {
    "version": "3.5.0",
    "subversion": "",
    "capabilities": ["authenticate-api", "network-deployment-ubuntu"],
}
MAAS_ADMIN = {"username": "admin", "email": "", "is_superuser": True, "is_local": True}


def maas_like(method: str, path: str) -> Answer:
    """Answers like a MAAS region would to a probe (so a leak would 'succeed')."""
    if "version" in path:
        return Answer(body=json.dumps(MAAS_VERSION).encode())
    if "whoami" in path:
        return Answer(body=json.dumps(MAAS_ADMIN).encode())
    return Answer(body=b"[]")


class Recorder:
    def __init__(self, answer: Callable[[str, str], Answer] = maas_like) -> None:
        self.seen: list[Seen] = []
        self.answer = answer
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.seen.append(Seen(self.command, self.path, dict(self.headers), body))
                reply = recorder.answer(self.command, self.path)
                time.sleep(reply.delay)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if callable(reply.body):
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        for chunk in reply.body():
                            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if self.command != "HEAD":
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def everything(self) -> str:
        return "\n\n".join(s.text() for s in self.seen)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.stop()

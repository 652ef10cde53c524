"""Django's live test server, answering without the 40 ms pause per response.

The server writes a response's headers and body in separate sends; with Nagle's algorithm on
and the client's delayed ACK, each response then waits ~40 ms. Every live-server test (the
fuzzing gate, maasctl, whole workflows with node callbacks) pays it per request, so the
accepted sockets get TCP_NODELAY, as production servers (gunicorn) set it.
"""

from __future__ import annotations

import socket
from typing import Any

from django.core.servers import basehttp

_accept = basehttp.WSGIServer.get_request


def _get_request(self: Any) -> tuple[socket.socket, Any]:
    sock, address = _accept(self)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock, address


def install() -> None:
    basehttp.WSGIServer.get_request = _get_request  # type: ignore[method-assign]

"""Slow clients do not stall the listeners behind the shipped buffering proxy
(deploy/nginx/nginx.conf.template, docs/operations.md "The proxy").

gunicorn's threads read request bodies themselves: twelve connections that send a body slowly
held every thread of the API listener and its health checks timed out. Here the real gunicorn
(config/gunicorn.py) serves the product with two threads, twenty clients open requests (over
the proxy's TLS, as compose serves it) whose bodies never finish, and /health/live still
answers through nginx; straight to gunicorn it does not (the stall the proxy is there for)."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.proxy import gunicorn, make_secrets, nginx, tls_connection

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which("nginx"), reason="nginx (Debian) not installed"),
]
SLOW_CLIENTS = 20


@pytest.fixture
def tls(tmp_path: Path) -> Path:
    return make_secrets(tmp_path / "secrets")


@pytest.fixture
def stack(tmp_path: Path, tls: Path) -> Iterator[tuple[int, int]]:
    """(gunicorn's port, nginx's port in front of it)."""
    with (
        gunicorn({"MAASCP_TRUSTED_PROXIES": "127.0.0.1"}, tmp_path) as app,
        nginx(tmp_path, upstream=app, tls=tls) as proxy,
    ):
        yield app, proxy


def slow_clients(port: int, tls: Path | None = None) -> list[socket.socket]:
    """Connections that send their headers and a little of a body they never finish (over TLS
    when ``tls`` holds the proxy's CA)."""
    held = []
    for _ in range(SLOW_CLIENTS):
        s = (
            tls_connection(port, tls / "ca.pem")
            if tls
            else socket.create_connection(("127.0.0.1", port), timeout=5)
        )
        s.sendall(
            b"POST /api/v1/node/report HTTP/1.1\r\nHost: cp\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"onb'
        )
        held.append(s)
    time.sleep(1)  # let them be accepted and taken up
    return held


def health(port: int, tls: Path | None = None) -> bool:
    scheme, verify = ("https", str(tls / "ca.pem")) if tls else ("http", True)
    try:
        url = f"{scheme}://127.0.0.1:{port}/health/live"
        return requests.get(url, timeout=5, verify=verify).status_code == 200
    except requests.RequestException:
        return False


def test_health_answers_through_the_proxy_while_twenty_clients_dribble(
    stack: tuple[int, int], tls: Path
) -> None:
    app, proxy = stack
    held = slow_clients(proxy, tls)
    try:
        assert health(proxy, tls), "the proxy let slow bodies reach gunicorn's threads"
    finally:
        for s in held:
            s.close()
    held = slow_clients(app)
    try:
        assert not health(app), "straight to gunicorn the slow bodies should hold its threads"
    finally:
        for s in held:
            s.close()


def test_behind_the_proxy_each_client_keeps_its_own_address(settings: Any) -> None:
    """The per-address node limit counts the client, not the proxy: two addresses behind one
    proxy are two buckets (X-Forwarded-For from the trusted proxy), and a forged header from
    anyone else changes nothing."""
    from django.test import RequestFactory

    from maas_domain import throttling

    factory = RequestFactory()
    proxied = factory.get("/", REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="10.0.0.7")
    direct = factory.get("/", REMOTE_ADDR="10.0.0.8", HTTP_X_FORWARDED_FOR="10.0.0.7")
    settings.TRUSTED_PROXIES = (ipaddress.ip_network("10.9.9.9/32"),)
    assert throttling.client_address(proxied) == "10.0.0.7"
    assert throttling.client_address(direct) == "10.0.0.8"  # not our proxy: header ignored


ATTACKER, NEIGHBOUR = "127.0.0.2", "127.0.0.3"  # two client addresses of this machine


class Attacker:
    """A client at ``source`` that keeps taking every connection it can: 32 threads open
    connections that send a request's headers and a little of a body they never finish, and
    open another whenever one is refused or closed, until ``n`` are held."""

    def __init__(self, port: int, tls: Path, source: str, n: int) -> None:
        self.port, self.ca, self.source, self.n = port, tls / "ca.pem", source, n
        self.held: list[socket.socket] = []
        self.refused = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.take, daemon=True) for _ in range(32)]

    def take(self) -> None:
        while not self.done.is_set():
            with self.lock:
                full = len(self.held) >= self.n
            if full:
                self.done.wait(0.05)
                continue
            try:
                s = tls_connection(self.port, self.ca, source=self.source)
                s.sendall(
                    b"POST /api/v1/node/report HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                    b'application/json\r\nContent-Length: 100000\r\n\r\n{"onb'
                )
            except OSError:
                with self.lock:
                    self.refused += 1
                continue
            with self.lock:
                self.held.append(s)

    def __enter__(self) -> Attacker:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(30)
        for s in self.held:
            s.close()


def still_open(s: socket.socket) -> bool:
    """Whether the proxy still holds this connection (it closes those past an address's share)."""
    s.settimeout(0.2)
    try:
        return s.recv(1) != b""
    except TimeoutError:
        return True  # nothing to read yet: held, waiting for the rest of the body
    except OSError:
        return False


def health_from(port: int, tls: Path, source: str) -> int:
    """A health check from ``source``'s own connection: its status, 0 if none came."""
    try:
        with tls_connection(port, tls / "ca.pem", source=source) as s:
            s.settimeout(5)
            s.sendall(b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            return int(s.recv(64).split(b" ")[1])
    except (OSError, IndexError, ValueError):
        return 0


def test_one_address_cannot_take_the_proxy_from_the_others(tmp_path: Path, tls: Path) -> None:
    """2,100 slow connections from one address exhausted the shipped proxy ("worker_connections
    are not enough"; health 0 of 12). Here nginx has 256 connections and one address opens 400
    requests whose bodies never finish: past its share (CONN_PER_ADDRESS, 20 here) each
    connection is closed as it is accepted, before TLS, and another address's health checks all
    answer."""
    with (
        gunicorn({"MAASCP_TRUSTED_PROXIES": "127.0.0.1"}, tmp_path) as app,
        nginx(tmp_path, upstream=app, tls=tls, worker_connections=256,
              CONN_PER_ADDRESS="20", REQ_PER_SECOND="1000", REQ_BURST="1000") as proxy,
        Attacker(proxy, tls, ATTACKER, 400) as attacker,
    ):  # fmt: skip
        # it has taken what it could and keeps trying (refused: the limit, or no connection
        # left in a proxy without one)
        while attacker.refused < 200 and len(attacker.held) < 300:
            time.sleep(0.1)
        answers = [health_from(proxy, tls, NEIGHBOUR) for _ in range(12)]
        assert answers == [200] * 12, answers  # the proxy before the limits: 0 of 12
        with attacker.lock:
            open_ones = [s for s in attacker.held if still_open(s)]
        assert len(open_ones) <= 20  # its share, no more
        assert health_from(proxy, tls, ATTACKER) == 0  # closed at once, before TLS


def test_a_flood_of_requests_from_one_address_is_held_to_its_rate(
    tmp_path: Path, tls: Path
) -> None:
    with (
        gunicorn({"MAASCP_TRUSTED_PROXIES": "127.0.0.1"}, tmp_path) as app,
        nginx(tmp_path, upstream=app, tls=tls, CONN_PER_ADDRESS="50", REQ_PER_SECOND="2",
              REQ_BURST="10") as proxy,
    ):  # fmt: skip
        flood = [health_from(proxy, tls, ATTACKER) for _ in range(40)]
        assert flood.count(200) <= 10 + 2 * 10 and flood.count(429) >= 10, flood
        assert health_from(proxy, tls, NEIGHBOUR) == 200
        url = f"https://127.0.0.1:{proxy}/health/live"
        throttled = None
        for _ in range(40):
            answer = requests.get(url, verify=str(tls / "ca.pem"), timeout=5)
            if answer.status_code == 429:
                throttled = answer
                break
        assert throttled is not None
        assert throttled.json()["error"] == "throttled" and throttled.headers["Retry-After"] == "1"

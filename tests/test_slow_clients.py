"""Slow clients do not stall the listeners behind the shipped buffering proxy
(deploy/nginx/maascp.conf.template, docs/operations.md "The proxy").

gunicorn's threads read request bodies themselves: twelve connections that send a body slowly
held every thread of the API listener and its health checks timed out. Here the real gunicorn
(config/gunicorn.py) serves the product with two threads, twenty clients open requests (over
the proxy's TLS, as compose serves it) whose bodies never finish, and /health/live still
answers through nginx; straight to gunicorn it does not (the stall the proxy is there for)."""

from __future__ import annotations

import ipaddress
import shutil
import socket
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

"""The shipped buffering TLS proxy (deploy/nginx/nginx.conf.template) in front of a real
gunicorn listener, as docker-compose.yml runs them, on free ports of this machine: nginx
(Debian) with the certificates deploy/make-secrets makes, and gunicorn with the shipped settings
(config/gunicorn.py)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy/nginx/nginx.conf.template"
# Debian builds the stream module apart (libnginx-mod-stream); the nginx image has it built in
STREAM_MODULE = Path("/usr/lib/nginx/modules/ngx_stream_module.so")
COMPOSE = ROOT / "docker-compose.yml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_secrets(folder: Path, names: str = "") -> Path:
    """What deploy/make-secrets makes for compose (secrets, a CA, the proxies' certificates)."""
    subprocess.run([str(ROOT / "deploy/make-secrets"), str(folder)], check=True,
                   capture_output=True, env={**os.environ, "MAASCP_TLS_NAMES": names})  # fmt: skip
    return folder


def compose_secret_files(folder: Path) -> dict[str, Path]:
    """compose's secret name -> the file in ``folder`` compose would mount as it."""
    spec = yaml.safe_load(COMPOSE.read_text())
    return {name: folder / Path(item["file"]).name for name, item in spec["secrets"].items()}


def wait_for(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    within: float = 120,
    verify: str | bool = True,
) -> None:
    """Until the URL answers 200 (a started process: its progress, not a guess of its speed;
    ``within`` only ends a wait on one that never will)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=5, headers=headers, verify=verify).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never answered")


def compose_environment(service: str) -> dict[str, str]:
    """A service's environment as docker-compose.yml gives it with nothing exported: each
    ``${NAME:-default}`` is its default (and ``${NAME}``/``${NAME:?...}`` has none)."""
    spec = yaml.safe_load(COMPOSE.read_text())
    env = spec["services"][service].get("environment") or {}

    def resolve(value: Any) -> str:
        return re.sub(r"\$\{\w+(?::?-([^}]*))?[^}]*\}", lambda m: m[1] or "", str(value))

    return {name: resolve(value) for name, value in env.items()}


@contextmanager
def gunicorn(
    env: Mapping[str, str], tmp_path: Path, *, app: str = "config.wsgi", threads: int = 2
) -> Iterator[int]:
    """The listener with exactly ``env``'s MAASCP_* variables (none of this test's); its port."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAASCP_")}
    clean.update({"MAASCP_DATA_DIR": str(tmp_path / "data"), **env})
    log = (tmp_path / f"gunicorn-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", app, "-c", "python:config.gunicorn",
         "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", str(threads)],
        cwd=ROOT, env=clean, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        try:
            wait_for(f"http://127.0.0.1:{port}/health/live")
        except AssertionError:
            raise AssertionError((tmp_path / f"gunicorn-{port}.log").read_text()[-3000:]) from None
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


LIMITS = ("CONN_PER_ADDRESS", "REQ_PER_SECOND", "REQ_BURST")  # the template's per-address limits


def render(**values: str) -> str:
    """The template as the nginx image's envsubst fills it: every ``${NAME}`` from ``values``
    (a missing one is an error here), nginx's own ``$variables`` left alone."""
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m[1]], TEMPLATE.read_text())


@contextmanager
def nginx(
    tmp_path: Path,
    *,
    upstream: int,
    tls: Path,
    proxy: str = "node-proxy",
    max_body: str = "8m",
    worker_connections: int = 256,
    **template: str,
) -> Iterator[int]:
    """nginx with the shipped template and ``proxy``'s certificate in ``tls`` (deploy/make-secrets'
    folder; ``template``: its other ${...} values, compose's own for ``proxy`` by default); its
    port. It listens on 127.0.0.1 and takes clients from any 127.0.0.0/8 address."""
    port = free_port()
    run = Path(tempfile.mkdtemp(prefix="ngx", dir="/tmp"))
    run.chmod(0o755)  # nginx's workers (not root) make their temporary folders in it
    values = {k: v for k, v in compose_environment(proxy).items() if k in LIMITS}
    conf = render(LISTEN=f"127.0.0.1:{port}", UPSTREAM=f"127.0.0.1:{upstream}", MAX_BODY=max_body,
                  TLS_CERT=str(tls / f"{proxy}.crt"), TLS_KEY=str(tls / f"{proxy}.key"),
                  RUN_DIR=str(run), ACCESS_LOG="off", HOP_PORT=str(free_port()),
                  WORKER_CONNECTIONS=str(worker_connections), **{**values, **template})  # fmt: skip
    if STREAM_MODULE.exists():
        conf = f"load_module {STREAM_MODULE};\n{conf}"
    (run / "nginx.conf").write_text(conf)
    log = (tmp_path / f"nginx-{port}.log").open("wb")
    process = subprocess.Popen(
        ["nginx", "-c", str(run / "nginx.conf"), "-p", str(run), "-g", "daemon off;"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        try:
            wait_for(f"https://127.0.0.1:{port}/health/live", verify=str(tls / "ca.pem"))
        except AssertionError:
            raise AssertionError((tmp_path / f"nginx-{port}.log").read_text()[-3000:]) from None
        yield port
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()
        shutil.rmtree(run, ignore_errors=True)


def tls_connection(port: int, ca: Path, *, source: str = "127.0.0.1") -> ssl.SSLSocket:
    """A client's TLS connection to the proxy from ``source`` (any 127.0.0.0/8 address)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    context = ssl.create_default_context(cafile=str(ca))
    return context.wrap_socket(raw, server_hostname="localhost")

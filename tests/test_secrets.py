"""Secrets backends: the Vault backend through hvac against a KV v2 test server (and a real
Vault when VAULT_ADDR and VAULT_TOKEN are set), and the encrypted database backend."""

from __future__ import annotations

import os
import secrets as pysecrets
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet

from maas_domain.secrets import SecretConflict, SecretNotFound, SecretsForbidden, SecretsUnavailable
from maas_domain.secrets.database import DatabaseBackend
from maas_domain.secrets.vault import VaultBackend
from tests.support.vault_kv2 import KV2Server


@pytest.fixture(scope="module")
def kv2() -> Iterator[KV2Server]:
    with KV2Server() as server:
        yield server


def _real_vault() -> tuple[str, str] | None:
    addr, token = os.environ.get("VAULT_ADDR"), os.environ.get("VAULT_TOKEN")
    return (addr, token) if addr and token else None


@pytest.fixture(params=["kv2-test-server", "real-vault", "database"])
def backend(request: pytest.FixtureRequest, kv2: KV2Server) -> Any:
    """One contract, three backends: our KV v2 test server, a real Vault when VAULT_ADDR and
    VAULT_TOKEN are set, and encrypted database rows."""
    prefix = "maascp-test-" + pysecrets.token_hex(4)
    if request.param == "real-vault":
        real = _real_vault()
        if real is None:
            pytest.skip("set VAULT_ADDR and VAULT_TOKEN to run against a real Vault")
        return VaultBackend(url=real[0], token=real[1], prefix=prefix)
    if request.param == "database":
        request.getfixturevalue("db")
        return DatabaseBackend([Fernet.generate_key().decode()])
    return VaultBackend(url=kv2.url, token=kv2.root_token, prefix=prefix)


def test_versions_grow_and_old_versions_stay_readable(backend: Any) -> None:
    assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:c"}) == 1
    assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:d"}) == 2
    assert backend.read("sites/1/maas-api-key") == {"api_key": "a:b:d"}
    assert backend.read("sites/1/maas-api-key", 1) == {"api_key": "a:b:c"}


def test_cas_zero_is_create_only_and_mismatch_conflicts(backend: Any) -> None:
    assert backend.write("bmc/node-1", {"password": "p1"}, cas=0) == 1
    with pytest.raises(SecretConflict):
        backend.write("bmc/node-1", {"password": "p2"}, cas=0)
    with pytest.raises(SecretConflict):
        backend.write("bmc/node-1", {"password": "p2"}, cas=5)
    assert backend.write("bmc/node-1", {"password": "p2"}, cas=1) == 2
    assert backend.read("bmc/node-1") == {"password": "p2"}


def test_missing_path_and_version_are_not_found(backend: Any) -> None:
    with pytest.raises(SecretNotFound):
        backend.read("nothing/here")
    backend.write("one/version", {"k": "v"})
    with pytest.raises(SecretNotFound):
        backend.read("one/version", 7)


def test_destroy_is_idempotent(backend: Any) -> None:
    backend.write("to/destroy", {"k": "v"})
    backend.destroy("to/destroy")
    backend.destroy("to/destroy")
    with pytest.raises(SecretNotFound):
        backend.read("to/destroy")


def test_health_check_passes(backend: Any) -> None:
    backend.check()


def test_bad_token_is_forbidden(kv2: KV2Server) -> None:
    bad = VaultBackend(url=kv2.url, token="not-a-token")
    with pytest.raises(SecretsForbidden):
        bad.read("anything")
    with pytest.raises(SecretsForbidden):
        bad.check()


def test_policy_limited_token_gets_403_outside_its_paths(kv2: KV2Server) -> None:
    token = kv2.add_token({"maascp/sites/1/": {"create", "read", "update"}})
    limited = VaultBackend(url=kv2.url, token=token)
    assert limited.write("sites/1/ipmi-default", {"password": "x"}) == 1
    with pytest.raises(SecretsForbidden):
        limited.write("sites/2/ipmi-default", {"password": "x"})


def test_approle_login_and_relogin_once_on_403(kv2: KV2Server) -> None:
    role_id, secret_id, token = kv2.add_approle({"*": set(KV2Server.ALL)})
    backend = VaultBackend(url=kv2.url, role_id=role_id, secret_id=secret_id, prefix="approle")
    backend.write("x", {"k": "v"})
    # the token is revoked behind our back: one re-login, then the call succeeds
    new_token = kv2.add_token({"*": set(KV2Server.ALL)})
    kv2.state.approles[(role_id, secret_id)] = new_token
    del kv2.state.tokens[token]
    assert backend.read("x") == {"k": "v"}


def test_sealed_vault_is_unavailable(kv2: KV2Server) -> None:
    backend = VaultBackend(url=kv2.url, token=kv2.root_token)
    kv2.state.sealed = True
    try:
        with pytest.raises(SecretsUnavailable):
            backend.read("x")
    finally:
        kv2.state.sealed = False


def test_unreachable_vault_is_unavailable() -> None:
    backend = VaultBackend(url="http://127.0.0.1:9", token="t", timeout=1)
    with pytest.raises(SecretsUnavailable):
        backend.write("x", {"k": "v"})


def test_test_server_enforces_cas_required_and_max_versions(kv2: KV2Server) -> None:
    """The facts of shared/vault-kv2.md, checked on the raw HTTP API of the test server."""
    import requests

    headers = {"X-Vault-Token": kv2.root_token}
    base = f"{kv2.url}/v1/secret"
    requests.post(
        f"{base}/metadata/strict",
        json={"cas_required": True, "max_versions": 2},
        headers=headers,
        timeout=5,
    )
    missing_cas = requests.post(
        f"{base}/data/strict", json={"data": {"a": "1"}}, headers=headers, timeout=5
    )
    assert missing_cas.status_code == 400
    assert missing_cas.json() == {"errors": ["check-and-set parameter required for this call"]}
    for version in range(3):
        ok = requests.post(
            f"{base}/data/strict",
            json={"options": {"cas": version}, "data": {"a": str(version)}},
            headers=headers,
            timeout=5,
        )
        assert ok.json()["data"]["version"] == version + 1
    meta = requests.get(f"{base}/metadata/strict", headers=headers, timeout=5).json()["data"]
    assert meta["current_version"] == 3
    assert sorted(meta["versions"]) == ["2", "3"]
    empty = requests.request("LIST", f"{base}/metadata/no-such-folder", headers=headers, timeout=5)
    assert empty.status_code == 404
    assert empty.json() == {"errors": []}
    requests.delete(f"{base}/data/strict", headers=headers, timeout=5)
    deleted = requests.get(f"{base}/data/strict", headers=headers, timeout=5)
    assert deleted.status_code == 404
    assert deleted.json()["data"]["metadata"]["deletion_time"]


def test_database_backend_with_wrong_key_is_unavailable_not_garbage(db: None) -> None:
    writer = DatabaseBackend([Fernet.generate_key().decode()])
    writer.write("p", {"k": "v"})
    with pytest.raises(SecretsUnavailable):
        DatabaseBackend([Fernet.generate_key().decode()]).read("p")


def test_database_backend_key_rotation(db: None) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    DatabaseBackend([old]).write("p", {"k": "v"})
    assert DatabaseBackend([new, old]).read("p") == {"k": "v"}

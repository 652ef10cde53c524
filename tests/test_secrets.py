"""Secrets backends: one contract for the Vault backend (hvac) against our KV v2 test server and
a real OpenBao server, and for the encrypted database backend; then drills only the real server
can run (AppRole token expiry and revocation, CAS and max_versions as it enforces them, sealing)."""

from __future__ import annotations

import secrets as pysecrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet

from maas_domain.secrets import (
    SecretConflict,
    SecretNotFound,
    SecretsError,
    SecretsForbidden,
    SecretsUnavailable,
)
from maas_domain.secrets.database import DatabaseBackend
from maas_domain.secrets.vault import VaultBackend
from tests.support.openbao import ALL_OF_SECRET, OpenBao
from tests.support.vault_kv2 import KV2Server


@pytest.fixture(scope="module")
def kv2() -> Iterator[KV2Server]:
    with KV2Server() as server:
        yield server


def _prefix() -> str:
    return "maascp-test-" + pysecrets.token_hex(4)


@pytest.fixture(params=["kv2-test-server", "openbao", "database"])
def backend(request: pytest.FixtureRequest, kv2: KV2Server) -> Any:
    """One contract, three backends: our KV v2 test server, a real OpenBao server, and encrypted
    database rows."""
    prefix = _prefix()
    if request.param == "openbao":
        bao: OpenBao = request.getfixturevalue("openbao")
        return VaultBackend(url=bao.url, token=bao.root_token, prefix=prefix)
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
    """The facts of docs/vault-kv2.md, checked on the raw HTTP API of the test server."""
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


# -- drills against the real server --------------------------------------------------------------


def test_openbao_approle_logs_in_again_when_its_token_expires(openbao: OpenBao) -> None:
    _, role_id, secret_id = openbao.approle(ALL_OF_SECRET, token_ttl="2s")
    backend = VaultBackend(url=openbao.url, role_id=role_id, secret_id=secret_id, prefix=_prefix())
    first_token = backend._client.token
    assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:c"}) == 1
    time.sleep(2.5)  # the server expires the token (403 "permission denied")
    with pytest.raises(SecretsForbidden):
        VaultBackend(url=openbao.url, token=first_token).read("anything")
    assert backend.read("sites/1/maas-api-key") == {"api_key": "a:b:c"}
    assert backend._client.token != first_token
    time.sleep(2.5)  # the health check logs in again too
    backend.check()


def test_openbao_approle_logs_in_again_when_its_token_is_revoked(openbao: OpenBao) -> None:
    _, role_id, secret_id = openbao.approle(ALL_OF_SECRET)
    backend = VaultBackend(url=openbao.url, role_id=role_id, secret_id=secret_id, prefix=_prefix())
    backend.write("x", {"k": "v"})
    openbao.client().auth.token.revoke(backend._client.token)
    assert backend.read("x") == {"k": "v"}


def test_openbao_revoked_secret_id_is_forbidden_after_one_login(openbao: OpenBao) -> None:
    role, role_id, secret_id = openbao.approle(ALL_OF_SECRET)
    backend = VaultBackend(url=openbao.url, role_id=role_id, secret_id=secret_id, prefix=_prefix())
    backend.write("x", {"k": "v"})
    root = openbao.client()
    root.auth.approle.destroy_secret_id(role, secret_id)
    root.auth.token.revoke(backend._client.token)
    with pytest.raises(SecretsForbidden, match="AppRole login failed"):
        backend.read("x")
    with pytest.raises(SecretsForbidden):
        backend.check()


def test_openbao_policy_limits_paths(openbao: OpenBao) -> None:
    prefix = _prefix()
    token = openbao.token(
        f'path "secret/data/{prefix}/sites/1/*" {{ capabilities = ["create", "read", "update"] }}'
    )
    limited = VaultBackend(url=openbao.url, token=token, prefix=prefix)
    assert limited.write("sites/1/ipmi-default", {"password": "x"}) == 1
    with pytest.raises(SecretsForbidden):
        limited.write("sites/2/ipmi-default", {"password": "x"})
    with pytest.raises(SecretsForbidden):
        VaultBackend(url=openbao.url, token="not-a-token").check()


def test_openbao_cas_as_the_server_enforces_it(openbao: OpenBao) -> None:
    prefix = _prefix()
    backend = VaultBackend(url=openbao.url, token=openbao.root_token, prefix=prefix)
    assert backend.write("cas/a", {"k": "1"}, cas=0) == 1
    assert backend.write("cas/a", {"k": "2"}, cas=1) == 2
    with pytest.raises(SecretConflict):  # a writer that read version 1 lost the race
        backend.write("cas/a", {"k": "3"}, cas=1)
    assert backend.read("cas/a") == {"k": "2"}
    # a path (or mount) that requires check-and-set refuses our plain writes with a clear error,
    # not a "conflict" a caller would re-read and retry forever
    openbao.client().secrets.kv.v2.update_metadata(path=f"{prefix}/cas/b", cas_required=True)
    with pytest.raises(SecretsError, match="cas_required") as refused:
        backend.write("cas/b", {"k": "1"})
    assert not isinstance(refused.value, SecretConflict)
    assert backend.write("cas/b", {"k": "1"}, cas=0) == 1


def test_openbao_max_versions_trims_the_oldest_version(openbao: OpenBao) -> None:
    """Why a site's previous MAAS key needs max_versions of at least 2 (docs/operations.md):
    a rotation writes a pending version while the confirmed one must stay readable."""
    prefix = _prefix()
    backend = VaultBackend(url=openbao.url, token=openbao.root_token, prefix=prefix)
    openbao.client().secrets.kv.v2.update_metadata(path=f"{prefix}/key", max_versions=2)
    for n in range(1, 4):
        assert backend.write("key", {"api_key": f"v{n}"}) == n
    with pytest.raises(SecretNotFound):
        backend.read("key", 1)
    assert backend.read("key", 2) == {"api_key": "v2"}
    assert backend.read("key") == {"api_key": "v3"}


def test_openbao_sealed_is_unavailable_and_unsealing_restores_everything(
    unsealed: OpenBao,
) -> None:
    _, role_id, secret_id = unsealed.approle(ALL_OF_SECRET)
    root = VaultBackend(url=unsealed.url, token=unsealed.root_token, prefix=_prefix())
    app = VaultBackend(url=unsealed.url, role_id=role_id, secret_id=secret_id, prefix=_prefix())
    root.write("k", {"v": "1"})
    app.write("k", {"v": "2"})
    unsealed.seal()
    for call in (lambda: root.read("k"), lambda: root.write("k", {"v": "x"}), root.check):
        with pytest.raises(SecretsUnavailable, match="VaultDown"):
            call()
    # a login while sealed (a worker starting now) is an outage too, not a refused identity
    with pytest.raises(SecretsUnavailable, match="VaultDown"):
        VaultBackend(url=unsealed.url, role_id=role_id, secret_id=secret_id)
    unsealed.unseal()
    assert root.read("k") == {"v": "1"}
    assert app.read("k") == {"v": "2"}
    root.check()

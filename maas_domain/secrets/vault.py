"""Vault (or OpenBao) KV v2 through hvac.

Every hvac error becomes one of our classes (``_classify``; docs/vault-kv2.md): 400 with the
check-and-set mismatch text is a conflict, other 400s are bugs, 403 means our identity was refused
(also an expired or revoked token: re-login once with AppRole, then fail), 404 is not found,
sealed (503), uninitialised (501), 5xx and connection errors are transient. The contract and the
drills run against a real OpenBao server (tests/test_secrets.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import hvac
import requests
from hvac import exceptions as hv

from maas_domain import dryrun
from maas_domain.secrets.base import (
    SecretConflict,
    SecretNotFound,
    SecretsError,
    SecretsForbidden,
    SecretsUnavailable,
)

T = TypeVar("T")


class VaultBackend:
    name = "vault"

    def __init__(
        self,
        *,
        url: str,
        token: str | None = None,
        role_id: str | None = None,
        secret_id: str | None = None,
        mount: str = "secret",
        prefix: str = "maascp",
        namespace: str | None = None,
        verify: bool | str = True,
        timeout: int = 10,
    ) -> None:
        self._role_id = role_id
        self._secret_id = secret_id
        self.mount = mount
        self.prefix = prefix.strip("/")
        self._client = hvac.Client(
            url=url, token=token, namespace=namespace, verify=verify, timeout=timeout
        )
        if role_id and secret_id and not token:
            self._login()

    @classmethod
    def from_settings(cls, conf: dict[str, Any]) -> VaultBackend:
        return cls(
            url=conf["ADDR"],
            token=conf["TOKEN"],
            role_id=conf["ROLE_ID"],
            secret_id=conf["SECRET_ID"],
            mount=conf["MOUNT"],
            prefix=conf["PATH_PREFIX"],
            namespace=conf["NAMESPACE"],
            verify=conf["CACERT"] or True,
            timeout=conf["TIMEOUT"],
        )

    def _full(self, path: str) -> str:
        return f"{self.prefix}/{path.strip('/')}" if self.prefix else path.strip("/")

    def _login(self) -> None:
        try:
            self._client.auth.approle.login(role_id=self._role_id, secret_id=self._secret_id)
        except (hv.InvalidRequest, hv.Forbidden, hv.Unauthorized) as exc:
            # a wrong or revoked role_id/secret_id (400 "invalid role or secret ID") or a policy
            # that forbids the login: our identity is refused, a retry will not fix it
            raise SecretsForbidden(f"Vault AppRole login failed: {type(exc).__name__}") from exc
        except (hv.VaultError, requests.RequestException) as exc:
            raise _classify(exc) from exc

    def _call(self, fn: Callable[[], T]) -> T:
        relogged = False
        while True:
            try:
                return fn()
            except hv.Forbidden as exc:
                # 403 is also what an expired or revoked token gets: with AppRole, log in again
                # once (a fresh token), then give up
                if self._role_id and self._secret_id and not relogged:
                    relogged = True
                    self._login()
                    continue
                raise SecretsForbidden("Vault denied the request (403)") from exc
            except (hv.VaultError, requests.RequestException) as exc:
                raise _classify(exc) from exc

    def write(self, path: str, data: dict[str, str], *, cas: int | None = None) -> int:
        dryrun.refuse("write a secret")
        kv = self._client.secrets.kv.v2
        result = self._call(
            lambda: kv.create_or_update_secret(
                path=self._full(path), secret=data, cas=cas, mount_point=self.mount
            )
        )
        return int(result["data"]["version"])

    def read(self, path: str, version: int | None = None) -> dict[str, str]:
        kv = self._client.secrets.kv.v2
        result = self._call(
            lambda: kv.read_secret_version(
                path=self._full(path),
                version=version,
                mount_point=self.mount,
                raise_on_deleted_version=True,
            )
        )
        data: dict[str, str] = result["data"]["data"]
        return data

    def destroy(self, path: str) -> None:
        dryrun.refuse("destroy a secret")
        kv = self._client.secrets.kv.v2
        with contextlib.suppress(SecretNotFound):
            self._call(
                lambda: kv.delete_metadata_and_all_versions(
                    path=self._full(path), mount_point=self.mount
                )
            )

    def check(self) -> None:
        # lookup-self answers 403 for an expired or revoked token, so AppRole logs in again here
        # too; a sealed server answers 503 (unavailable)
        self._call(self._client.auth.token.lookup_self)


def _classify(exc: Exception) -> SecretsError:
    """One of our four error classes for an hvac or transport error (never an hvac type)."""
    if isinstance(exc, hv.InvalidPath):
        return SecretNotFound("no such secret in Vault")
    if isinstance(exc, hv.InvalidRequest):
        text = str(exc)
        if "did not match the current version" in text:
            return SecretConflict("check-and-set parameter did not match the current version")
        if "check-and-set parameter required" in text:
            return SecretsError(
                "the KV mount or path requires check-and-set (cas_required); the control plane "
                "writes new versions without it: turn cas_required off for its paths"
            )
        return SecretsError(f"Vault rejected the request: {exc.errors}")
    if isinstance(exc, hv.Forbidden):
        return SecretsForbidden("Vault denied the request (403)")
    if isinstance(exc, hv.Unauthorized):
        return SecretsForbidden("Vault token rejected (401)")
    if isinstance(exc, hv.VaultDown) and "sealed" in str(exc).lower():
        return SecretsUnavailable("Vault is sealed (VaultDown): an operator must unseal it")
    if isinstance(
        exc,
        hv.VaultDown  # 503: down, or sealed
        | hv.VaultNotInitialized  # 501: a new server nobody has initialised yet
        | hv.InternalServerError
        | hv.BadGateway
        | hv.RateLimitExceeded  # 429: a standby or performance-standby node
        | hv.PreconditionFailed  # 412: Enterprise eventual consistency, retry
        | hv.UnexpectedError,
    ):
        return SecretsUnavailable(f"Vault unavailable: {type(exc).__name__}")
    if isinstance(exc, requests.RequestException):
        return SecretsUnavailable(f"Vault unreachable: {type(exc).__name__}")
    return SecretsError(f"Vault error: {type(exc).__name__}")

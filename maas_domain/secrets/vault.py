"""Vault (or OpenBao) KV v2 through hvac.

Error classes follow docs in shared/vault-kv2.md: 400 with the CAS text is a conflict, other 400s
are bugs, 403 means our identity was refused (re-login once with AppRole, then fail), 404 is not
found, 5xx/connection errors are transient.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import hvac
import requests
from hvac import exceptions as hv

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
        except hv.VaultError as exc:
            raise SecretsForbidden(f"Vault AppRole login failed: {type(exc).__name__}") from exc

    def _call(self, fn: Callable[[], T]) -> T:
        relogged = False
        while True:
            try:
                return fn()
            except hv.Forbidden as exc:
                if self._role_id and self._secret_id and not relogged:
                    relogged = True
                    self._login()
                    continue
                raise SecretsForbidden("Vault denied the request (403)") from exc
            except hv.InvalidPath as exc:
                raise SecretNotFound("no such secret in Vault") from exc
            except hv.InvalidRequest as exc:
                if "check-and-set" in str(exc):
                    raise SecretConflict(
                        "check-and-set parameter did not match the current version"
                    ) from exc
                raise SecretsError(f"Vault rejected the request: {exc.errors}") from exc
            except (
                hv.VaultDown,
                hv.InternalServerError,
                hv.BadGateway,
                hv.RateLimitExceeded,
            ) as exc:
                raise SecretsUnavailable(f"Vault unavailable: {type(exc).__name__}") from exc
            except hv.Unauthorized as exc:
                raise SecretsForbidden("Vault token rejected (401)") from exc
            except requests.RequestException as exc:
                raise SecretsUnavailable(f"Vault unreachable: {type(exc).__name__}") from exc

    def write(self, path: str, data: dict[str, str], *, cas: int | None = None) -> int:
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
        kv = self._client.secrets.kv.v2
        with contextlib.suppress(SecretNotFound):
            self._call(
                lambda: kv.delete_metadata_and_all_versions(
                    path=self._full(path), mount_point=self.mount
                )
            )

    def check(self) -> None:
        try:
            authenticated = self._call(self._client.is_authenticated)
        except SecretsError:
            raise
        if not authenticated:
            raise SecretsForbidden("Vault token is not valid")

"""Secrets as Fernet-encrypted rows in our own database (embedded mode, or no Vault).

Same semantics as Vault KV v2 where it matters here: versions grow by one per write, a write may
be check-and-set (``cas=0`` is create-only), old versions stay readable until destroyed. Keys
come from ``MAASCP_SECRETS_KEY`` (several, newest first, allow key rotation via MultiFernet).
"""

from __future__ import annotations

import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.db import IntegrityError, transaction
from django.db.models import Max

from maas_domain import compiled, dryrun
from maas_domain.models import SecretVersion
from maas_domain.secrets.base import SecretConflict, SecretNotFound, SecretsUnavailable


class DatabaseBackend:
    name = "database"

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise ValueError("the database secrets backend needs at least one key")
        self._fernet = MultiFernet([Fernet(k.encode()) for k in keys])

    def write(self, path: str, data: dict[str, str], *, cas: int | None = None) -> int:
        dryrun.refuse("write a secret")
        token = self._fernet.encrypt(json.dumps(data, sort_keys=True).encode())
        try:
            with transaction.atomic():
                current = (
                    SecretVersion.objects.filter(path=path).aggregate(v=Max("version"))["v"] or 0
                )
                if cas is not None and cas != current:
                    raise SecretConflict(
                        "check-and-set parameter did not match the current version"
                    )
                row = SecretVersion.objects.create(path=path, version=current + 1, ciphertext=token)
        except IntegrityError as exc:  # a concurrent writer took the same version number
            raise SecretConflict("concurrent write to the same secret") from exc
        return row.version

    def read(self, path: str, version: int | None = None) -> dict[str, str]:
        row = (
            compiled.first(SecretVersion, path=path, destroyed=False, version=version)
            if version is not None
            else compiled.first(SecretVersion, order=("-version",), path=path, destroyed=False)
        )
        if row is None:
            raise SecretNotFound(f"no secret at {path!r} version {version or 'latest'}")
        try:
            plain = self._fernet.decrypt(bytes(row.ciphertext))
        except InvalidToken as exc:
            raise SecretsUnavailable(
                f"cannot decrypt {path!r}: MAASCP_SECRETS_KEY does not match the stored rows"
            ) from exc
        data: dict[str, str] = json.loads(plain)
        return data

    def destroy(self, path: str) -> None:
        dryrun.refuse("destroy a secret")
        SecretVersion.objects.filter(path=path).delete()

    def check(self) -> None:
        SecretVersion.objects.exists()

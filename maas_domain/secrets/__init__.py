"""Secrets backend: Vault KV v2 through hvac when configured, else encrypted database rows.

Both speak the same small, versioned interface (``SecretsBackend``). Callers store only the path
and version in the database; values are read inside the process that needs them and are never
passed through Celery messages, logs, events or audit rows.
"""

from __future__ import annotations

from functools import cache

from django.conf import settings

from maas_domain.secrets.base import (
    SecretConflict,
    SecretNotFound,
    SecretsBackend,
    SecretsError,
    SecretsForbidden,
    SecretsUnavailable,
)


@cache
def get_backend() -> SecretsBackend:
    if settings.SECRETS_BACKEND == "vault":
        from maas_domain.secrets.vault import VaultBackend

        return VaultBackend.from_settings(settings.VAULT)
    from maas_domain.secrets.database import DatabaseBackend

    return DatabaseBackend(settings.SECRETS_KEYS)


__all__ = [
    "SecretConflict",
    "SecretNotFound",
    "SecretsBackend",
    "SecretsError",
    "SecretsForbidden",
    "SecretsUnavailable",
    "get_backend",
]

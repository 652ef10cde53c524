"""The secrets backend interface and its error classes."""

from __future__ import annotations

from typing import Protocol


class SecretsError(Exception):
    """Base class. Messages never contain secret values."""


class SecretNotFound(SecretsError):
    """No such path or version (or a destroyed/deleted version)."""


class SecretConflict(SecretsError):
    """Check-and-set mismatch: someone else wrote first. Re-read and decide; never loop."""


class SecretsForbidden(SecretsError):
    """The backend refused our identity (Vault 403)."""


class SecretsUnavailable(SecretsError):
    """Transient: sealed, down, unreachable. Retry with backoff."""


class SecretsBackend(Protocol):
    name: str

    def write(self, path: str, data: dict[str, str], *, cas: int | None = None) -> int:
        """Write a new version; ``cas=0`` means create-only. Return the new version number."""

    def read(self, path: str, version: int | None = None) -> dict[str, str]:
        """Read a version (latest when None)."""

    def destroy(self, path: str) -> None:
        """Remove every version and the metadata. Missing paths are fine (idempotent)."""

    def check(self) -> None:
        """Raise SecretsError when the backend cannot serve reads and writes."""

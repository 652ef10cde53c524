"""Reading a site's credentials, in the process that needs them (the MAAS client factory, the
discover stage): the values never leave it, never travel in Celery messages, logs, events or
audit rows. Writing them is ``maas_domain/services/credentials.py`` (validated, audited).

A version of a secret never changes, so a process keeps what it read of a MAAS API key for
``MAASCP_SECRETS_CACHE_SECONDS`` (every workflow step needs the key; a rotation is a new
version, read afresh). The reference row is read every time, so a rotation takes effect at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from maas_domain import compiled
from maas_domain.models import CredentialKind, MaasSite, PowerCredentialOverride, SiteCredential
from maas_domain.models.sites import SecretRef
from maas_domain.secrets import SecretNotFound, SecretsError, get_backend


@dataclass(frozen=True)
class IpmiCredentials:
    username: str
    password: str

    def __repr__(self) -> str:  # keep the password out of tracebacks and logs
        return f"IpmiCredentials(username={self.username!r}, password='[redacted]')"


class CredentialNotConfirmed(SecretsError):
    """The site's MAAS URL or TLS setting changed since its API key was written."""


def unconfirmed_message(site: MaasSite) -> str:
    return (
        f"the MAAS URL or TLS setting of site {site.name!r} changed since its API key was "
        "written: nothing is sent there until an operator confirms it (probe with "
        '{"confirm_maas_url": "<the site\'s maas_url>"}) or writes new credentials'
    )


def unreadable(exc: Exception) -> str:
    """Why a site's MAAS could not be asked, for an answer that is not an error (diagnostics,
    merged MAAS events): an unconfirmed address is an operator's decision, not an outage."""
    if isinstance(exc, CredentialNotConfirmed):
        return f"credentials unconfirmed: {exc}"
    return f"secrets backend: {exc}"


def maas_api_key(*, site: MaasSite, pending: bool = False) -> str:
    """The confirmed key (or the pending one, for the probe that confirms it), only for the MAAS
    URL and TLS setting it is bound to (docs/security.md)."""
    # read at every call (a rotation takes effect at once), compiled once (compiled.py)
    ref = compiled.first(SiteCredential, site_id=site.pk, kind=CredentialKind.MAAS_API_KEY)
    if ref is None or ref.version is None:
        raise SecretNotFound(f"site {site.name!r} has no MAAS API key")
    if not ref.bound_to(site):
        raise CredentialNotConfirmed(unconfirmed_message(site))
    version = ref.pending_version if pending and ref.pending_version else ref.version
    return _read_version(ref.path, version)["api_key"]


_cache: dict[tuple[str, int], tuple[Any, float, dict[str, str]]] = {}
_cache_lock = threading.Lock()


def _read_version(path: str, version: int) -> dict[str, str]:
    """One version of a secret, from this process's short-lived cache when it has it."""
    backend = get_backend()
    ttl = float(settings.SECRETS_CACHE_SECONDS)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get((path, version))
    if ttl > 0 and hit is not None and hit[0] is backend and hit[1] > now:
        return hit[2]
    data = backend.read(path, version)
    if ttl > 0:
        with _cache_lock:
            if len(_cache) >= 1024:
                _cache.clear()
            _cache[(path, version)] = (backend, now + ttl, data)
    return data


def ipmi_credentials(*, site: MaasSite, hostname: str) -> IpmiCredentials:
    """Per-host override first, else the site default."""
    ref: SecretRef | None = PowerCredentialOverride.objects.filter(
        site=site, hostname=hostname
    ).first()
    if ref is None:
        ref = SiteCredential.objects.filter(site=site, kind=CredentialKind.IPMI_DEFAULT).first()
    if ref is None or ref.version is None:
        raise SecretNotFound(f"site {site.name!r} has no IPMI credentials for {hostname!r}")
    data = get_backend().read(ref.path, ref.version)
    return IpmiCredentials(username=data["username"], password=data["password"])

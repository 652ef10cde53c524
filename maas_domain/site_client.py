"""Every MAAS client the product uses is built here, for a site: URL and TLS from the site row,
the key from the secrets backend (read here, in the process that uses it; never passed through
Celery or logged), the outbound address rules (docs/security.md), the Prometheus counters, and
the dry-run guard on mutations (maas_domain/dryrun.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from maas_client.client import MaasClient
from maas_domain import dryrun, urlsafety
from maas_domain.models import MaasSite
from maas_domain.observability import metrics
from maas_domain.secrets.sites import maas_api_key


def client_for_site(site: MaasSite, *, api_key: str | None = None, **overrides: Any) -> MaasClient:
    """A client with the site's confirmed key (or ``api_key``: a probe trying a pending one)."""
    if api_key is None:
        api_key = maas_api_key(site=site)
    return _client(site, api_key, overrides)


def anonymous_client_for_site(site: MaasSite, **overrides: Any) -> MaasClient:
    """A client without a key: MAAS answers only ``version/`` and ``describe/`` (the probe's
    reachability check, which must not send a key anywhere)."""
    return _client(site, None, overrides)


def _client(site: MaasSite, api_key: str | None, overrides: dict[str, Any]) -> MaasClient:
    options: dict[str, Any] = {
        "site": site.name,
        "verify_tls": site.verify_tls,
        "connect_timeout": settings.MAAS_CONNECT_TIMEOUT,
        "read_timeout": settings.MAAS_READ_TIMEOUT,
        "deadline": settings.MAAS_REQUEST_DEADLINE,
        "max_body": settings.MAAS_MAX_RESPONSE_BYTES,
        "target_problem": urlsafety.resolved_problem,
        "observe": metrics.maas_request,
    }
    options.update(overrides)
    options["before_mutation"] = _refusing_in_dry_runs(options.get("before_mutation"))
    return MaasClient(site.maas_url, api_key, **options)


def _refusing_in_dry_runs(then: Callable[[str], None] | None) -> Callable[[str], None]:
    """Before every MAAS mutation: refuse during a dry run (maas_domain/dryrun.py), then run
    the caller's own hook (a workflow renews its lease)."""

    def check(operation: str) -> None:
        dryrun.refuse(f"send {operation} to MAAS")
        if then is not None:
            then(operation)

    return check

"""Diagnostics fetched through the control plane (never through host SSH): MAAS machine events,
status message, installation output and commissioning results for one machine, kept briefly
per machine and fetched again only on request, at a bounded rate (``node_diagnostics``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from redis.exceptions import RedisError
from rest_framework.exceptions import Throttled

from maas_client.errors import MaasError
from maas_domain import throttling
from maas_domain.errors import ServiceUnavailable
from maas_domain.secrets import SecretsError
from maas_domain.secrets.sites import unreadable
from maas_domain.site_client import client_for_site

if TYPE_CHECKING:
    from maas_domain.work import WorkflowRow


def machine_diagnostics(site: Any, system_id: str, *, events: int = 25) -> dict[str, Any]:
    if not system_id:
        return {"available": False, "detail": "no MAAS machine yet"}
    try:
        client = client_for_site(site, read_attempts=1, read_timeout=10)
    except SecretsError as exc:
        return {"available": False, "detail": unreadable(exc)}
    try:
        machine = client.get_machine(system_id)
        page = client.events(system_ids=[system_id], level="DEBUG", limit=events)
        commissioning = client.script_results(
            system_id, result_type="commissioning", include_output=True
        )
        try:
            install = client.installation_output(system_id)
        except MaasError:
            install = ""
    except MaasError as exc:
        return {"available": False, "detail": f"MAAS {exc.kind}: {exc.message}"}
    finally:
        client.close()
    return {
        "available": True,
        "system_id": system_id,
        "status": machine.status_name,
        "status_message": machine.status_message,
        "error_description": machine.error_description,
        "power_state": machine.power_state,
        "events": [
            {
                "id": e.id,
                "created": e.created.isoformat(),
                "level": e.level,
                "type": e.type,
                "description": e.description,
            }
            for e in page.events
        ],
        "installation_output": install[-20000:],
        "commissioning_results": [
            {
                "name": r.name,
                "status": r.status_name,
                "exit_status": r.exit_status,
                "output": r.output[-4000:],
            }
            for s in commissioning[-1:]
            for r in s.results
        ],
    }


CACHE_SECONDS = 60  # docs/api.md, "Diagnostics": how long a fetched answer is shown
# A refresh within this long of the machine's last fetch gets that fetch: a burst of refreshes
# (30 in 4 s made 120 MAAS requests) is one fetch per machine.
REFRESH_INTERVAL = 10
_CACHE_ERRORS = (RedisError, OSError)


def _keys(site_pk: int, system_id: str) -> tuple[str, str]:
    key = f"maascp:diagnostics:{site_pk}:{system_id}"
    return key, f"{key}:fetching"


def node_diagnostics(
    site: Any, system_id: str, *, refresh: bool, caller: str, since: datetime | None = None
) -> dict[str, Any]:
    """One MAAS machine's diagnostics, kept per (site, machine) for ``CACHE_SECONDS``: every
    workflow of the node and every page showing it share one answer. Only ``refresh`` asks
    MAAS, at most once per ``REFRESH_INTERVAL`` per machine (unless the record shown changed
    ``since`` that fetch: a workflow that moved on is not shown with what MAAS said before) and
    one fetch at a time; each fetch
    counts against the caller's ``MAASCP_DIAGNOSTICS_REFRESHES_PER_MINUTE`` (``caller``: a token
    or user, as the mutation limit names them), past which it is a 429 with ``Retry-After``.
    ``fetched_at`` and ``age_seconds`` say how old the answer is."""
    if not system_id:
        return {"available": False, "detail": "no MAAS machine yet", **_AGELESS}
    key, fetching = _keys(site.pk, system_id)
    try:
        found = cache.get(key)
    except _CACHE_ERRORS:  # a read needs no cache: say so (a refresh is a 503 below)
        if not refresh:
            return {"available": False, "detail": "the cache is unavailable", **_AGELESS}
        found = None
    if refresh and (found is None or _stale(found, since)):
        wait = throttling.over(
            "diagnostics_refresh", caller, allowed=settings.DIAGNOSTICS_REFRESHES_PER_MINUTE
        )
        if wait is not None:
            raise Throttled(wait=wait)
        if cache.add(fetching, 1, timeout=30):  # one fetch per machine at a time
            try:
                found = {**machine_diagnostics(site, system_id),
                         "fetched_at": timezone.now().isoformat()}  # fmt: skip
                cache.set(key, found, CACHE_SECONDS)
            finally:
                cache.delete(fetching)
        elif found is None:
            return {"available": False,
                    "detail": "being fetched for another request: ask again in a few seconds",
                    **_AGELESS}  # fmt: skip
    if found is None:
        return {"available": False,
                "detail": "not fetched in the last minute: ask with ?diagnostics=refresh",
                **_AGELESS}  # fmt: skip
    return {**found, "age_seconds": round(_age(found), 1)}


_AGELESS = {"fetched_at": None, "age_seconds": None}


def _stale(found: dict[str, Any], since: datetime | None) -> bool:
    fetched = datetime.fromisoformat(found["fetched_at"])
    return _age(found) >= REFRESH_INTERVAL or (since is not None and fetched < since)


def _age(found: dict[str, Any]) -> float:
    age = (timezone.now() - datetime.fromisoformat(found["fetched_at"])).total_seconds()
    return max(age, 0.0)


def cached_diagnostics(wf: WorkflowRow, *, refresh: bool, caller: str) -> dict[str, Any]:
    """A workflow's diagnostics: its machine's (``node_diagnostics``)."""
    return node_diagnostics(
        wf.site, wf.maas_system_id, refresh=refresh, caller=caller, since=wf.updated_at
    )


def admin_diagnostics(
    request: Any, site: Any, system_id: str, *, since: datetime | None
) -> dict[str, Any]:
    """What the admin's node and workflow pages show: fetched now (their fragment loads after
    the page), within the same per-machine and per-user bounds as the API."""
    try:
        return node_diagnostics(
            site, system_id, refresh=True, caller=throttling.caller(request), since=since
        )
    except Throttled as exc:
        wait = getattr(exc, "wait", None) or 60
        detail = f"too many MAAS fetches this minute; try again in {wait:.0f} s"
        return {"available": False, "detail": detail, **_AGELESS}
    except ServiceUnavailable as exc:
        return {"available": False, "detail": exc.message, **_AGELESS}

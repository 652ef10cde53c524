"""Diagnostics fetched through the control plane (never through host SSH): MAAS machine events,
status message, installation output and commissioning results for one workflow's machine."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.core.cache import cache
from django.utils import timezone

from maas_client.errors import MaasError
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


def cached_diagnostics(kind: str, wf: WorkflowRow, *, refresh: bool) -> dict[str, Any]:
    """A workflow's diagnostics from a short-lived cache, fetched from MAAS only when
    ``refresh`` is asked (or nothing is cached). ``fetched_at`` and ``age_seconds`` say how old
    the answer is; reading a workflow never waits on MAAS unless the caller asked to."""
    key = f"maascp:diagnostics:{kind}:{wf.pk}:{wf.maas_system_id}"
    found = None if refresh else cache.get(key)
    if found is None and not refresh:
        return {
            "available": False,
            "detail": "not fetched in the last minute: ask with ?diagnostics=refresh",
            "fetched_at": None,
            "age_seconds": None,
        }
    if found is None:
        found = {**machine_diagnostics(wf.site, wf.maas_system_id),
                 "fetched_at": timezone.now().isoformat()}  # fmt: skip
        cache.set(key, found, CACHE_SECONDS)
    age = (timezone.now() - datetime.fromisoformat(found["fetched_at"])).total_seconds()
    return {**found, "age_seconds": round(max(age, 0.0), 1)}

"""Site guardrails every workflow start checks (docs/api.md, "Guardrails"), in one place.

``site_problems``: the site is enabled and its probe is healthy and recent. ``guard_problems``:
a guarded site (a first live run, a fragile rack) acts on one approved host at a time, and only
when the request names it in ``confirm_host``.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from maas_domain.models import MaasSite, Node, NodeState, SiteProfile, Sku
from maas_domain.models.sites import ProfileStatus, SiteHealth, SiteStatus


def site_problems(site: MaasSite) -> list[str]:
    problems = []
    if site.status != SiteStatus.ACTIVE:
        problems.append(f"site {site.name} is disabled")
    if site.health != SiteHealth.HEALTHY or site.last_probe_at is None:
        problems.append(f"site probe is {site.health}; run POST /maas-sites/{site.pk}/probe")
    elif (timezone.now() - site.last_probe_at).total_seconds() > settings.PROBE_MAX_AGE_SECONDS:
        problems.append("the last site probe is too old; probe the site again")
    return problems


def guard_problems(site: MaasSite, hostnames: list[str], confirm_host: str | None) -> list[str]:
    if not site.guarded:
        return []
    if len(hostnames) != 1:
        return ["site is guarded: act on one approved host at a time"]
    if confirm_host != hostnames[0]:
        return [f"site is guarded: confirm_host must name {hostnames[0]!r}"]
    if hostnames[0] not in (site.approved_hosts or []):
        return [f"site is guarded and {hostnames[0]} is not on its approved list"]
    return []


def target_problems(site: MaasSite, profile: SiteProfile, sku: Sku) -> list[str]:
    """Checked when a request arrives and again by the preflight stage: the site checks, the
    profile active, the SKU active."""
    problems = site_problems(site)
    if profile.status != ProfileStatus.ACTIVE:
        problems.append(f"profile {profile.name} is disabled")
    if not sku.active:
        problems.append(f"SKU {sku.code} is not active")
    return problems


def machine_holder(site: MaasSite, system_id: str, *, other_than: int | None) -> str | None:
    """The hostname of another live node on ``site`` that already has MAAS machine
    ``system_id`` (the database allows one live node per machine), or None."""
    return (
        Node.objects.filter(site=site, maas_system_id=system_id)
        .exclude(state=NodeState.RETIRED)
        .exclude(pk=other_than or 0)
        .values_list("hostname", flat=True)
        .first()
    )

"""The embedded demo: a site pointing at the bundled simulator, with a profile, a SKU,
credentials, and a probe. Idempotent, so ``make run`` can call it on every start."""

from __future__ import annotations

from typing import Any

from maas_domain import audit
from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.probe import site_probe
from maas_domain.services.sites import profile_create, site_create

DEMO_SITE = "demo"


def demo_site_ensure(*, actor: audit.Actor, maas_url: str, api_key: str) -> dict[str, Any]:
    """Create (once) the demo site, profile and SKU, refresh its credentials, probe it."""
    Sku.objects.get_or_create(
        code="gpu-8x-h100", defaults={"name": "8x H100 SXM5", "gpu_model": "H100", "gpu_count": 8}
    )
    site = MaasSite.objects.filter(name=DEMO_SITE).first()
    if site is None:
        site = site_create(
            actor=actor,
            data={
                "name": DEMO_SITE,
                "description": "Bundled MAAS simulator (embedded mode)",
                "maas_url": maas_url,
                "pxe_subnet": "10.20.0.0/16",
                "policy": {"erase_mode": "quick", "deploy_retry_limit": 1},
            },
        )
    if not SiteProfile.objects.filter(site=site, name="default").exists():
        profile_create(
            actor=actor,
            site=site,
            data={"name": "default", "distro_series": "jammy", "architecture": "amd64/generic"},
        )
    site_credentials_write(
        actor=actor,
        site=site,
        payload={"maas_api_key": api_key, "ipmi": {"username": "maas", "password": "demo-ipmi"}},
    )
    return site_probe(actor=actor, site_id=site.pk)

"""The embedded demo: a site pointing at the bundled simulator, with a profile, a SKU,
credentials, and a probe. Idempotent, so ``make run`` can call it on every start."""

from __future__ import annotations

from typing import Any

from maas_domain import audit
from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.pki import self_signed_ca
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.probe import site_probe
from maas_domain.services.sites import profile_create, site_create
from maas_domain.work import OPEN_STATES, WorkflowState
from onboarding.models import Onboarding
from onboarding.services import onboarding_start

DEMO_SITE = "demo"


def demo_ca_pem() -> str:
    """A throwaway self-signed CA (tests and benchmarks give their sites one of their own)."""
    return self_signed_ca("maascp demo CA")


def demo_site_ensure(
    *, actor: audit.Actor, maas_url: str, api_key: str, ca_bundle_pem: str = ""
) -> dict[str, Any]:
    """Create (once) the demo site, profile and SKU, refresh its credentials, probe it. The
    site follows the simulator's URL (``--maas-port``) and has no node API URL or CA of its
    own: the deployment's (``MAASCP_NODE_API_URL``, which ``run_embedded`` sets from ``--port``,
    and the stack's own CA, ``MAASCP_NODE_CA_FILE``) apply to it as to every site created
    afterwards (docs/settings.md, "Node trust")."""
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
                "ca_bundle_pem": ca_bundle_pem,  # empty: the deployment's
                "policy": {"erase_mode": "quick", "deploy_retry_limit": 1},
            },
        )
    if site.maas_url != maas_url or site.node_api_url:
        # the simulator moved (--maas-port); a node API URL an earlier version set goes
        MaasSite.objects.filter(pk=site.pk).update(maas_url=maas_url, node_api_url="")
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


def demo_onboarding_start(*, actor: audit.Actor) -> Onboarding:
    """Onboard c07u31 (the demo site's first machine) unless it is already onboarded."""
    site = MaasSite.objects.get(name=DEMO_SITE)
    existing = Onboarding.objects.filter(site=site, hostname="c07u31").order_by("-id").first()
    if existing is not None and existing.state in (WorkflowState.SUCCEEDED, *OPEN_STATES):
        return existing
    return onboarding_start(
        actor=actor,
        site_id=site.pk,
        profile_id=SiteProfile.objects.get(site=site, name="default").pk,
        sku_id=Sku.objects.get(code="gpu-8x-h100").pk,
        hostname="c07u31",
        ipmi_ip="10.10.7.31",
    )

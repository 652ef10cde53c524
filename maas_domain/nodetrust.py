"""What a site's nodes are given to reach and trust the control plane (docs/settings.md, "Node
trust"): the node API URL and the CA bundle, each the site's own when set, else the
deployment's (``MAASCP_NODE_API_URL``, ``MAASCP_NODE_CA_FILE``; embedded: the stack's own URL
and a CA generated into the data folder).

One place decides both, so the site API shows what nodes will really get, the site services
refuse a site that would lack them (create and update), the probe reports them, and the
onboarding preflight and first-boot payload use the same values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from maas_domain.pki import ca_bundle_error

SITE, DEPLOYMENT, NONE = "site", "deployment", "none"
NO_CA = (
    "No CA bundle for nodes to trust the control plane: set ca_bundle_pem on the site (PEM of "
    "the CA that signed the node API URL's certificate), or MAASCP_NODE_CA_FILE for the "
    'deployment (docs/settings.md, "Node trust").'
)


@dataclass(frozen=True)
class NodeTrust:
    node_api_url: str
    node_api_url_source: str  # site | deployment
    ca_bundle_pem: str
    ca_source: str  # site | deployment | none

    def as_dict(self) -> dict[str, str]:
        return {
            "node_api_url": self.node_api_url,
            "node_api_url_source": self.node_api_url_source,
            "ca_source": self.ca_source,
        }


def node_trust(site: Any) -> NodeTrust:
    own_url = str(site.node_api_url or "")
    own_ca = str(site.ca_bundle_pem or "").replace("\r\n", "\n").strip()  # a form sends CRLF
    deployment_ca = str(settings.NODE_CA_PEM or "").strip()
    return NodeTrust(
        node_api_url=(own_url or settings.NODE_API_URL).rstrip("/"),
        node_api_url_source=SITE if own_url else DEPLOYMENT,
        ca_bundle_pem=own_ca or deployment_ca,
        ca_source=SITE if own_ca else DEPLOYMENT if deployment_ca else NONE,
    )


def trust_problems(site: Any) -> dict[str, list[str]]:
    """Field → why nodes of ``site`` could not trust the control plane, each with its fix
    (empty: they can). The site services refuse such a site; the probe and the preflight name
    the same reasons for a site that lost its trust later (an expired certificate, a
    deployment CA removed)."""
    trust = node_trust(site)
    if trust.ca_source == NONE:
        return {"ca_bundle_pem": [NO_CA]}
    reason = ca_bundle_error(trust.ca_bundle_pem)
    if reason is None:
        return {}
    if trust.ca_source == SITE:
        return {"ca_bundle_pem": [f"{reason} Replace the site's ca_bundle_pem."]}
    return {
        "ca_bundle_pem": [
            f"The deployment's CA bundle (MAASCP_NODE_CA_FILE): {reason} Replace that file, or "
            "set ca_bundle_pem on the site."
        ]
    }


def trust_summary(site: Any) -> str:
    trust = node_trust(site)
    return (
        f"nodes reach {trust.node_api_url} ({trust.node_api_url_source}) and trust the "
        f"{trust.ca_source}'s CA bundle"
    )

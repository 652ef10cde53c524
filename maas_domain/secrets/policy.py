"""The secrets server's policy for a region's workers (docs/security.md, "What each role holds";
docs/operations.md, "Regions"): ``manage.py secrets_policy --region <name>`` prints it.

A region's workers run its sites' MAAS work (``maas_domain/regions.py``): they read those sites'
MAAS API keys and IPMI credentials, and mint and read their onboardings' node tokens. Their
policy grants exactly that, under the region's prefix (``regions.secrets_prefix``): another
region's credentials and tokens are refused (403), and so is writing any credential. The
central identity (the API, the central workers, beat: ``deploy/openbao/maascp-policy.hcl``)
writes credentials and moves a site's secrets when it changes region.
"""

from __future__ import annotations

from maas_domain.regions import secrets_prefix
from maas_domain.validators import region_error


def region_policy(region: str, *, mount: str = "secret", prefix: str = "maascp") -> str:
    if reason := region_error(region):
        raise ValueError(f"region {region!r}: {reason}")
    base = "/".join(p for p in (prefix.strip("/"), secrets_prefix(region)) if p)
    return (
        f"# The workers of region {region}: read its sites' credentials; mint, read and remove\n"
        f"# its onboardings' node tokens. Nothing else (maas_domain/secrets/policy.py).\n"
        f'path "{mount}/data/{base}/sites/*" {{\n'
        f'  capabilities = ["read"]\n'
        f"}}\n"
        f'path "{mount}/data/{base}/onboardings/*" {{\n'
        f'  capabilities = ["create", "read", "update"]\n'
        f"}}\n"
        f'path "{mount}/metadata/{base}/onboardings/*" {{\n'
        f'  capabilities = ["read", "delete"]\n'
        f"}}\n"
    )

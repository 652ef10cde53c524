"""The first-boot payload: tokens for one attempt, and cloud-config rendered from templates/.

Tokens: a bootstrap token and an enrollment token are minted together for an attempt. Their
values go to the secrets backend (the rendered payload needs them); the onboarding row keeps
only SHA-256 hashes and the attempt they belong to, so the enrollment endpoint can tell the
current attempt's token from a stale one.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string

from maas_domain.models import RoceAssignment
from maas_domain.policy import Policy
from maas_domain.secrets import get_backend


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def tokens_path(onboarding_id: int, attempt: int) -> str:
    return f"onboardings/{onboarding_id}/attempt-{attempt}"


@dataclass(frozen=True)
class Tokens:
    bootstrap: str
    enrollment: str

    def __repr__(self) -> str:
        return "Tokens(bootstrap=…, enrollment=…)"


def mint_tokens(onboarding_id: int, attempt: int) -> tuple[Tokens, dict[str, Any]]:
    """New tokens for ``attempt``; returns them and the row fields that record their hashes."""
    tokens = Tokens(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
    get_backend().write(
        tokens_path(onboarding_id, attempt),
        {"bootstrap_token": tokens.bootstrap, "enrollment_token": tokens.enrollment},
    )
    return tokens, {
        "token_attempt": attempt,
        "bootstrap_token_hash": token_hash(tokens.bootstrap),
        "enrollment_token_hash": token_hash(tokens.enrollment),
    }


def read_tokens(wf: Any) -> Tokens | None:
    """The current attempt's tokens, if they exist and match the stored hashes."""
    if wf.token_attempt != wf.attempt:
        return None
    data = get_backend().read(tokens_path(wf.pk, wf.attempt))
    tokens = Tokens(data["bootstrap_token"], data["enrollment_token"])
    if (token_hash(tokens.bootstrap), token_hash(tokens.enrollment)) != (
        wf.bootstrap_token_hash,
        wf.enrollment_token_hash,
    ):
        return None
    return tokens


def node_api_url(site: Any) -> str:
    return str(site.node_api_url or settings.NODE_API_URL).rstrip("/")


def agent_script_url(site: Any) -> str:
    return f"{node_api_url(site)}/api/v1/node/agent/{settings.NODE_AGENT_VERSION}/bootstrap.sh"


def render(wf: Any, policy: Policy, tokens: Tokens) -> bytes:
    site = wf.site
    roce = (
        list(RoceAssignment.objects.filter(site=site, hostname=wf.hostname).order_by("interface"))
        if policy.roce_phase2_enabled
        else []
    )
    ca = site.ca_bundle_pem.strip()
    text = render_to_string(
        "firstboot/user-data.yaml",
        {
            "onboarding_id": wf.pk,
            "attempt": wf.attempt,
            "hostname": wf.hostname,
            "node_api_url": node_api_url(site),
            "enroll_url": f"{node_api_url(site)}/api/v1/node/enroll",
            "agent_script_url": agent_script_url(site),
            "agent_version": settings.NODE_AGENT_VERSION,
            "enrollment_token": tokens.enrollment,
            "bootstrap_token": tokens.bootstrap,
            "bundle_ref": policy.bootstrap_bundle_ref,
            "bundle_version": policy.bootstrap_bundle_version,
            "bundle_sha256": policy.bootstrap_bundle_digest.removeprefix("sha256:"),
            "ca_pem": ca,
            "ca_pem_indented": "\n".join("      " + line for line in ca.splitlines()),
            "roce": roce,
        },
    )
    return text.encode()

"""The first-boot payload: tokens for one attempt, and the cloud-config built from the
workflow's rows by ``onboarding/cloudconfig.py`` (as data, never a text template).

Tokens: a bootstrap token and an enrollment token are minted together for an attempt. Their
values go to the secrets backend (the rendered payload needs them); the onboarding row keeps
only SHA-256 hashes and the attempt they belong to, so the enrollment endpoint can tell the
current attempt's token from a stale one.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings

from maas_domain import urlsafety
from maas_domain.models import RoceAssignment
from maas_domain.nodetrust import node_trust
from maas_domain.policy import Policy
from maas_domain.regions import secrets_prefix
from maas_domain.secrets import SecretNotFound, get_backend
from maas_domain.urlsafety import UrlRules
from onboarding import cloudconfig
from onboarding.models import Onboarding


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def tokens_path(region: str, onboarding_id: int, attempt: int) -> str:
    """Under the site's region's prefix: that region's workers mint and read them, no other's
    (``maas_domain.regions.secrets_prefix``)."""
    return f"{secrets_prefix(region)}/onboardings/{onboarding_id}/attempt-{attempt}"


def legacy_tokens_path(onboarding_id: int, attempt: int) -> str:
    """Where tokens minted before regions had prefixes are (the central identity reads them)."""
    return f"onboardings/{onboarding_id}/attempt-{attempt}"


@dataclass(frozen=True)
class Tokens:
    bootstrap: str
    enrollment: str

    def __repr__(self) -> str:
        return "Tokens(bootstrap=…, enrollment=…)"


def mint_tokens(
    onboarding_id: int, attempt: int, *, region: str | None = None
) -> tuple[Tokens, dict[str, Any]]:
    """New tokens for ``attempt``; returns them and the row fields that record their hashes.
    ``region``: the onboarding's site's (read from the row when not given)."""
    if region is None:
        region = Onboarding.objects.values_list("site__region", flat=True).get(pk=onboarding_id)
    tokens = Tokens(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
    get_backend().write(
        tokens_path(region, onboarding_id, attempt),
        {"bootstrap_token": tokens.bootstrap, "enrollment_token": tokens.enrollment},
    )
    return tokens, {
        "token_attempt": attempt,
        "bootstrap_token_hash": token_hash(tokens.bootstrap),
        "enrollment_token_hash": token_hash(tokens.enrollment),
    }


def read_tokens(wf: Onboarding) -> Tokens | None:
    """The current attempt's tokens, if they exist and match the stored hashes (None also when
    the backend lost them or holds others: the row and the backend disagree)."""
    if wf.token_attempt != wf.attempt:
        return None
    try:
        data = get_backend().read(tokens_path(wf.site.region, wf.pk, wf.attempt))
    except SecretNotFound:
        return None  # lost from the secrets backend: the caller mints both again
    tokens = Tokens(data["bootstrap_token"], data["enrollment_token"])
    if (token_hash(tokens.bootstrap), token_hash(tokens.enrollment)) != (
        wf.bootstrap_token_hash,
        wf.enrollment_token_hash,
    ):
        return None
    return tokens


def node_api_url(site: Any) -> str:
    return node_trust(site).node_api_url


def agent_script_url(site: Any) -> str:
    return f"{node_api_url(site)}/api/v1/node/agent/{settings.NODE_AGENT_VERSION}/bootstrap.sh"


# The deployment's own node URL (MAASCP_NODE_API_URL) is configuration, checked at start-up.
_DEPLOYMENT_NODE_URL = UrlRules(schemes=("https", "http"), allow_link_local=True)


def node_url_rules(site: Any) -> UrlRules:
    """A site's own node API URL follows the site's rules; the deployment default is trusted."""
    return urlsafety.site_rules(site) if site.node_api_url else _DEPLOYMENT_NODE_URL


def first_boot(wf: Onboarding, policy: Policy, tokens: Tokens) -> cloudconfig.FirstBoot:
    site = wf.site
    roce = (
        RoceAssignment.objects.filter(site=site, hostname=wf.hostname)
        .order_by("interface")
        .values_list("interface", "ipv4_cidr")
        if policy.roce_phase2_enabled
        else []
    )
    bundle = (
        cloudconfig.Bundle(
            url=policy.bootstrap_bundle_ref,
            version=policy.bootstrap_bundle_version,
            sha256=policy.bootstrap_bundle_digest.removeprefix("sha256:"),
        )
        if policy.bootstrap_bundle_ref
        else None
    )
    return cloudconfig.FirstBoot(
        onboarding_id=int(wf.pk),
        attempt=int(wf.attempt),
        hostname=wf.hostname,
        node_api_url=node_api_url(site),
        agent_version=settings.NODE_AGENT_VERSION,
        enrollment_token=tokens.enrollment,
        bootstrap_token=tokens.bootstrap,
        bundle=bundle,
        ca_pem=node_trust(site).ca_bundle_pem,  # the site's own, else the deployment's
        roce=tuple((str(i), str(c)) for i, c in roce),
    )


def problems(wf: Onboarding, policy: Policy) -> list[str]:
    """Why this workflow's payload would be refused (checked by preflight, before MAAS)."""
    placeholder = Tokens("x" * 43, "x" * 43)
    return cloudconfig.problems(
        first_boot(wf, policy, placeholder),
        node_rules=node_url_rules(wf.site),
        bundle_rules=urlsafety.site_rules(wf.site),
    )


def render(
    wf: Onboarding, policy: Policy, tokens: Tokens, *, memo: dict[str, Any] | None = None
) -> bytes:
    """The attempt's user data (docs/security.md); raises ``PayloadRefused`` for a bad value.

    ``memo``: an execution's ``StageContext.memo``. The render is a pure function of the
    first-boot values and the URL rules, so the same ones asked again in that execution (the
    payload stage proves the payload renders, the chained deploy stage then sends it) are the
    bytes rendered the first time; other values render afresh. Kept only in that execution."""
    fb = first_boot(wf, policy, tokens)
    node_rules, bundle_rules = node_url_rules(wf.site), urlsafety.site_rules(wf.site)
    key = (fb, node_rules, bundle_rules)
    if memo is not None:
        done = memo.get("payload.render")
        if done is not None and done[0] == key:
            return cast(bytes, done[1])
    text = cloudconfig.render(fb, node_rules=node_rules, bundle_rules=bundle_rules)
    if memo is not None:
        memo["payload.render"] = (key, text)
    return text


def tokens_to_region(site: Any, old_region: str) -> None:
    """A site moved region (``maas_domain.regions.SITE_MOVED``): the tokens its nodes hold move
    with it, so that a running agent can still be handed a newer attempt's tokens (the check-in
    compares what it holds with what is stored). One per node: its latest onboarding's."""
    latest: dict[Any, tuple[int, int | None]] = {}
    rows = Onboarding.objects.filter(site=site, node_token_attempt__isnull=False).order_by("id")
    for pk, node, held in rows.values_list("pk", "node_id", "node_token_attempt"):
        latest[node or f"row-{pk}"] = (pk, held)
    backend = get_backend()
    for pk, held in latest.values():
        if held is None:
            continue
        try:
            data = backend.read(tokens_path(old_region, pk, held))
        except SecretNotFound:
            continue  # lost, or never there: the node's next attempt mints anew
        backend.write(tokens_path(site.region, pk, held), data)

"""Stage 5, the first-boot payload: tokens minted per attempt, the cloud-config built as data."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from maas_domain import urlsafety
from onboarding import payload
from onboarding.cloudconfig import PayloadRefused
from onboarding.stages.common import Ctx, S, deploys
from workflows.kinds import stage
from workflows.results import Done, Fail, Result

# -- 5. first-boot payload ------------------------------------------------------------------------


def tokens_gone(ctx: Ctx) -> None:
    """Minting for an attempt whose tokens the row already records: the secrets backend lost
    or replaced them. Both are minted again together, so row and backend agree (no manual
    repair of either)."""
    if ctx.wf.token_attempt == ctx.wf.attempt:
        ctx.event(
            "payload.tokens_repaired",
            f"the secrets backend no longer holds attempt {ctx.wf.attempt}'s tokens as the row "
            "records them: minted both again",
        )


@stage("payload", timeout=300, expects=(S.READY, S.ALLOCATED, S.DEPLOYED), applies=deploys)
def payload_stage(ctx: Ctx) -> Result:
    wf, policy = ctx.wf, ctx.policy
    updates: dict[str, Any] = {}
    tokens = payload.read_tokens(wf) if wf.token_attempt == wf.attempt else None
    if tokens is None:
        tokens_gone(ctx)
        tokens, updates = payload.mint_tokens(wf.pk, wf.attempt, region=wf.site.region)
        for key, value in updates.items():
            setattr(wf, key, value)
    try:
        # proves the payload renders for this attempt (the chained deploy stage sends it)
        payload.render(wf, policy, tokens, memo=ctx.memo)
    except PayloadRefused as exc:
        return Fail("payload", f"first-boot payload refused: {exc}")
    updates |= {
        "site_bundle_version": policy.bootstrap_bundle_version,
        "agent_bootstrap_version": settings.NODE_AGENT_VERSION,
    }
    ctx.event(
        "payload.rendered",
        f"site bundle {policy.bootstrap_bundle_version or '(none)'} then node-agent bootstrap "
        f"{settings.NODE_AGENT_VERSION}, attempt {wf.attempt}",
        site_bundle_ref=urlsafety.display(policy.bootstrap_bundle_ref),
        site_bundle_version=policy.bootstrap_bundle_version,
        site_bundle_digest=policy.bootstrap_bundle_digest,
        agent_bootstrap_version=settings.NODE_AGENT_VERSION,
        attempt=wf.attempt,
    )
    return Done("first-boot payload rendered", updates)

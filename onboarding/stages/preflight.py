"""Stage 1, preflight: the node-facing URLs answer, the RoCE plan and site trust are in place."""

from __future__ import annotations

from maas_domain import urlsafety
from maas_domain.models import RoceAssignment
from maas_domain.nodetrust import node_trust, trust_problems
from maas_domain.services.guardrails import target_problems
from onboarding import payload
from onboarding.fetchcheck import TRANSIENT, fetch_problem
from onboarding.stages.common import Ctx
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Retry

# -- 1. preflight ---------------------------------------------------------------------------------


@stage(timeout=300)  # reads the node-facing URLs, not MAAS
def preflight(ctx: Ctx) -> Result:
    wf, policy = ctx.wf, ctx.policy
    site = wf.site
    problems = target_problems(site, wf.profile, wf.sku)
    if policy.bootstrap_bundle_ref.startswith("oci://"):
        problems.append(
            "site bootstrap bundle is an oci:// reference: the first-boot payload fetches with "
            "curl, so only https:// bundles are accepted"
        )
    if policy.bootstrap_bundle_ref and not (
        policy.bootstrap_bundle_version and policy.bootstrap_bundle_digest
    ):
        problems.append("site bootstrap bundle reference lacks a version or digest")
    # the site services refuse a site without trust and the probe reports one that lost it;
    # checked again here because the deployment's CA may have changed since
    problems += [f"{field}: {r}" for field, rs in trust_problems(site).items() for r in rs]
    if (
        policy.roce_phase2_enabled
        and not RoceAssignment.objects.filter(site=site, hostname=wf.hostname).exists()
    ):
        problems.append(f"profile enables phase-2 RoCE but {wf.hostname} has no RoCE assignment")
    problems += [f"first-boot payload refused: {p}" for p in payload.problems(wf, policy)]
    transient = []
    node_ca = node_trust(site).ca_bundle_pem
    for label, url in fetch_targets(ctx):
        # the control plane's own node routes as a node reaches them (trusting its CA bundle
        # only); the site's bundle as its curl fetches it (the system's CAs)
        reason = fetch_problem(url, ca_pem="" if label == BUNDLE else node_ca)
        if reason:
            problems.append(f"{label} {urlsafety.display(url)} is not fetchable: {reason}")
            transient.append(reason in TRANSIENT)
    if problems and len(transient) == len(problems) and all(transient):
        # only URLs that did not answer in time (a loaded or restarting control plane, a
        # bundle host's hiccup): checked again with backoff, failed once the tries run out
        after = min(60.0, 5.0 * 2**wf.stage_tries)
        return Retry("fetch_unavailable", "; ".join(problems), after=after)
    if problems:
        return Fail("preflight", "; ".join(problems), {"problems": problems})
    return Done("preflight checks passed")


BUNDLE = "site bootstrap bundle"


def fetch_targets(ctx: Ctx) -> list[tuple[str, str]]:
    targets = [
        ("bootstrap endpoint", f"{payload.node_api_url(ctx.wf.site)}/api/v1/node/health"),
        ("node-agent bootstrap script", payload.agent_script_url(ctx.wf.site)),
    ]
    ref = ctx.policy.bootstrap_bundle_ref
    if ref.startswith(("http://", "https://")):
        targets.append((BUNDLE, ref))
    return targets

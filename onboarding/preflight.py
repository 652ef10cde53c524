"""The preflight report (``POST /onboardings?dry_run=true``, docs/onboarding.md): every
guardrail's state, what MAAS shows for the host (reads only) and the stages and MAAS calls the
workflow would make under the effective policy. Writes nothing.
"""

from __future__ import annotations

from typing import Any

from maas_client.errors import MaasError
from maas_domain.models import MaasSite, Node, NodeState, SiteProfile, Sku
from maas_domain.models.sites import ProfileStatus
from maas_domain.nodetrust import trust_problems, trust_summary
from maas_domain.secrets import SecretsError
from maas_domain.services.guardrails import guard_problems, site_problems
from maas_domain.site_client import client_for_site
from maas_domain.work import open_on_node, open_workflows
from onboarding.models import Onboarding
from onboarding.services import resolve_target
from onboarding.workflow import KIND


def onboarding_preflight(
    *,
    site_id: int,
    profile_id: int,
    sku_id: int,
    hostname: str,
    ipmi_ip: str,
    confirm_host: str | None = None,
) -> dict[str, Any]:
    """What starting this onboarding would meet, before anything starts (docs/onboarding.md,
    "The preflight report"): every guardrail's state, what MAAS shows for the host (read only)
    and the stages and MAAS calls the workflow would make under the effective policy. Writes
    nothing."""
    target = resolve_target(site_id, profile_id, sku_id)
    site, profile, sku = target.site, target.profile, target.sku
    checks = [*_target_checks(site, profile, sku), *_host_checks(site, hostname, confirm_host)]
    draft = Onboarding(site=site, profile=profile, sku=sku, hostname=hostname, ipmi_ip=ipmi_ip)
    policy = profile.effective_policy()
    stages = KIND.plan(draft, policy)
    return {
        "dry_run": True,
        "allowed": all(c["ok"] for c in checks),
        "guardrails": checks,
        "maas": _maas_preview(site, hostname, ipmi_ip),
        "stages": stages,
        "maas_calls": [f"{s['name']}: {call}" for s in stages for call in s["maas_calls"]],
        "policy": policy.as_dict(),
    }


def _check(name: str, problems: list[str], ok_detail: str) -> dict[str, Any]:
    return {"name": name, "ok": not problems, "detail": "; ".join(problems) or ok_detail}


def _target_checks(site: MaasSite, profile: SiteProfile, sku: Sku) -> list[dict[str, Any]]:
    """The guardrails of where the host would go: the site, its probe, the profile, the SKU."""
    probe = site_problems(site)
    probed = site.last_probe_at.isoformat() if site.last_probe_at else "never"
    return [
        _check(
            "site_enabled",
            [p for p in probe if "disabled" in p],
            f"site {site.name} is enabled",
        ),
        _check(
            "probe_healthy_and_fresh",
            [p for p in probe if "disabled" not in p],
            f"probe {site.health}, last at {probed}",
        ),
        _check(
            "profile_active",
            []
            if profile.status == ProfileStatus.ACTIVE
            else [f"profile {profile.name} is disabled"],
            f"profile {profile.name} is active",
        ),
        _check(
            "sku_active",
            [] if sku.active else [f"SKU {sku.code} is not active"],
            f"SKU {sku.code} is active",
        ),
    ]


def _host_checks(site: MaasSite, hostname: str, confirm_host: str | None) -> list[dict[str, Any]]:
    """The guardrails of the host itself: nothing open on it, its node row (if any) may be
    onboarded, the site's node trust, and the guarded site's approval and confirmation."""
    node = (
        Node.objects.filter(site=site, hostname=hostname).exclude(state=NodeState.RETIRED).first()
    )
    open_here = open_workflows(site=site, hostname=hostname)
    if node is not None:
        open_here += [w for w in open_on_node(node.pk) if w not in open_here]
    return [
        _check(
            "no_open_workflow",
            [f"open {w['kind']} {w['id']} ({w['state']})" for w in open_here],
            f"nothing is open on {hostname}",
        ),
        _check(
            "node_onboardable",
            []
            if node is None or node.state in (NodeState.REGISTERED, NodeState.PROVISIONING)
            else [f"node {hostname} is {node.state} (use a reimage decommission)"],
            "no node row yet" if node is None else f"node {hostname} is {node.state}",
        ),
        _check(
            "node_trust",
            [f"{field}: {r}" for field, rs in trust_problems(site).items() for r in rs],
            trust_summary(site),
        ),
        _check(
            "host_approved_and_confirmed",
            guard_problems(site, [hostname], confirm_host),
            "confirmed and approved" if site.guarded else "site is not guarded",
        ),
    ]


def _maas_preview(site: MaasSite, hostname: str, ipmi_ip: str) -> dict[str, Any]:
    """The machines discovery would look at first (by hostname, by BMC address): reads only."""

    def short(machines: list[Any]) -> list[dict[str, str]]:
        return [
            {"system_id": m.system_id, "hostname": m.hostname, "status": m.status_name}
            for m in machines
        ]

    try:
        client = client_for_site(site)
        try:
            by_host = client.list_machines(hostnames=[hostname])
            ids = sorted(s for s, a in client.power_addresses().items() if a == ipmi_ip)
            by_bmc = client.list_machines(system_ids=ids) if ids else []
        finally:
            client.close()
    except (MaasError, SecretsError) as exc:
        return {"error": f"MAAS could not be read: {exc}"}
    return {"by_hostname": short(by_host), "by_ipmi_address": short(by_bmc)}

"""Starting an onboarding (a batch is ``batches.py``, what a node does is ``node.py``, the dry
run's preflight report ``preflight.py``).

Each is atomic and audited; work is handed to Celery only after commit (admission decides what
runs now and what stays queued behind the site's ``max_concurrent_workflows``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from maas_domain import audit, events
from maas_domain.errors import Conflict, GuardrailFailed, InvalidInput
from maas_domain.models import MaasSite, Node, NodeState, SiteProfile, Sku
from maas_domain.services.guardrails import guard_problems, target_problems
from maas_domain.work import WorkflowState, open_on_node
from onboarding.models import Onboarding
from onboarding.workflow import KIND
from workflows.scheduling import Start, start_workflow


@dataclass(frozen=True)
class Target:
    site: MaasSite
    profile: SiteProfile
    sku: Sku


def resolve_target(site_id: int, profile_id: int, sku_id: int) -> Target:
    errors: dict[str, list[str]] = {}
    site = MaasSite.objects.filter(pk=site_id).first()
    if site is None:
        errors["site_id"] = [f"Site {site_id} does not exist."]
    profile = SiteProfile.objects.filter(pk=profile_id).select_related("site").first()
    if profile is None or (site is not None and profile.site_id != site.pk):
        errors["profile_id"] = [f"Profile {profile_id} does not exist on this site."]
    sku = Sku.objects.filter(pk=sku_id).first()
    if sku is None:
        errors["sku_id"] = [f"SKU {sku_id} does not exist."]
    if errors:
        raise InvalidInput("Invalid onboarding target.", fields=errors)
    assert site is not None and profile is not None and sku is not None
    return Target(site, profile, sku)


def check_guardrails(target: Target, *, hostnames: list[str], confirm_host: str | None) -> None:
    """The target checks, plus: a guarded site needs a confirmation naming an approved host."""
    site = target.site
    problems = target_problems(site, target.profile, target.sku)
    problems += guard_problems(site, hostnames, confirm_host)
    if problems:
        raise GuardrailFailed("; ".join(problems), problems=problems)


def open_conflict(site: MaasSite, hostname: str) -> Conflict:
    other = Onboarding.objects.filter(
        Onboarding.open_filter(), site=site, hostname=hostname
    ).first()
    return Conflict(
        f"{hostname} already has an open onboarding"
        + (f" ({other.pk}, {other.state})" if other else ""),
        open_onboarding={"id": other.pk, "state": other.state, "stage": other.stage}
        if other
        else None,
    )


def take_node(
    site: MaasSite,
    sku: Sku,
    hostname: str,
    ipmi_ip: str,
    existing: Node | None,
    *,
    checked: bool = False,
) -> Node:
    """The node row an onboarding provisions (``checked``: the caller already made sure no
    other kind of workflow holds it)."""
    if existing is None:
        existing = Node(site=site, sku=sku, hostname=hostname, ipmi_ip=ipmi_ip)
    elif not checked and (busy := open_on_node(existing.pk, exclude=_onboardings_of(existing))):
        raise Conflict(
            f"node {hostname} has an open {busy[0]['kind']} ({busy[0]['id']}, {busy[0]['state']})",
            open_workflows=busy,
        )
    elif existing.state not in (NodeState.REGISTERED, NodeState.PROVISIONING):
        raise Conflict(
            f"node {hostname} is {existing.state}; onboarding needs a new or provisioning node "
            "(use a reimage decommission for an active node)",
            node={"id": existing.pk, "state": existing.state},
        )
    existing.sku, existing.ipmi_ip = sku, ipmi_ip
    existing.start_provisioning()
    return existing


def bmc_holders(site: MaasSite, addresses: dict[str, str]) -> dict[str, str]:
    """hostname → the other live node that already has the IPMI address this hostname asks
    for (the database allows one live node per BMC on a site)."""
    held = dict(
        Node.objects.filter(site=site, ipmi_ip__in=set(addresses.values()))
        .exclude(state=NodeState.RETIRED)
        .values_list("ipmi_ip", "hostname")
    )
    return {host: held[ip] for host, ip in addresses.items() if ip in held and held[ip] != host}


def _onboardings_of(node: Node) -> set[tuple[str, int]]:
    """Open onboardings of the node: the unique constraint reports those (with their id)."""
    return {
        ("onboarding", pk)
        for pk in Onboarding.objects.filter(Onboarding.open_filter(), node=node).values_list(
            "id", flat=True
        )
    }


def onboarding_start(
    *,
    actor: audit.Actor,
    site_id: int,
    profile_id: int,
    sku_id: int,
    hostname: str,
    ipmi_ip: str,
    confirm_host: str | None = None,
) -> Onboarding:
    target = resolve_target(site_id, profile_id, sku_id)
    check_guardrails(target, hostnames=[hostname], confirm_host=confirm_host)
    with transaction.atomic():
        # Starts on one site queue here briefly, so the node check below cannot race.
        MaasSite.objects.select_for_update().filter(pk=target.site.pk).first()
        live = (
            Node.objects.select_for_update()
            .filter(site=target.site, hostname=hostname)
            .exclude(state=NodeState.RETIRED)
        )
        holders = bmc_holders(target.site, {hostname: ipmi_ip})
        if hostname in holders:
            raise Conflict(
                f"{ipmi_ip} is the BMC of live node {holders[hostname]}; one BMC per live node",
                ipmi_ip=ipmi_ip,
            )
        node = take_node(target.site, target.sku, hostname, ipmi_ip, live.first())
        node.save()
        try:
            wf = start_workflow(
                KIND,
                Onboarding(
                    site=target.site,
                    profile=target.profile,
                    sku=target.sku,
                    node=node,
                    hostname=hostname,
                    ipmi_ip=ipmi_ip,
                    confirmed_host=confirm_host or "",
                ),
                Start(
                    actor=actor,
                    message=f"onboarding requested by {audit.actor_name(actor)}",
                    audit_action="onboarding.start",
                ),
            )
        except IntegrityError as exc:
            raise open_conflict(target.site, hostname) from exc
    return wf


# -- the preflight report (POST /onboardings?dry_run=true) ----------------------------------------


# -- a reimage supersedes a run that only waits for the node's agent ---------------------------

SUPERSEDABLE = (WorkflowState.PENDING, WorkflowState.RUNNING, WorkflowState.WAITING)


def waiting_for_agent(node_id: int) -> list[Onboarding]:
    """Open onboardings of the node (locked) that only wait for its agent: at ``enrollment`` in a
    run that redeployed nothing (a rerun or retry of a deployed machine), not run for another
    workflow, not frozen by an operator. Nothing of theirs is in flight in MAAS (that stage sends
    MAAS nothing), so a decommission of the node supersedes them instead of being refused
    (docs/onboarding.md, "Reruns and adopt")."""
    return list(
        Onboarding.objects.select_for_update()
        .filter(node_id=node_id, stage="enrollment", state__in=SUPERSEDABLE, parent_kind="")
        .exclude(deployed_attempt=F("attempt"))
        .order_by("id")
    )


def supersede(wf: Onboarding, *, actor: audit.Actor, by: str) -> None:
    """End ``wf`` (locked by ``waiting_for_agent``) as ``failed`` with class ``superseded``, in
    the caller's transaction: audited, on its timeline, its outcome event sent. A live execution
    finds it no longer owns the row. Not the node's failure: nothing is quarantined and no
    batch budget is spent."""
    before = {"state": wf.state, "stage": wf.stage, "attempt": wf.attempt}
    reason = (
        f"superseded by {by}: it waited at enrollment for the node's agent and had sent MAAS "
        "nothing in this run"
    )
    wf.fail()
    wf.failure_class, wf.reason = "superseded", reason[:500]
    wf.finished_at, wf.next_check_at = timezone.now(), None
    wf.lease_owner, wf.lease_expires_at = "", None
    wf.dispatch = F("dispatch") + 1
    wf.save()
    wf.refresh_from_db()
    name = audit.actor_name(actor)
    KIND.add_event(wf, "workflow.superseded", reason, actor=name)
    events.emit(KIND.name, "failed", wf, failure_class=wf.failure_class, reason=wf.reason)
    audit.record(
        actor=actor,
        action="onboarding.superseded",
        target=wf,
        before=before,
        after={"state": wf.state, "failure_class": wf.failure_class},
        reason=reason,
    )

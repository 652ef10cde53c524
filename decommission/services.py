"""Starting a decommission: one atomic, audited operation (the stages do the rest).

Checks, all before anything changes: the node exists and is in a state a decommission may take
(active, quarantined, or draining after an earlier decommission), no other workflow is open on
it (one open workflow per node across kinds, under the node's row lock; an onboarding that only
waits at enrollment for the node's agent in a run that redeployed nothing is superseded, never a
reason to refuse), the site's guardrails,
the policy allows the mode, and the node's allocations are drained — or, with
``force_release``, force-released here (each audited, and in the timeline).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from maas_domain import audit
from maas_domain.errors import Conflict, GuardrailFailed, InvalidInput, NotFound
from maas_domain.models import Allocation, AllocationState, Node, SiteProfile
from maas_domain.models.inventory import DECOMMISSIONABLE
from maas_domain.services.guardrails import guard_problems, site_problems
from maas_domain.work import open_on_node
from onboarding.models import Onboarding
from onboarding.services import supersede, waiting_for_agent
from workflows.scheduling import Start, start_workflow

from .models import Decommission, Mode
from .workflow import KIND

STARTABLE = DECOMMISSIONABLE


def _profile(node: Node, profile_id: int | None) -> SiteProfile | None:
    """The profile named in the request, else the one the node was last onboarded with."""
    if profile_id is not None:
        profile = SiteProfile.objects.filter(pk=profile_id, site_id=node.site_id).first()
        if profile is None:
            raise InvalidInput(
                "Invalid profile.",
                fields={"profile_id": [f"Profile {profile_id} does not exist on this site."]},
            )
        return profile
    last = Onboarding.objects.filter(node=node).select_related("profile").order_by("-id").first()
    return last.profile if last else None


def decommission_start(
    *,
    actor: audit.Actor,
    node_id: int,
    mode: str,
    force_release: bool = False,
    profile_id: int | None = None,
    reason: str = "",
    confirm: bool = False,
    confirm_host: str | None = None,
) -> Decommission:
    _check_request(mode, confirm=confirm)
    with transaction.atomic():
        node = _startable_node(node_id)
        # a rerun that only waits for the node's agent never blocks a reimage: it is superseded
        waiting = waiting_for_agent(node.pk)
        if busy := open_on_node(node.pk, exclude={("onboarding", w.pk) for w in waiting}):
            raise Conflict(
                f"node {node.hostname} has an open {busy[0]['kind']} "
                f"({busy[0]['id']}, {busy[0]['state']})",
                open_workflows=busy,
            )
        profile = _profile_for_mode(node, mode, profile_id)
        _check_guardrails(node, mode, profile, confirm_host)
        held = _held_allocations(node, force_release=force_release)
        name = audit.actor_name(actor)
        try:
            wf = start_workflow(
                KIND,
                Decommission(
                    site=node.site,
                    node=node,
                    profile=profile,
                    mode=mode,
                    hostname=node.hostname,
                    maas_system_id=node.maas_system_id,
                    force_release=force_release,
                    prior_node_state=node.state,
                    requested_by=name,
                    request_reason=reason[:500],
                ),
                Start(
                    actor=actor,
                    message=f"{mode} requested by {name}" + (f": {reason}" if reason else ""),
                    audit_action=f"decommission.start.{mode}",
                    reason=reason,
                    event_data={"mode": mode},
                ),
            )
        except IntegrityError as exc:
            raise Conflict(f"node {node.hostname} already has an open decommission") from exc
        for allocation in held:
            _force_release(wf, allocation, actor=actor, reason=reason)
        for onboarding in waiting:
            supersede(onboarding, actor=actor, by=f"{mode} decommission {wf.pk} ({name})")
            KIND.add_event(
                wf,
                "onboarding.superseded",
                f"onboarding {onboarding.pk} waited at enrollment for the node's agent: superseded",
                actor=name,
                onboarding_id=onboarding.pk,
            )
    return wf


def _check_request(mode: str, *, confirm: bool) -> None:
    """The request on its own: a known mode, and a full decommission confirmed."""
    if mode not in Mode.values:
        raise InvalidInput("Invalid mode.", fields={"mode": [f"One of: {', '.join(Mode.values)}."]})
    if mode == Mode.FULL and not confirm:
        raise InvalidInput(
            "A full decommission removes the machine from MAAS and retires the node: "
            "it needs explicit confirmation.",
            fields={"confirm": ["Must be true."]},
        )


def _startable_node(node_id: int) -> Node:
    """The node, locked (with its site), in a state a decommission may take."""
    node = Node.objects.select_for_update().select_related("site").filter(pk=node_id).first()
    if node is None:
        raise NotFound(f"Node {node_id} does not exist.")
    if node.state not in STARTABLE:
        raise Conflict(
            f"node {node.hostname} is {node.state}; a decommission needs an active, "
            "quarantined or draining node",
            node={"id": node.pk, "state": node.state},
        )
    return node


def _profile_for_mode(node: Node, mode: str, profile_id: int | None) -> SiteProfile | None:
    """The profile (``_profile``); a reimage needs one, and an IPMI address to redeploy with."""
    profile = _profile(node, profile_id)
    if mode == Mode.REIMAGE and profile is None:
        raise InvalidInput(
            "Reimage needs a profile to deploy.",
            fields={"profile_id": ["Required: the node has no earlier onboarding."]},
        )
    if mode == Mode.REIMAGE and not node.ipmi_ip:
        raise Conflict(f"node {node.hostname} has no IPMI address to redeploy with")
    return profile


def _check_guardrails(
    node: Node, mode: str, profile: SiteProfile | None, confirm_host: str | None
) -> None:
    """The site's guardrails, and a storage cleanup only where the policy erases."""
    site = node.site
    policy = profile.effective_policy() if profile else site.effective_policy()
    problems = site_problems(site) + guard_problems(site, [node.hostname], confirm_host)
    if mode == Mode.STORAGE_CLEANUP and policy.erase_mode == "none":
        problems.append("policy erase_mode is none: storage cleanup needs quick or secure")
    if problems:
        raise GuardrailFailed("; ".join(problems), problems=problems)


def _held_allocations(node: Node, *, force_release: bool) -> list[Allocation]:
    """The node's active allocations, locked: refused unless ``force_release`` releases them."""
    held = list(
        Allocation.objects.select_for_update()
        .filter(node=node, state=AllocationState.ACTIVE)
        .order_by("id")
    )
    if held and not force_release:
        raise Conflict(
            f"node {node.hostname} has {len(held)} active allocation(s): drain them first, "
            "or ask for force_release: true",
            allocations=[
                {"id": a.pk, "holder": a.holder, "since": a.created_at.isoformat()} for a in held
            ],
        )
    return held


def _force_release(
    wf: Decommission, allocation: Allocation, *, actor: audit.Actor, reason: str
) -> None:
    name = audit.actor_name(actor)
    before = {"state": allocation.state, "holder": allocation.holder}
    allocation.force_release()
    allocation.released_at = timezone.now()
    allocation.released_by = name
    allocation.release_reason = (reason or f"force-released for decommission {wf.pk}")[:500]
    allocation.save()
    audit.record(
        actor=actor,
        action="allocation.force_release",
        target=allocation,
        before=before,
        after={"state": allocation.state, "decommission_id": wf.pk},
        reason=reason,
    )
    KIND.add_event(
        wf,
        "allocation.force_released",
        f"allocation {allocation.pk} of {allocation.holder} force-released by {name}",
        actor=name,
        allocation_id=allocation.pk,
        holder=allocation.holder,
    )

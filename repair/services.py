"""Starting a repair, and reporting it done: each one atomic, audited operation (the stages do
the rest; docs/repair.md).

A repair takes a node that is quarantined, or active but cordoned (its machine showed critical
drift, an operator cordoned it), with no open workflow and no tenant on it. Anything else is a
409 naming the state, before anything changes.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from maas_domain import audit
from maas_domain.errors import Conflict, GuardrailFailed, InvalidInput, NotFound
from maas_domain.models import (
    Allocation,
    AllocationState,
    Node,
    NodeState,
    QuarantineEvidence,
    SiteProfile,
)
from maas_domain.services import cordons
from maas_domain.services.guardrails import site_problems
from maas_domain.work import WorkflowState, open_on_node
from onboarding.models import Onboarding
from workflows.scheduling import Start, start_workflow, wake

from .models import Repair
from .workflow import KIND


def _profile(node: Node, profile_id: int | None) -> SiteProfile:
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
    if last is None:
        raise InvalidInput(
            "A repair needs a profile to requalify with.",
            fields={"profile_id": ["Required: the node has no earlier onboarding."]},
        )
    return last.profile


def _fault(node: Node, held: list[dict[str, object]]) -> str:
    """What took the node out of service: its latest evidence's kind, else its cordons'."""
    if node.state == NodeState.QUARANTINED:
        latest = QuarantineEvidence.objects.filter(node=node).order_by("-id").first()
        if latest is not None:
            return latest.kind
    first = held[0] if held else None
    if first is not None and first["reason"] == "drift":
        return f"drift:{str(first['detail']).split(':', 1)[0]}"
    return str(first["reason"]) if first is not None else "quarantine"


def repair_start(
    *,
    actor: audit.Actor,
    node_id: int,
    ticket: str = "",
    reason: str = "",
    profile_id: int | None = None,
) -> Repair:
    with transaction.atomic():
        node = (
            Node.objects.select_for_update()
            .select_related("site", "sku")
            .filter(pk=node_id)
            .first()
        )
        if node is None:
            raise NotFound(f"Node {node_id} does not exist.")
        held = cordons.reasons(node)
        if node.state != NodeState.QUARANTINED and not (node.state == NodeState.ACTIVE and held):
            raise Conflict(
                f"node {node.hostname} is {node.state}"
                + (" and not cordoned" if node.state == NodeState.ACTIVE else "")
                + "; a repair takes a quarantined node, or an active one that is cordoned",
                current_state=node.state,
            )
        if busy := open_on_node(node.pk):
            raise Conflict(
                f"node {node.hostname} has an open {busy[0]['kind']} "
                f"({busy[0]['id']}, {busy[0]['state']})",
                open_workflows=busy,
            )
        tenants = list(
            Allocation.objects.filter(node=node, state=AllocationState.ACTIVE).order_by("id")
        )
        if tenants:
            raise Conflict(
                f"node {node.hostname} has {len(tenants)} active allocation(s): drain them "
                "first (the node is cordoned: it takes no new one meanwhile)",
                allocations=[{"id": a.pk, "holder": a.holder} for a in tenants],
            )
        profile = _profile(node, profile_id)
        if problems := site_problems(node.site):
            raise GuardrailFailed("; ".join(problems), problems=problems)
        name = audit.actor_name(actor)
        try:
            return start_workflow(
                KIND,
                Repair(
                    site=node.site,
                    node=node,
                    profile=profile,
                    hostname=node.hostname,
                    maas_system_id=node.maas_system_id,
                    ticket=ticket[:200],
                    fault_class=_fault(node, held)[:64],
                    prior_node_state=node.state,
                    requested_by=name,
                    request_reason=reason[:500],
                ),
                Start(
                    actor=actor,
                    message=f"repair requested by {name}" + (f": {reason}" if reason else ""),
                    audit_action="repair.start",
                    reason=reason,
                    event_data={"ticket": ticket[:200]} if ticket else {},
                ),
            )
        except IntegrityError as exc:
            raise Conflict(f"node {node.hostname} already has an open repair") from exc


def repair_requalify(*, actor: audit.Actor, repair_id: int, note: str = "") -> Repair:
    """The repair is reported done: the workflow marks the machine fixed and requalifies it."""
    with transaction.atomic():
        wf = Repair.objects.select_for_update().filter(pk=repair_id).first()
        if wf is None:
            raise NotFound(f"Repair {repair_id} does not exist.")
        if wf.stage != "in_repair" or wf.state not in (
            WorkflowState.WAITING,
            WorkflowState.RUNNING,
        ):
            raise Conflict(
                f"repair {wf.pk} is {wf.state} at {wf.stage}; it can be requalified only while "
                "it waits in_repair",
                current_state=wf.state,
                stage=wf.stage,
            )
        if wf.repaired_at is not None:
            raise Conflict(f"repair {wf.pk} was already reported done", current_state=wf.state)
        name = audit.actor_name(actor)
        wf.repaired_at, wf.repaired_by, wf.repair_note = timezone.now(), name, note[:500]
        wf.save(update_fields=["repaired_at", "repaired_by", "repair_note", "updated_at"])
        KIND.add_event(
            wf,
            "operator.requalify",
            f"repair reported done by {name}" + (f": {note}" if note else ""),
            actor=name,
        )
        audit.record(
            actor=actor,
            action="repair.requalify",
            target=wf,
            after={"repaired_at": wf.repaired_at.isoformat(), "stage": wf.stage},
            reason=note,
        )
        transaction.on_commit(lambda: wake(KIND, wf.pk, "repair reported done"))
    return wf

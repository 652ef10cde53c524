"""The decommission workflow kind: its stages (``stages.py``), policy, and the node's moves on
each outcome."""

from __future__ import annotations

from maas_domain.models import EvidenceKind, Node, NodeState
from maas_domain.models.inventory import DECOMMISSIONABLE
from maas_domain.policy import Policy
from maas_domain.services import evidence as evidence_services
from workflows.kinds import WorkflowKind

from .models import Decommission, DecommissionEvent, Mode
from .stages import CANCEL, RESET, STAGES, adopt_stage


def _policy(wf: Decommission) -> Policy:
    return wf.profile.effective_policy() if wf.profile else wf.site.effective_policy()


def _node(wf: Decommission) -> Node:
    return Node.objects.select_for_update().get(pk=wf.node_id)


def _on_success(wf: Decommission) -> None:
    """full: the node row retires (its history stays); storage cleanup: back to the pool state
    it had, now that its disks are erased; reimage: the child onboarding activated it."""
    node = _node(wf)
    if wf.mode == Mode.FULL and node.state != NodeState.RETIRED:
        node.retire()
    elif wf.mode == Mode.STORAGE_CLEANUP and node.state == NodeState.DRAINING:
        if wf.prior_node_state == NodeState.QUARANTINED:
            node.quarantine()
        else:
            node.return_to_pool()
    node.save()


def _quarantine(wf: Decommission) -> None:
    """Disks not (known to be) erased: the node is not returned to any pool, and what is known
    of each disk is frozen as its evidence (docs/hardware.md)."""
    node = _node(wf)
    if node.state in (NodeState.DRAINING, NodeState.ACTIVE, NodeState.PROVISIONING):
        node.quarantine()
        node.save()
        evidence = evidence_services.freeze(
            node=node,
            kind=EvidenceKind.NOT_ERASED,
            workflow_kind=KIND.name,
            workflow_id=wf.pk,
            maas_system_id=wf.maas_system_id,
            reason=wf.reason or "disks not known to be erased",
            report=wf.erase_evidence or {},
            timeline=evidence_services.timeline_of(wf),
        )
        KIND.add_event(
            wf,
            "node.quarantined",
            f"node {node.hostname} quarantined: {wf.reason}",
            evidence_id=evidence.pk,
        )


def _on_cancelled(wf: Decommission) -> None:
    """Before any release the node goes back to where it was; after one, to quarantine."""
    if wf.release_requested:
        _quarantine(wf)
        return
    node = _node(wf)
    if node.state == NodeState.DRAINING and wf.prior_node_state == NodeState.ACTIVE:
        node.return_to_pool()
        node.save()
    elif node.state == NodeState.DRAINING:
        node.quarantine()
        node.save()


KIND: WorkflowKind[Decommission] = WorkflowKind(
    name="decommission",
    model=Decommission,
    event_model=DecommissionEvent,
    stages=STAGES,
    policy=_policy,
    on_success=_on_success,
    on_hold=_quarantine,
    on_cancelled=_on_cancelled,
    reset=RESET,
    cancel=CANCEL,
    adopt=adopt_stage,
    select_related=("site", "profile__site", "node"),
    node_start=("decommission…", tuple(DECOMMISSIONABLE)),
)

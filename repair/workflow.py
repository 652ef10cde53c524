"""The repair workflow kind: its stages (``stages/``), policy, and the node's moves when it ends
(docs/repair.md). A repair that does not succeed leaves its node out of service: quarantined
and cordoned, its machine as MAAS shows it (Broken once handed over)."""

from __future__ import annotations

from maas_domain.models import CordonReason, Node, NodeState
from maas_domain.policy import Policy
from maas_domain.services import cordons
from workflows.kinds import WorkflowKind

from .models import Repair, RepairEvent
from .stages import CANCEL, RESET, STAGES, adopt_stage


def _policy(wf: Repair) -> Policy:
    return wf.profile.effective_policy()


def _back_to_quarantine(wf: Repair) -> None:
    """Failed, cancelled or frozen: the node is not returned to any pool."""
    node = Node.objects.select_for_update().get(pk=wf.node_id)
    if node.state == NodeState.IN_REPAIR:
        node.end_repair()
    elif node.state == NodeState.PROVISIONING:  # its requalifying onboarding did not finish
        node.quarantine()
    else:
        return  # never handed over (or quarantined by its child): nothing to take back
    node.save()
    why = wf.reason or f"repair {wf.pk} {wf.state}"
    cordons.cordon(node, CordonReason.QUARANTINE, why, source=f"repair:{wf.pk}")


KIND: WorkflowKind[Repair] = WorkflowKind(
    name="repair",
    model=Repair,
    event_model=RepairEvent,
    stages=STAGES,
    policy=_policy,
    on_failure=_back_to_quarantine,
    on_cancelled=_back_to_quarantine,
    on_hold=_back_to_quarantine,
    reset=RESET,
    cancel=CANCEL,
    adopt=adopt_stage,
    select_related=("site", "profile__site", "node__sku"),
    node_start=("repair…", (NodeState.QUARANTINED, NodeState.ACTIVE)),
)

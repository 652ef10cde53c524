"""What every decommission stage uses: the context type, MAAS's status names, the machine read,
the comment MAAS records, and the shared declarations."""

from __future__ import annotations

from maas_client.status import NodeStatus
from maas_client.types import Machine
from maas_domain.work import WorkflowState
from workflows.kinds import Call as C
from workflows.kinds import StageContext

from ..models import Decommission

S = NodeStatus
W = WorkflowState
Ctx = StageContext[Decommission]
POLL = 600.0
ERASING = (S.DISK_ERASING,)
GET = C("get_machine")
ABORT = C("abort", "if erasing or deploying")
# What MAAS may show while a decommission releases or retires a machine (reconciliation).
RELEASING = frozenset(
    {
        S.DEPLOYED,
        S.ALLOCATED,
        S.DEPLOYING,
        S.FAILED_DEPLOYMENT,
        S.RELEASING,
        S.FAILED_RELEASING,
        S.DISK_ERASING,
        S.FAILED_DISK_ERASING,
        S.READY,
        S.NEW,
        S.BROKEN,
    }
)


def machine_of(ctx: Ctx) -> Machine:
    return ctx.machine(ctx.wf.maas_system_id)  # the site poll's listing, or a GET


def comment(ctx: Ctx, what: str) -> str:
    return f"{what} (decommission {ctx.wf.pk}, {ctx.wf.mode})"

"""What every repair stage uses: the context type, MAAS's status names, the machine read, the
comment MAAS records."""

from __future__ import annotations

from maas_client.status import NodeStatus
from maas_client.types import Machine
from maas_domain.work import WorkflowState
from workflows.kinds import Call, StageContext

from ..models import Repair

S = NodeStatus
W = WorkflowState
Ctx = StageContext[Repair]
POLL = 600.0
GET = Call("get_machine")
# MAAS statuses in which a tenant may have written to the machine's disks: not handed to a
# vendor before they are erased (docs/repair.md, "What may be handed over").
TENANT_DATA = (S.ALLOCATED, S.DEPLOYING, S.DEPLOYED)


def machine_of(ctx: Ctx) -> Machine:
    return ctx.machine(ctx.wf.maas_system_id)  # the site poll's listing, or a GET


def comment(ctx: Ctx, what: str) -> str:
    """What MAAS records with the change (its event log, the machine's error description)."""
    wf = ctx.wf
    ticket = f"; ticket {wf.ticket}" if wf.ticket else ""
    return f"{what} (repair {wf.pk}{ticket})"[:200]

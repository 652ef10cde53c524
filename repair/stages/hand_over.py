"""Stage 3, hand over: the machine marked Broken in MAAS with the reason (out of MAAS's Ready
pool, so nothing allocates it meanwhile), then the node in_repair and cordoned for the repair.
MAAS marks a machine broken only for its owner (docs/maas-api.md §3.5): an unowned Ready machine
is allocated to us first."""

from __future__ import annotations

from django.utils import timezone

from maas_domain.models import CordonReason, Node, NodeState
from maas_domain.services import cordons
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

from .common import GET, POLL, Ctx, S, comment, machine_of

# What MAAS lets its owner mark broken from (a releasable one is released first by MAAS).
MARKABLE = (
    S.ALLOCATED, S.FAILED_COMMISSIONING, S.FAILED_TESTING, S.FAILED_DEPLOYMENT,
    S.FAILED_RELEASING, S.FAILED_DISK_ERASING,
)  # fmt: skip


@stage(
    timeout=1800,
    calls=(
        GET,
        C("allocate", "a Ready machine nobody owns: MAAS marks broken only for its owner"),
        C("mark_broken", "with the fault and the ticket"),
    ),
    expects=(S.READY, S.ALLOCATED, S.BROKEN, *MARKABLE),
)
def hand_over(ctx: Ctx) -> Result:
    machine = machine_of(ctx)
    ctx.observe(machine)
    sid, status = machine.system_id, machine.status
    if status == S.BROKEN:
        return _handed_over(ctx, machine.status_message or "")
    if ctx.sent("mark_broken"):
        return Wait("waiting for MAAS to mark the machine Broken", sid, int(status), 60)
    why = f"{ctx.wf.fault_class or 'repair'}: handed to repair"
    if status == S.READY and not ctx.sent("allocate"):
        machine = ctx.maas.allocate(sid, comment=comment(ctx, "allocated to mark it broken"))
        ctx.event(
            "maas.action", f"allocated the Ready machine to mark it broken: {machine.status_name}"
        )
        status = machine.status
    if status in MARKABLE:
        answer = ctx.maas.mark_broken(sid, comment=comment(ctx, why))
        ctx.event("maas.action", f"marked broken in MAAS: {answer.status_name}")
        if answer.status == S.BROKEN:
            return _handed_over(ctx, why)
        return Wait("waiting for MAAS to mark the machine Broken", sid, int(answer.status), POLL)
    return Fail(
        "unexpected_state",
        f"machine is {machine.status_name} in MAAS; it can be handed to repair from Ready, "
        "Broken or a failed state",
    )


def _handed_over(ctx: Ctx, why: str) -> Result:
    """The node leaves every pool for the repair, in one transaction with our lease held."""
    wf = ctx.wf
    with ctx.locked():
        node = Node.objects.select_for_update().get(pk=wf.node_id)
        if node.state in (NodeState.ACTIVE, NodeState.QUARANTINED):
            node.hand_to_repair()
            node.save(update_fields=["state", "updated_at"])
        detail = f"in repair {wf.pk}" + (f" ({wf.ticket})" if wf.ticket else "")
        cordons.cordon(node, CordonReason.REPAIR, detail, source=f"repair:{wf.pk}")
    at = wf.handed_over_at or timezone.now()
    return Done(f"handed to repair: Broken in MAAS ({why})", {"handed_over_at": at})

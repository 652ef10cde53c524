"""Stage 4b (full), retire: the machine deleted from MAAS, unless policy keeps it."""

from __future__ import annotations

from maas_client.errors import MaasNotFound
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Result

from ..models import Decommission, Mode
from .common import RELEASING, Ctx


def retiring(wf: Decommission) -> bool:
    return wf.mode == Mode.FULL


@stage(
    timeout=600,
    calls=(C("delete_machine", "unless policy keeps it"),),
    expects=RELEASING,
    machine_may_vanish=True,
    applies=retiring,
)
def retire(ctx: Ctx) -> Result:
    wf = ctx.wf
    if not ctx.policy.delete_machine_on_full_decommission:
        return Done("machine left Ready in MAAS (policy keeps it)")
    try:
        ctx.maas.delete_machine(wf.maas_system_id)
    except MaasNotFound:
        return Done("machine already gone from MAAS", {"machine_deleted": True})
    ctx.event("maas.action", f"deleted machine {wf.maas_system_id} from MAAS")
    return Done("machine deleted from MAAS", {"machine_deleted": True})

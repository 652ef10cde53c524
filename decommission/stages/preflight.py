"""Stage 1, preflight: guardrails, the machine found in MAAS, no active allocations."""

from __future__ import annotations

from maas_client.errors import MaasNotFound
from maas_client.types import Machine
from maas_domain.models import Allocation, AllocationState
from maas_domain.models.sites import ProfileStatus
from maas_domain.services.guardrails import site_problems
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result

from ..models import Mode
from .common import GET, Ctx, machine_of


@stage(
    timeout=300, calls=(GET, C("list_machines", "by hostname, when no MAAS system id is recorded"))
)
def preflight(ctx: Ctx) -> Result:
    wf, policy = ctx.wf, ctx.policy
    problems = site_problems(wf.site)
    if wf.mode == Mode.STORAGE_CLEANUP and policy.erase_mode == "none":
        problems.append("policy erase_mode is none: storage cleanup needs quick or secure")
    if wf.mode == Mode.REIMAGE and (
        wf.profile is None or wf.profile.status != ProfileStatus.ACTIVE
    ):
        problems.append("reimage needs an active profile to deploy")
    held = list(
        Allocation.objects.filter(node_id=wf.node_id, state=AllocationState.ACTIVE).values(
            "id", "holder"
        )
    )
    if held:
        problems.append(
            "node has active allocations: "
            + ", ".join(f"{a['id']} ({a['holder']})" for a in held)
            + "; drain them or start again with force_release"
        )
    machine = _find_machine(ctx)
    if machine is None:
        problems.append(f"no MAAS machine matches {wf.hostname} (system id {wf.maas_system_id!r})")
    if problems:
        return Fail("preflight", "; ".join(problems), {"problems": problems})
    assert machine is not None
    ctx.observe(machine)
    return Done(
        f"preflight checks passed; erase mode {policy.erase_mode}",
        {"maas_system_id": machine.system_id, "erase_mode": policy.erase_mode},
    )


def _find_machine(ctx: Ctx) -> Machine | None:
    wf = ctx.wf
    if wf.maas_system_id:
        try:
            return machine_of(ctx)
        except MaasNotFound:
            ctx.event("maas.observed", f"recorded machine {wf.maas_system_id} is gone from MAAS")
    found = ctx.maas.list_machines(hostnames=[wf.hostname])
    if len(found) > 1:
        ids = ", ".join(m.system_id for m in found)
        ctx.event("maas.observed", f"{len(found)} MAAS machines are named {wf.hostname}: {ids}")
        return None  # ambiguous: fail closed
    return found[0] if found else None

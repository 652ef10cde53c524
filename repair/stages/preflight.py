"""Stage 1, preflight: the site, the node's state, no tenant on it, the machine found in MAAS
with no tenant data on its disks."""

from __future__ import annotations

import contextlib

from maas_client.errors import MaasNotFound
from maas_domain.models import Allocation, AllocationState, NodeState
from maas_domain.services.guardrails import site_problems
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result

from .common import GET, TENANT_DATA, Ctx, machine_of


@stage(timeout=300, calls=(GET, C("list_machines", "by hostname, when no MAAS system id is known")))
def preflight(ctx: Ctx) -> Result:
    wf = ctx.wf
    problems = site_problems(wf.site)
    if wf.node.state not in (NodeState.QUARANTINED, NodeState.ACTIVE, NodeState.IN_REPAIR):
        problems.append(f"node is {wf.node.state}; a repair takes a quarantined or cordoned node")
    held = Allocation.objects.filter(node_id=wf.node_id, state=AllocationState.ACTIVE)
    if held.exists():
        problems.append("node has active allocations: drain them first")
    machine = None
    if wf.maas_system_id:
        with contextlib.suppress(MaasNotFound):
            machine = machine_of(ctx)
    if machine is None:
        found = ctx.maas.list_machines(hostnames=[wf.hostname])
        machine = found[0] if len(found) == 1 else None
    if machine is None:
        problems.append(f"no single MAAS machine matches {wf.hostname}")
    elif machine.status in TENANT_DATA:
        problems.append(
            f"MAAS shows {machine.status_name}: a tenant may have written to its disks; erase "
            "them first (a storage cleanup keeps the machine: POST /nodes/{id}/storage-cleanup), "
            "then hand the node to repair"
        )
    if problems:
        return Fail("preflight", "; ".join(problems), {"problems": problems})
    assert machine is not None
    ctx.observe(machine)
    return Done("preflight checks passed", {"maas_system_id": machine.system_id})

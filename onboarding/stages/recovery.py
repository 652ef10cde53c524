"""The operator-driven stages: restart-clean's reset and cancel's compensation, and what adopt
reads from MAAS.
"""

from __future__ import annotations

from typing import Any

from maas_client.errors import MaasNotFound
from maas_client.status import RELEASABLE
from maas_domain.errors import Conflict
from maas_domain.site_client import client_for_site
from onboarding.models import Onboarding
from onboarding.stages.common import GET, POLL, Ctx, S
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Result, Wait

# -- operator-driven stages: restart-clean's reset and cancel's compensation ----------------------

ABORTABLE = (S.COMMISSIONING, S.DEPLOYING, S.DISK_ERASING, S.TESTING)
IN_MOTION = (S.RELEASING, S.DISK_ERASING)


@stage(
    timeout=None,
    calls=(
        GET,
        C("abort", "if in progress"),
        C("release", "if allocated or deployed"),
        C("delete_machine", "if this workflow created it"),
    ),
    machine_may_vanish=True,
)
def reset(ctx: Ctx) -> Result:
    """Undo MAAS-side progress where safe: abort, release, delete a machine we created."""
    wf, maas = ctx.wf, ctx.maas
    if not wf.maas_system_id:
        return Done("nothing to undo in MAAS")
    try:
        machine = maas.get_machine(wf.maas_system_id)
    except MaasNotFound:
        return Done(
            "machine already gone from MAAS", {"maas_system_id": "", "created_machine": False}
        )
    ctx.observe(machine)
    if machine.status in ABORTABLE and not ctx.sent("abort"):
        maas.abort(machine.system_id, comment=f"restart-clean of onboarding {wf.pk}")
        return Wait("aborting before reset", machine.system_id, int(machine.status), POLL)
    if machine.status in IN_MOTION:
        return Wait("waiting for MAAS to settle", machine.system_id, int(machine.status), POLL)
    if machine.status in RELEASABLE:
        maas.release(machine.system_id, comment=f"restart-clean of onboarding {wf.pk}")
        return Wait("releasing before reset", machine.system_id, int(S.RELEASING), POLL)
    if wf.created_machine:
        maas.delete_machine(machine.system_id)
        ctx.event("maas.action", f"deleted machine {machine.system_id} this workflow created")
        return Done("MAAS progress undone", {"maas_system_id": "", "created_machine": False})
    return Done(f"machine left {machine.status_name} in MAAS (not created by this workflow)")


@stage(timeout=None, calls=(GET, C("abort", "if in progress"), C("release", "if allocated")))
def cancel(ctx: Ctx) -> Result:
    """Abort an in-flight MAAS action where MAAS allows it; release an allocation we hold."""
    wf, maas = ctx.wf, ctx.maas
    if not wf.maas_system_id:
        return Done("cancelled before MAAS was touched")
    machine = maas.get_machine(wf.maas_system_id)
    ctx.observe(machine)
    if machine.status in ABORTABLE and not ctx.sent("abort"):
        maas.abort(machine.system_id, comment=f"cancel of onboarding {wf.pk}")
        ctx.event("maas.action", f"aborted {machine.status_name}")
        return Wait("aborting", machine.system_id, int(machine.status), POLL)
    if machine.status in ABORTABLE:
        return Wait("aborting", machine.system_id, int(machine.status), POLL)
    if machine.status == S.ALLOCATED and not ctx.sent("release"):
        maas.release(machine.system_id, comment=f"cancel of onboarding {wf.pk}")
        ctx.event("maas.action", "released the allocation")
    return Done(f"cancelled; MAAS shows {machine.status_name}")


ADOPT = {
    S.NEW: "commission",
    S.COMMISSIONING: "commission",
    S.TESTING: "commission",
    S.FAILED_COMMISSIONING: "commission",
    S.READY: "conformance",  # judged (and tested) before anything is set on it
    S.ALLOCATED: "deploy",
    S.DEPLOYING: "deploy",
    S.FAILED_DEPLOYMENT: "deploy",  # released (no erase) and deployed again
    S.DEPLOYED: "enrollment",
}


def adopt_stage(wf: Onboarding) -> tuple[str, dict[str, Any]]:
    """Read MAAS now and name the stage that matches what it shows (for the adopt verb)."""
    if not wf.maas_system_id:
        return "discover", {"maas_status": None}
    client = client_for_site(wf.site)
    try:
        machine = client.get_machine(wf.maas_system_id)
    except MaasNotFound:
        return "discover", {"maas_status": "missing"}
    finally:
        client.close()
    stage = ADOPT.get(machine.status)
    if stage is None:
        raise Conflict(
            f"cannot adopt: MAAS shows {machine.status_name}; fix it in MAAS, or restart-clean",
            current_state=wf.state,
            maas_status=machine.status_name,
        )
    return stage, {"maas_status": machine.status_name, "adopted_stage": stage}

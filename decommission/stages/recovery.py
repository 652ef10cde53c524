"""Operator-driven: restart-clean's reset, cancel, and what adopt reads."""

from __future__ import annotations

from typing import Any

from maas_client.errors import MaasNotFound
from maas_client.status import RELEASABLE
from maas_client.types import Machine
from maas_domain.errors import Conflict
from maas_domain.site_client import client_for_site
from workflows import family, verbs
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

from ..models import Decommission, Mode
from .common import ABORT, GET, Ctx, S, W, comment, machine_of


@stage(timeout=None, calls=(GET, ABORT), machine_may_vanish=True)
def reset(ctx: Ctx) -> Result:
    """Stop what MAAS is doing for us; the next attempt erases again from the top."""
    wf = ctx.wf
    if child := _cancel_child(wf, f"restart-clean of decommission {wf.pk}"):
        return Wait(f"waiting for onboarding {child} to cancel", check_in=30)
    try:
        machine = machine_of(ctx)
    except MaasNotFound:
        return Fail("not_in_maas", f"machine {wf.maas_system_id} is gone from MAAS")
    _abort_in_flight(ctx, machine, "restart-clean")
    return Done(
        "reset: the next attempt starts from preflight",
        {"erased": None, "fallback_used": False, "release_requested": False},
    )


@stage(timeout=None, calls=(GET, ABORT))
def cancel(ctx: Ctx) -> Result:
    wf = ctx.wf
    if child := _cancel_child(wf, f"decommission {wf.pk} cancelled"):
        return Wait(f"waiting for onboarding {child} to cancel", check_in=30)
    if not wf.maas_system_id:
        return Done("cancelled before MAAS was touched")
    machine = machine_of(ctx)
    ctx.observe(machine)
    _abort_in_flight(ctx, machine, "cancel")
    return Done(f"cancelled; MAAS shows {machine.status_name}")


def _abort_in_flight(ctx: Ctx, machine: Machine, why: str) -> None:
    """Abort an erase or a deploy MAAS is running for us, once. Our erase runs in Releasing,
    which MAAS cannot abort: it runs on, and the timeline says so."""
    if ctx.sent("abort"):
        return
    if machine.status in (S.DISK_ERASING, S.DEPLOYING):
        ctx.maas.abort(machine.system_id, comment=comment(ctx, why))
        ctx.event("maas.action", f"aborted {machine.status_name}")
    elif machine.status == S.RELEASING:
        ctx.event(
            "maas.observed",
            "MAAS cannot abort a machine in Releasing: the release (and its erase) runs on",
        )


def _cancel_child(wf: Decommission, reason: str) -> int | None:
    """Cancel an open redeploy onboarding; its id while it is still open (it wakes us when it
    ends), so two workflows never drive the same machine at once."""
    child = family.latest_child(wf)
    if child is None or not child.is_open:
        return None
    if child.state in verbs.VERBS["cancel"].sources:
        verbs.apply(family.kind_of(child), child.pk, "cancel", actor=None, reason=reason)
    elif child.state == W.MANUAL_INTERVENTION:
        return None  # frozen by an operator: it drives nothing
    return int(child.pk)


def adopt_stage(wf: Decommission) -> tuple[str, dict[str, Any]]:
    """Read MAAS now and name the stage that matches (for the adopt verb)."""
    client = client_for_site(wf.site)
    try:
        machine = client.get_machine(wf.maas_system_id)
    except MaasNotFound:
        if wf.mode == Mode.FULL:
            return "complete", {"maas_status": "missing", "adopted_stage": "complete"}
        raise Conflict(
            "cannot adopt: the machine is gone from MAAS", current_state=wf.state
        ) from None
    finally:
        client.close()
    if machine.status == S.READY and (wf.erased or wf.erase_mode == "none"):
        stage = {Mode.REIMAGE: "redeploy", Mode.FULL: "retire"}.get(Mode(wf.mode), "complete")
    elif machine.status == S.DEPLOYED and wf.mode == Mode.REIMAGE and family.latest_child(wf):
        stage = "redeploy"
    elif machine.status in RELEASABLE or machine.status in (
        S.READY,
        S.RELEASING,
        S.DISK_ERASING,
    ):
        stage = "release"
    else:
        raise Conflict(
            f"cannot adopt: MAAS shows {machine.status_name}; fix it in MAAS, or restart-clean",
            current_state=wf.state,
            maas_status=machine.status_name,
        )
    return stage, {"maas_status": machine.status_name, "adopted_stage": stage}

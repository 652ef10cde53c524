"""Operator-driven: restart-clean's reset and cancel (each stops an open requalifying child
first, so two workflows never drive the machine at once), and what adopt reads."""

from __future__ import annotations

from typing import Any

from maas_client.errors import MaasNotFound
from maas_domain.errors import Conflict
from maas_domain.site_client import client_for_site
from workflows import family, verbs
from workflows.kinds import stage
from workflows.results import Done, Result, Wait

from ..models import Repair
from .common import Ctx, S, W


def _cancel_child(wf: Repair, reason: str) -> int | None:
    """Cancel an open child; its id while it is still open (it wakes us when it ends)."""
    child = family.latest_child(wf)
    if child is None or not child.is_open:
        return None
    if child.state in verbs.VERBS["cancel"].sources:
        verbs.apply(family.kind_of(child), child.pk, "cancel", actor=None, reason=reason)
    elif child.state == W.MANUAL_INTERVENTION:
        return None  # frozen by an operator: it drives nothing
    return int(child.pk)


@stage(timeout=None)
def reset(ctx: Ctx) -> Result:
    """The next attempt starts from preflight; the frozen packet and the machine (Broken, or as
    the child left it) stay as they are."""
    if child := _cancel_child(ctx.wf, f"restart-clean of repair {ctx.wf.pk}"):
        return Wait(f"waiting for onboarding {child} to cancel", check_in=30)
    return Done("reset: the next attempt starts from preflight")


@stage(timeout=None)
def cancel(ctx: Ctx) -> Result:
    """The node goes back to quarantine (the kind's hook); the machine stays as it is, Broken
    in MAAS if it was handed over: out of the Ready pool until an operator decides."""
    if child := _cancel_child(ctx.wf, f"repair {ctx.wf.pk} cancelled"):
        return Wait(f"waiting for onboarding {child} to cancel", check_in=30)
    return Done("cancelled")


ADOPT = {S.BROKEN: "in_repair", S.READY: "requalify"}


def adopt_stage(wf: Repair) -> tuple[str, dict[str, Any]]:
    """Read MAAS now and name the stage that matches (for the adopt verb)."""
    client = client_for_site(wf.site)
    try:
        machine = client.get_machine(wf.maas_system_id)
    except MaasNotFound:
        raise Conflict(
            "cannot adopt: the machine is gone from MAAS", current_state=wf.state
        ) from None
    finally:
        client.close()
    stage_name = ADOPT.get(machine.status)
    if stage_name == "in_repair" and not wf.handed_over_at:
        stage_name = "hand_over"
    if stage_name == "requalify" and wf.repaired_at is None:
        stage_name = None  # Ready but never reported repaired: MAAS was changed by hand
    if stage_name is None:
        raise Conflict(
            f"cannot adopt: MAAS shows {machine.status_name}; fix it in MAAS, or restart-clean",
            current_state=wf.state,
            maas_status=machine.status_name,
        )
    return stage_name, {"maas_status": machine.status_name, "adopted_stage": stage_name}

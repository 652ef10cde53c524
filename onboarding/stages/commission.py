"""Stage 3, commission: MAAS inventories the machine; adopt a commissioning already done."""

from __future__ import annotations

from maas_client.types import Machine
from onboarding.stages.common import (
    COMMISSIONING,
    GET,
    PAST_COMMISSIONING,
    POLL,
    Ctx,
    S,
    learned,
    read_machine,
    send_commission,
)
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

# -- 3. commission --------------------------------------------------------------------------------


@stage(
    timeout=3600,
    calls=(
        GET,
        C("commission", "unless Ready"),
        C("script_results", "on a failure (or Failed testing), the scripts that failed"),
    ),
    expects=COMMISSIONING,
)
def commission(ctx: Ctx) -> Result:
    machine = read_machine(ctx)
    ctx.observe(machine)
    status = machine.status
    if status in (S.COMMISSIONING, S.TESTING):
        return Wait(f"commissioning ({machine.status_name})", machine.system_id, int(status), POLL)
    if status == S.READY:
        if ctx.sent("commission"):
            fresh = {"commissioned_attempt": ctx.wf.attempt, "recommission": False}
            return Done("commissioned", {**learned(machine), **fresh})
        if ctx.wf.recommission:  # a repair or a hardware failure: judge fresh facts only
            return _send(ctx, machine)
        return Done("already Ready in MAAS; not recommissioned", learned(machine))
    if status in (S.FAILED_COMMISSIONING, S.FAILED_TESTING) and ctx.sent("commission"):
        return Fail(
            "commissioning",
            f"MAAS commissioning failed: {machine.status_message or machine.status_name}"
            + _failed_scripts(ctx, machine.system_id),
            {"maas_status": machine.status_name},
        )
    if status in PAST_COMMISSIONING and ctx.wf.recommission:
        return Fail(
            "unexpected_state",
            f"machine is {machine.status_name} in MAAS; it must be commissioned again (its "
            "hardware failed or was repaired) and MAAS commissions only New, Ready, Broken or "
            "Failed commissioning machines: release it first",
        )
    if status == S.FAILED_TESTING:
        # Not ours (ours failed above): MAAS refuses to commission from Failed testing (recorded
        # against MAAS 3.5.10), and clearing it is a human's call on the failed tests
        # (docs/onboarding.md, "Commission").
        return Fail(
            "failed_testing",
            f"machine is Failed testing in MAAS ({_why(machine)})"
            + _failed_scripts(ctx, machine.system_id, "testing")
            + "; MAAS does not commission a machine in Failed testing: look at the failed "
            "tests, then in MAAS override the failed testing (Ready) or mark the machine broken "
            "and fixed, and retry",
            {"maas_status": machine.status_name},
        )
    if status in PAST_COMMISSIONING:
        # MAAS's truth (a rerun or adopt of a machine already commissioned and allocated or
        # deployed): commissioning would wipe it; later stages take it as it is.
        return Done(f"MAAS shows {machine.status_name}: commissioned before; not recommissioned")
    if status in (S.NEW, S.BROKEN, S.FAILED_COMMISSIONING):  # MAAS's Commission statuses
        return _send(ctx, machine)
    return Fail(
        "unexpected_state",
        f"machine is {machine.status_name} in MAAS; onboarding needs New or Ready "
        "(release it in MAAS, or adopt the workflow)",
    )


def _send(ctx: Ctx, machine: Machine) -> Result:
    send_commission(ctx, machine)
    # commissioning resets MAAS's storage and network configuration: the layout and PXE link
    # are set again (storage_pxe)
    return Wait(
        "commissioning",
        machine.system_id,
        int(S.COMMISSIONING),
        POLL,
        updates={"layout_kept": False},
    )


def _failed_scripts(ctx: Ctx, system_id: str, result_type: str = "commissioning") -> str:
    sets = ctx.maas.script_results(system_id, result_type=result_type)
    failed = [
        r.name for s in sets[-1:] for r in s.results if r.status_name in ("Failed", "Timed out")
    ]
    return f"; failed scripts: {', '.join(failed)}" if failed else ""


def _why(machine: Machine) -> str:
    return machine.error_description or machine.status_message or "no reason given"

"""What every onboarding stage uses: the context type, MAAS's status names, the machine read."""

from __future__ import annotations

from typing import Any

from maas_client.errors import MaasError
from maas_client.status import NodeStatus
from maas_client.types import Machine
from onboarding.models import Onboarding
from workflows.kinds import Call, StageContext
from workflows.results import StageFailed

S = NodeStatus
Ctx = StageContext[Onboarding]
POLL = 600.0  # check-in fallback when nothing wakes a wait earlier (seconds)
MAAS_EVENTS_KEPT = 20  # MAAS's latest events for the machine, kept with a failed report
GET = Call("get_machine")
# Past commissioning: a rerun or adopt of a machine already allocated or deployed passes
# commission and storage_pxe as it is.
PAST_COMMISSIONING = (S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT)
# What MAAS may show while a workflow is in a stage (a stage's ``expects``: reconciliation
# reports anything else as drift). Each set also allows the previous stage's statuses: MAAS is
# read a moment before our rows.
COMMISSIONING = frozenset(
    {S.NEW, S.COMMISSIONING, S.TESTING, S.READY, S.FAILED_COMMISSIONING, *PAST_COMMISSIONING}
)
DEPLOYING = frozenset(
    {S.READY, S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT, S.RELEASING}
)


def deploys(wf: Onboarding) -> bool:
    """The run deploys the machine once it is judged (and tested): not a requalification that
    returns the node with its machine Ready (``Onboarding.deploys``)."""
    return wf.deploys


def read_machine(ctx: Ctx) -> Machine:
    if not ctx.wf.maas_system_id:
        raise StageFailed("internal", "no MAAS machine recorded; rerun from discover")
    return ctx.machine(ctx.wf.maas_system_id)  # the site poll's listing, or a GET


def learned(machine: Machine) -> dict[str, Any]:
    boot = machine.boot_interface or (machine.interfaces[0] if machine.interfaces else None)
    return {"pxe_mac": boot.mac_address} if boot and boot.mac_address else {}


def send_commission(ctx: Ctx, machine: Machine) -> None:
    """Commission with the policy's flags (the prototype's enable_ssh and skip_bmc_config)."""
    policy = ctx.policy
    ctx.maas.commission(
        machine.system_id,
        enable_ssh=policy.commission_enable_ssh,
        skip_bmc_config=policy.commission_skip_bmc_config,
        skip_networking=policy.commission_skip_networking,
        skip_storage=policy.commission_skip_storage,
        commissioning_scripts=policy.commission_scripts,
    )
    ctx.event(
        "maas.action",
        "commission sent",
        enable_ssh=policy.commission_enable_ssh,
        skip_bmc_config=policy.commission_skip_bmc_config,
    )


def recent_maas_events(ctx: Ctx, sid: str) -> list[dict[str, str]]:
    """MAAS's latest events for the machine, kept with a failed report and then with the
    quarantine evidence; a MAAS that cannot answer now does not change the verdict (the list
    says so)."""
    try:
        page = ctx.maas.events(system_ids=[sid], limit=MAAS_EVENTS_KEPT)
    except MaasError as exc:
        return [{"created": "", "level": "", "message": f"MAAS events unavailable: {exc.message}"}]
    return [
        {"created": e.created.isoformat(), "level": e.level, "message": e.message}
        for e in page.events
    ]

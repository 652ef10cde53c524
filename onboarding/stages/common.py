"""What every onboarding stage uses: the context type, MAAS's status names, the machine read."""

from __future__ import annotations

from typing import Any

from maas_client.status import NodeStatus
from maas_client.types import Machine
from onboarding.models import Onboarding
from workflows.kinds import StageContext
from workflows.results import StageFailed

S = NodeStatus
Ctx = StageContext[Onboarding]
POLL = 600.0  # check-in fallback when nothing wakes a wait earlier (seconds)


def read_machine(ctx: Ctx) -> Machine:
    if not ctx.wf.maas_system_id:
        raise StageFailed("internal", "no MAAS machine recorded; rerun from discover")
    return ctx.maas.get_machine(ctx.wf.maas_system_id)


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

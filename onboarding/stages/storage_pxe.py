"""Stage 4, storage layout and PXE preflight: the profile's layout, the PXE interface linked AUTO
on the PXE subnet.
"""

from __future__ import annotations

from onboarding.models import Onboarding
from onboarding.stages.commission import PAST_COMMISSIONING
from onboarding.stages.common import Ctx, S, read_machine
from workflows.results import Done, Fail, Result

# -- 4. storage layout and PXE preflight ----------------------------------------------------------


def storage_pxe(ctx: Ctx) -> Result:
    wf, maas, profile = ctx.wf, ctx.maas, ctx.wf.profile
    machine = read_machine(ctx)
    if machine.status in PAST_COMMISSIONING:
        # set before the deploy that MAAS shows; MAAS changes neither until it is released
        return Done(f"MAAS shows {machine.status_name}: storage and PXE left as deployed")
    if machine.status != S.READY:
        return Fail(
            "unexpected_state", f"machine is {machine.status_name}; storage/PXE needs Ready"
        )
    if not ctx.sent("set_storage_layout"):
        maas.set_storage_layout(machine.system_id, profile.storage_layout)
        ctx.event("maas.action", f"storage layout {profile.storage_layout} applied")
    cidr = profile.pxe_subnet or wf.site.pxe_subnet
    subnets = {s.cidr: s for s in maas.subnets()}
    iface = (
        next((i for i in machine.interfaces if i.name == profile.pxe_interface), None)
        if profile.pxe_interface
        else machine.boot_interface
    )
    if iface is None:
        return Fail(
            "pxe", f"PXE interface {profile.pxe_interface or '(boot)'} not found on the machine"
        )
    if cidr and cidr not in subnets:
        return Fail("pxe", f"PXE subnet {cidr} does not exist in MAAS")
    target = subnets.get(cidr) if cidr else None
    if target is None:
        on = [lk.subnet for lk in iface.links if lk.subnet is not None]
        target = on[0] if on else None
    if target is None:
        msg = f"PXE interface {iface.name} has no subnet; metadata would be unreachable on deploy"
        if ctx.policy.strict_pxe_preflight:
            return Fail("pxe", msg)
        return Done(f"warning: {msg}")
    good = [
        lk for lk in iface.links if lk.mode == "auto" and lk.subnet and lk.subnet.id == target.id
    ]
    if good and len(iface.links) == 1:
        return Done(f"PXE interface {iface.name} is AUTO on {target.cidr}")
    for link in iface.links:
        if not (link.mode == "auto" and link.subnet and link.subnet.id == target.id):
            maas.unlink_subnet(machine.system_id, iface.id, link.id)
    if not good:
        # MAAS offers only the interface's own VLAN's subnets unless asked to move it
        maas.link_subnet(
            machine.system_id,
            iface.id,
            mode="auto",
            subnet=target.id,
            force=iface.vlan_id != target.vlan_id,
        )
    ctx.event("maas.action", f"relinked PXE interface {iface.name} to AUTO on {target.cidr}")
    check = next(i for i in maas.interfaces(machine.system_id) if i.id == iface.id)
    if not any(lk.mode == "auto" and lk.subnet and lk.subnet.id == target.id for lk in check.links):
        return Fail(
            "pxe", f"PXE interface {iface.name} did not take the AUTO link on {target.cidr}"
        )
    return Done(f"PXE interface {iface.name} relinked to AUTO on {target.cidr}")


def first_deploy(wf: Onboarding) -> bool:
    """Not a reimage's redeploy: MAAS keeps the layout and the PXE link the node's first
    onboarding set across the release (decommission/stages.py starts the redeploy past them)."""
    return wf.parent_kind != "decommission"

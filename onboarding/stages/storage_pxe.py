"""Stage 4, storage layout and PXE preflight: the profile's layout, the PXE interface linked AUTO
on the PXE subnet.
"""

from __future__ import annotations

import time

from maas_client.errors import MaasError
from maas_client.types import Interface, Link, Machine, Subnet
from onboarding.models import Onboarding
from onboarding.stages.common import (
    COMMISSIONING,
    GET,
    PAST_COMMISSIONING,
    Ctx,
    S,
    read_machine,
)
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result

# -- 4. storage layout and PXE preflight ----------------------------------------------------------


def first_deploy(wf: Onboarding) -> bool:
    """The run deploys, and MAAS does not hold a layout and PXE link an earlier onboarding of
    this node set: not a reimage's redeploy, which starts past them (``Onboarding.layout_kept``;
    a commissioning this run sends clears it)."""
    return not wf.layout_kept and wf.deploys


@stage(
    timeout=600,
    calls=(
        GET,
        C("set_storage_layout"),
        C("subnets", "at most once a minute per site and worker process"),
        C("interfaces"),
        C("unlink_subnet", "only if the PXE interface is not AUTO on the PXE subnet"),
        C("link_subnet", "the same"),
    ),
    expects=COMMISSIONING | {S.READY},
    applies=first_deploy,
)
def storage_pxe(ctx: Ctx) -> Result:
    """Three sub-steps on a Ready machine: the profile's storage layout (once per attempt), the
    PXE interface and the subnet it must be on, and the AUTO link there (relinked and verified
    when it is not the interface's only link)."""
    machine = read_machine(ctx)
    if machine.status in PAST_COMMISSIONING:
        # set before the deploy that MAAS shows; MAAS changes neither until it is released
        return Done(f"MAAS shows {machine.status_name}: storage and PXE left as deployed")
    if machine.status != S.READY:
        return Fail(
            "unexpected_state", f"machine is {machine.status_name}; storage/PXE needs Ready"
        )
    if not ctx.sent("set_storage_layout"):
        layout = ctx.wf.profile.storage_layout
        ctx.maas.set_storage_layout(machine.system_id, layout)
        ctx.event("maas.action", f"storage layout {layout} applied")
    found = _pxe_target(ctx, machine)
    if not isinstance(found, tuple):
        return found
    iface, target = found
    return _link_auto(ctx, machine, iface, target)


def _pxe_target(ctx: Ctx, machine: Machine) -> tuple[Interface, Subnet] | Result:
    """The PXE interface (the profile's, else the boot interface) and the subnet it must be on
    (the profile's or the site's PXE subnet, else the one it is on), or the stage's end when
    either is missing (no subnet at all is only a warning unless the policy is strict)."""
    profile = ctx.wf.profile
    cidr = profile.pxe_subnet or ctx.wf.site.pxe_subnet
    subnets = {s.cidr: s for s in site_subnets(ctx, fresh_unless=cidr)}
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
    return iface, target


def _auto_on(link: Link, target: Subnet) -> bool:
    return bool(link.mode == "auto" and link.subnet and link.subnet.id == target.id)


def _link_auto(ctx: Ctx, machine: Machine, iface: Interface, target: Subnet) -> Result:
    """The interface AUTO on ``target`` and linked nowhere else: every other link unlinked, the
    AUTO link made if missing (moving the interface's VLAN if need be), then read back."""
    maas = ctx.maas
    good = [lk for lk in iface.links if _auto_on(lk, target)]
    if good and len(iface.links) == 1:
        return Done(f"PXE interface {iface.name} is AUTO on {target.cidr}")
    for link in iface.links:
        if not _auto_on(link, target):
            maas.unlink_subnet(machine.system_id, iface.id, link.id)
    if not good:
        # MAAS offers only the interface's own VLAN's subnets unless asked to move it
        try:
            maas.link_subnet(
                machine.system_id,
                iface.id,
                mode="auto",
                subnet=target.id,
                force=iface.vlan_id != target.vlan_id,
            )
        except MaasError:
            forget_subnets(ctx)  # maybe ours were stale: the next run reads them again
            raise
    ctx.event("maas.action", f"relinked PXE interface {iface.name} to AUTO on {target.cidr}")
    check = next(i for i in maas.interfaces(machine.system_id) if i.id == iface.id)
    if not any(_auto_on(lk, target) for lk in check.links):
        forget_subnets(ctx)
        return Fail(
            "pxe", f"PXE interface {iface.name} did not take the AUTO link on {target.cidr}"
        )
    return Done(f"PXE interface {iface.name} relinked to AUTO on {target.cidr}")


# The site's subnets, read at most once per this many seconds per site and worker process: in a
# batch every node's storage_pxe stage needs the same list (one GET subnets per node before).
# Subnets are not the machine: an operator changes them rarely and never as a step of an
# onboarding. What a stale list could do, and why that is safe: a PXE subnet created since is
# looked up again before "does not exist" fails a stage (``fresh_unless``); a subnet deleted and
# recreated under another id makes ``link_subnet`` refuse (MAAS checks the id) or the
# verification that follows it fail, and either forgets the list. No machine state is cached.
SUBNETS_SECONDS = 60.0
_subnets: dict[tuple[int, str], tuple[float, list[Subnet]]] = {}


def site_subnets(ctx: Ctx, *, fresh_unless: str = "") -> list[Subnet]:
    """``GET subnets/`` of the workflow's site, or this process's copy of it younger than
    ``SUBNETS_SECONDS``; a copy that lacks the CIDR ``fresh_unless`` is read again."""
    key = (ctx.wf.site_id, ctx.wf.site.maas_url)
    kept = _subnets.get(key)
    if (
        kept is not None
        and time.monotonic() - kept[0] <= SUBNETS_SECONDS
        and (not fresh_unless or any(s.cidr == fresh_unless for s in kept[1]))
    ):
        return kept[1]
    subnets = ctx.maas.subnets()
    _subnets[key] = (time.monotonic(), subnets)
    return subnets


def forget_subnets(ctx: Ctx | None = None) -> None:
    """Drop the copy of the workflow's site (every site's without ``ctx``: tests)."""
    if ctx is None:
        _subnets.clear()
    else:
        _subnets.pop((ctx.wf.site_id, ctx.wf.site.maas_url), None)

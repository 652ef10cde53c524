"""Stage 2, discover: find the machine MAAS has for this host (hostname, BMC address), or create
it, and power-cycle a New one into commissioning.
"""

from __future__ import annotations

from typing import Any

from maas_client.errors import MaasNotFound
from maas_client.types import Machine
from maas_domain.secrets.sites import ipmi_credentials
from maas_domain.services.guardrails import machine_holder
from onboarding.models import Onboarding
from onboarding.stages.common import GET, Ctx, S, learned, send_commission
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Result, StageFailed, Wait

# -- 2. discover ----------------------------------------------------------------------------------


DISCOVERY_WATCH = 60.0  # check-in while waiting for a power-cycled machine to be discovered


@stage(
    timeout=1800,
    calls=(
        C("list_machines", "by hostname, BMC address, PXE MAC; New machines"),
        C("power_addresses"),
        GET,
        C("create_machine", "only if no machine matches"),
        C("update_machine", "power parameters of a matched machine"),
        C("abort", "a duplicate that enlisted itself, before deleting it"),
        C("delete_machine", "that duplicate"),
        C("commission", "a New machine, to power-cycle it into commissioning"),
    ),
)
def discover(ctx: Ctx) -> Result:
    """The prototype's order (docs/onboarding.md, "Discovery"): hostname, IPMI power address,
    a PXE MAC MAAS reported before; then auto-claim the sole New machine (policy); else create
    the machine with its BMC and, if MAAS knows none of its NICs, have MAAS power-cycle it and
    wait until MAAS discovered it (policy). Ambiguity fails closed."""
    wf, maas = ctx.wf, ctx.maas
    if wf.maas_system_id:
        try:
            machine = ctx.machine(wf.maas_system_id)
        except MaasNotFound:
            ctx.event("maas.observed", f"recorded machine {wf.maas_system_id} is gone from MAAS")
        else:
            return _discovered(ctx, machine, f"machine {machine.system_id} already recorded")

    def adopt(machine: Machine, how: str, created: bool = False) -> Result:
        if holder := machine_holder(wf.site, machine.system_id, other_than=wf.node_id):
            raise StageFailed(
                "ambiguous",
                f"{how}: MAAS machine {machine.system_id} is already live node {holder}; "
                "one machine per live node (retire or fix that node first)",
                candidates=[machine.system_id],
            )
        ctx.event(
            "discover.matched",
            f"{how}: {machine.system_id} ({machine.status_name})",
            system_id=machine.system_id,
            matched_by=how,
        )
        return _discovered(
            ctx,
            machine,
            f"using MAAS machine {machine.system_id} ({how})",
            {"maas_system_id": machine.system_id, "created_machine": created or wf.created_machine},
        )

    by_host = _single(maas.list_machines(hostnames=[wf.hostname]), f"hostname {wf.hostname}")
    if by_host:
        ctx.saw(by_host)  # MAAS's answer of just now: commission, chained next, looks at it
        return adopt(by_host, "matched by hostname", created=ctx.sent("create_machine"))
    addresses = maas.power_addresses()
    matches = sorted(sid for sid, addr in addresses.items() if addr == wf.ipmi_ip)
    if matches:
        found = _single(maas.list_machines(system_ids=matches), f"IPMI address {wf.ipmi_ip}")
        if found:
            ctx.saw(found)
            return adopt(found, "matched by IPMI address")
    mac = known_pxe_mac(wf)
    if mac and not ctx.policy.match_pxe_mac:
        ctx.event("discover.skipped", f"PXE MAC {mac} is known but match_pxe_mac is off: not used")
        mac = ""
    if mac:
        found = _single(maas.list_machines(mac_addresses=[mac]), f"PXE MAC {mac}")
        if found:
            ctx.saw(found)
            return adopt(found, "matched by PXE MAC")
    unowned = [m for m in maas.list_machines(statuses=["new"]) if not addresses.get(m.system_id)]
    if ctx.policy.auto_claim_new:
        claimed = _single(unowned, "'sole New machine without a BMC address' (auto-claim)")
        if claimed:
            return adopt(_claim(ctx, claimed), "auto-claimed the only New machine")
    elif len(unowned) == 1:
        ctx.event(
            "discover.skipped",
            f"auto_claim_new is off: not claiming the only New machine {unowned[0].system_id}",
        )
    if not mac and not ctx.policy.discovery_power_cycle:
        raise StageFailed(
            "discovery",
            f"no MAAS machine matches {wf.hostname} ({wf.ipmi_ip}) and no PXE MAC of it is "
            "known; discovery_power_cycle is off, so MAAS will not power-cycle an unknown box "
            "to find it: let the machine enlist (PXE boot it) and rerun, or allow it",
        )
    machine = maas.create_machine(
        hostname=wf.hostname,
        mac_addresses=[mac] if mac else [],
        architecture=wf.profile.architecture,
        power_parameters=_power_parameters(wf),
        commission=False,
    )
    return adopt(machine, "created in MAAS with IPMI credentials", created=True)


def _single(candidates: list[Machine], how: str) -> Machine | None:
    if len(candidates) > 1:
        ids = [f"{m.system_id} ({m.hostname}, {m.status_name})" for m in candidates]
        raise StageFailed(
            "ambiguous",
            f"{len(candidates)} MAAS machines match {how}: {', '.join(ids)}; refusing to guess",
            candidates=[m.system_id for m in candidates],
        )
    return candidates[0] if candidates else None


def _claim(ctx: Ctx, machine: Machine) -> Machine:
    """Make an enlisted machine ours in MAAS: our hostname and its BMC, so MAAS can power it."""
    return ctx.maas.update_machine(
        machine.system_id,
        hostname=ctx.wf.hostname,
        power_type="ipmi",
        power_parameters=_power_parameters(ctx.wf),
    )


def known_pxe_mac(wf: Onboarding) -> str:
    """The host's PXE MAC as MAAS last reported it: this workflow's, else an earlier
    onboarding's of the same host on the site."""
    if wf.pxe_mac:
        return wf.pxe_mac
    earlier = (
        Onboarding.objects.filter(site_id=wf.site_id, hostname=wf.hostname)
        .exclude(pk=wf.pk)
        .exclude(pxe_mac="")
        .order_by("-id")
        .values_list("pxe_mac", flat=True)
        .first()
    )
    return earlier or ""


def _discovered(
    ctx: Ctx, machine: Machine, message: str, updates: dict[str, Any] | None = None
) -> Result:
    """Done when MAAS knows the machine's NICs (its PXE MAC is learned); a machine MAAS knows
    none of (added by its BMC alone) is first power-cycled through MAAS and waited for."""
    updates = {"maas_system_id": machine.system_id, **(updates or {})}
    if machine.interfaces:
        return Done(message, {**updates, **learned(machine)})
    if ctx.sent("commission"):
        return _discovery_wait(ctx, machine, updates)
    if not ctx.policy.discovery_power_cycle or machine.status not in POWER_CYCLE_FROM:
        return Done(f"{message}; MAAS knows no NIC of it yet", updates)
    # MAAS powers a machine nobody owns only by commissioning it (power_on needs an owner)
    send_commission(ctx, machine)
    ctx.event("maas.action", f"power-cycled {machine.system_id} through MAAS to discover it")
    return Wait(
        "waiting for MAAS to discover the machine",
        machine.system_id,
        int(S.COMMISSIONING),
        DISCOVERY_WATCH,
        updates,
    )


POWER_CYCLE_FROM = (S.NEW, S.BROKEN, S.FAILED_COMMISSIONING)


def _discovery_wait(ctx: Ctx, machine: Machine, updates: dict[str, Any]) -> Result:
    """A power-cycled machine with no NIC yet: the box may have enlisted itself as another New
    machine carrying the same BMC address (MAAS did not match its boot to this record)."""
    wf, maas = ctx.wf, ctx.maas
    # the New machines first (few), then only their BMC addresses: this runs on every wake
    new = {m.system_id: m for m in maas.list_machines(statuses=["new"])}
    new.pop(machine.system_id, None)
    addresses = maas.power_addresses(system_ids=sorted(new)) if new else {}
    enlisted = [new[s] for s, addr in sorted(addresses.items()) if addr == wf.ipmi_ip and s in new]
    stranger = _single(enlisted, f"IPMI address {wf.ipmi_ip} (enlisted when power-cycled)")
    if stranger is not None:
        if not wf.created_machine:
            raise StageFailed(
                "ambiguous",
                f"the box enlisted itself as {stranger.system_id} while MAAS also has "
                f"{machine.system_id} for BMC {wf.ipmi_ip}, which this workflow did not create: "
                "remove one in MAAS and rerun",
                candidates=[machine.system_id, stranger.system_id],
            )
        if machine.status in (S.COMMISSIONING, S.TESTING) and not ctx.sent("abort"):
            maas.abort(machine.system_id, comment=f"onboarding {wf.pk}: the box enlisted itself")
        maas.delete_machine(machine.system_id)
        ctx.event("maas.action", f"deleted {machine.system_id}: the box enlisted itself instead")
        claimed = _claim(ctx, stranger)
        how = "enlisted when power-cycled (same BMC address)"
        ctx.event(
            "discover.matched",
            f"{how}: {claimed.system_id} ({claimed.status_name})",
            system_id=claimed.system_id,
            matched_by=how,
        )
        return Done(
            f"using MAAS machine {claimed.system_id} ({how})",
            {"maas_system_id": claimed.system_id, "created_machine": False, **learned(claimed)},
        )
    if machine.status in (S.COMMISSIONING, S.TESTING):
        return Wait(
            "waiting for MAAS to discover the machine",
            machine.system_id,
            int(machine.status),
            DISCOVERY_WATCH,
            updates,
        )
    raise StageFailed(
        "discovery",
        f"MAAS power-cycled {machine.system_id} but never saw it boot (now "
        f"{machine.status_name}: {machine.status_message or '-'}): check the BMC address "
        f"{wf.ipmi_ip} and the PXE network",
    )


def _power_parameters(wf: Onboarding) -> dict[str, str]:
    """IPMI parameters for the host: per-host override first, else the site default."""
    creds = ipmi_credentials(site=wf.site, hostname=wf.hostname)
    return {
        "power_address": wf.ipmi_ip,
        "power_user": creds.username,
        "power_pass": creds.password,
        "power_driver": "LAN_2_0",
    }

"""Onboarding stages (docs/architecture.md, "Onboarding stages"). Each looks at MAAS first, acts
once, and returns a result; its declaration at the bottom of this file says everything else
about it (timeout, MAAS calls, the MAAS statuses reconciliation expects while it runs).

A stage run twice makes its MAAS mutation once: it adopts what MAAS already shows, and the
engine's intent log (``ctx.sent``) tells a re-run that a mutation may already have been sent.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.utils import timezone

from maas_client.errors import MaasNotFound
from maas_client.status import RELEASABLE, NodeStatus
from maas_client.types import Event, Machine
from maas_domain import redaction, urlsafety
from maas_domain.errors import Conflict
from maas_domain.models import NodeState, RoceAssignment
from maas_domain.pki import parse_ca_bundle
from maas_domain.secrets.sites import ipmi_credentials
from maas_domain.services.guardrails import machine_holder, target_problems
from maas_domain.site_client import client_for_site
from onboarding import payload
from onboarding.cloudconfig import PayloadRefused
from onboarding.fetchcheck import fetch_problem
from onboarding.models import Onboarding
from workflows.context import StageContext
from workflows.kinds import Stage
from workflows.results import Done, Fail, Result, StageFailed, Wait

S = NodeStatus
Ctx = StageContext[Onboarding]
POLL = 600.0  # check-in fallback when nothing wakes a wait earlier (seconds)


def _machine(ctx: Ctx) -> Machine:
    if not ctx.wf.maas_system_id:
        raise StageFailed("internal", "no MAAS machine recorded; rerun from discover")
    return ctx.maas.get_machine(ctx.wf.maas_system_id)


# -- 1. preflight ---------------------------------------------------------------------------------


def preflight(ctx: Ctx) -> Result:
    wf, policy = ctx.wf, ctx.policy
    site = wf.site
    problems = target_problems(site, wf.profile, wf.sku)
    if policy.bootstrap_bundle_ref.startswith("oci://"):
        problems.append(
            "site bootstrap bundle is an oci:// reference: the first-boot payload fetches with "
            "curl, so only https:// bundles are accepted"
        )
    if policy.bootstrap_bundle_ref and not (
        policy.bootstrap_bundle_version and policy.bootstrap_bundle_digest
    ):
        problems.append("site bootstrap bundle reference lacks a version or digest")
    if site.ca_bundle_pem.strip():
        try:
            parse_ca_bundle(site.ca_bundle_pem)
        except ValueError as exc:
            problems.append(f"site CA material is not a real PEM certificate: {exc}")
    else:
        problems.append("site has no CA material for nodes to trust the control plane")
    if (
        policy.roce_phase2_enabled
        and not RoceAssignment.objects.filter(site=site, hostname=wf.hostname).exists()
    ):
        problems.append(f"profile enables phase-2 RoCE but {wf.hostname} has no RoCE assignment")
    problems += [f"first-boot payload refused: {p}" for p in payload.problems(wf, policy)]
    for label, url in _fetch_targets(ctx):
        reason = fetch_problem(url)
        if reason:
            problems.append(f"{label} {urlsafety.display(url)} is not fetchable: {reason}")
    if problems:
        return Fail("preflight", "; ".join(problems), {"problems": problems})
    return Done("preflight checks passed")


def _fetch_targets(ctx: Ctx) -> list[tuple[str, str]]:
    targets = [
        ("bootstrap endpoint", f"{payload.node_api_url(ctx.wf.site)}/api/v1/node/health"),
        ("node-agent bootstrap script", payload.agent_script_url(ctx.wf.site)),
    ]
    ref = ctx.policy.bootstrap_bundle_ref
    if ref.startswith(("http://", "https://")):
        targets.append(("site bootstrap bundle", ref))
    return targets


# -- 2. discover ----------------------------------------------------------------------------------


DISCOVERY_WATCH = 60.0  # check-in while waiting for a power-cycled machine to be discovered


def discover(ctx: Ctx) -> Result:
    """The prototype's order (docs/onboarding.md, "Discovery"): hostname, IPMI power address,
    a PXE MAC MAAS reported before; then auto-claim the sole New machine (policy); else create
    the machine with its BMC and, if MAAS knows none of its NICs, have MAAS power-cycle it and
    wait until MAAS discovered it (policy). Ambiguity fails closed."""
    wf, maas = ctx.wf, ctx.maas
    if wf.maas_system_id:
        try:
            machine = maas.get_machine(wf.maas_system_id)
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
        return adopt(by_host, "matched by hostname", created=ctx.sent("create_machine"))
    addresses = maas.power_addresses()
    matches = sorted(sid for sid, addr in addresses.items() if addr == wf.ipmi_ip)
    if matches:
        found = _single(maas.list_machines(system_ids=matches), f"IPMI address {wf.ipmi_ip}")
        if found:
            return adopt(found, "matched by IPMI address")
    mac = known_pxe_mac(wf)
    if mac and not ctx.policy.match_pxe_mac:
        ctx.event("discover.skipped", f"PXE MAC {mac} is known but match_pxe_mac is off: not used")
        mac = ""
    if mac:
        found = _single(maas.list_machines(mac_addresses=[mac]), f"PXE MAC {mac}")
        if found:
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


def _learned(machine: Machine) -> dict[str, Any]:
    boot = machine.boot_interface or (machine.interfaces[0] if machine.interfaces else None)
    return {"pxe_mac": boot.mac_address} if boot and boot.mac_address else {}


def _discovered(
    ctx: Ctx, machine: Machine, message: str, updates: dict[str, Any] | None = None
) -> Result:
    """Done when MAAS knows the machine's NICs (its PXE MAC is learned); a machine MAAS knows
    none of (added by its BMC alone) is first power-cycled through MAAS and waited for."""
    updates = {"maas_system_id": machine.system_id, **(updates or {})}
    if machine.interfaces:
        return Done(message, {**updates, **_learned(machine)})
    if ctx.sent("commission"):
        return _discovery_wait(ctx, machine, updates)
    if not ctx.policy.discovery_power_cycle or machine.status not in POWER_CYCLE_FROM:
        return Done(f"{message}; MAAS knows no NIC of it yet", updates)
    # MAAS powers a machine nobody owns only by commissioning it (power_on needs an owner)
    _send_commission(ctx, machine)
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
            {"maas_system_id": claimed.system_id, "created_machine": False, **_learned(claimed)},
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


# -- 3. commission --------------------------------------------------------------------------------


def commission(ctx: Ctx) -> Result:
    machine = _machine(ctx)
    ctx.observe(machine)
    status = machine.status
    if status in (S.COMMISSIONING, S.TESTING):
        return Wait(f"commissioning ({machine.status_name})", machine.system_id, int(status), POLL)
    if status == S.READY:
        sent = ctx.sent("commission")
        return Done(
            "commissioned" if sent else "already Ready in MAAS; not recommissioned",
            _learned(machine),
        )
    if status in (S.FAILED_COMMISSIONING, S.FAILED_TESTING) and ctx.sent("commission"):
        return Fail(
            "commissioning",
            f"MAAS commissioning failed: {machine.status_message or machine.status_name}"
            + _failed_scripts(ctx, machine.system_id),
            {"maas_status": machine.status_name},
        )
    if status in PAST_COMMISSIONING:
        # MAAS's truth (a rerun or adopt of a machine already commissioned and allocated or
        # deployed): commissioning would wipe it; later stages take it as it is.
        return Done(f"MAAS shows {machine.status_name}: commissioned before; not recommissioned")
    if status in (S.NEW, S.BROKEN, S.FAILED_COMMISSIONING, S.FAILED_TESTING):
        _send_commission(ctx, machine)
        return Wait("commissioning", machine.system_id, int(S.COMMISSIONING), POLL)
    return Fail(
        "unexpected_state",
        f"machine is {machine.status_name} in MAAS; onboarding needs New or Ready "
        "(release it in MAAS, or adopt the workflow)",
    )


def _send_commission(ctx: Ctx, machine: Machine) -> None:
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


PAST_COMMISSIONING = (S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT)


def _failed_scripts(ctx: Ctx, system_id: str) -> str:
    sets = ctx.maas.script_results(system_id, result_type="commissioning")
    failed = [
        r.name for s in sets[-1:] for r in s.results if r.status_name in ("Failed", "Timed out")
    ]
    return f"; failed scripts: {', '.join(failed)}" if failed else ""


# -- 4. storage layout and PXE preflight ----------------------------------------------------------


def storage_pxe(ctx: Ctx) -> Result:
    wf, maas, profile = ctx.wf, ctx.maas, ctx.wf.profile
    machine = _machine(ctx)
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


# -- 4b. reachability from the node's own network -------------------------------------------------


def reachability(ctx: Ctx) -> Result:
    """The infra-owned testing script policy names runs on the machine (MAAS ``op=test``) with
    the URLs the first boot will fetch; its result, read from MAAS, decides before deploy
    (docs/onboarding.md, "Predeploy checks")."""
    maas, script = ctx.maas, ctx.policy.reachability_script
    machine = _machine(ctx)
    ctx.observe(machine)
    sid = machine.system_id
    if machine.status == S.TESTING:
        return Wait(f"running {script} on the machine", sid, int(S.TESTING), POLL)
    if not ctx.sent("test"):
        if machine.status not in (S.READY, S.FAILED_TESTING):
            return Fail(
                "unexpected_state", f"machine is {machine.status_name}; the check needs Ready"
            )
        urls = [url for _, url in _fetch_targets(ctx)]
        maas.test(sid, testing_scripts=[script], parameters={f"{script}_url": ",".join(urls)})
        ctx.event(
            "maas.action",
            f"{script} started on the machine",
            urls=[urlsafety.display(url) for url in urls],
        )
        return Wait(f"running {script} on the machine", sid, int(S.TESTING), POLL)
    sets = maas.script_results(sid, result_type="testing", include_output=True)
    found = next((r for s in sets[::-1] for r in s.results if r.name == script), None)
    if found is None:
        return Fail(
            "reachability",
            f"MAAS has no result of testing script {script}: is it registered in MAAS?",
        )
    output = _shown_output(found.output, [url for _, url in _fetch_targets(ctx)])
    if found.status_name == "Passed":
        ctx.event("reachability.checked", f"{script} passed on the machine", output=output[:2000])
        return Done(f"the node's network reaches the control plane ({script} passed)")
    if found.status_name in ("Pending", "Running"):
        return Wait(f"running {script} on the machine", sid, int(machine.status), POLL)
    ctx.event("reachability.failed", f"{script} {found.status_name}", output=output[:2000])
    return Fail(
        "reachability",
        f"{script} {found.status_name.lower()} on the machine: {output[:400] or '(no output)'}",
        {"script": script, "maas_status": machine.status_name},
    )


def _shown_output(output: str, urls: list[str]) -> str:
    """The script's output as it may be stored (timeline, reason, events): the URLs it was given
    shown without their query (a presigned bundle URL's signature), other secret shapes blanked."""
    for url in urls:
        output = output.replace(url, urlsafety.display(url))
    return redaction.redact_text(output.strip())


def _reachability_applies(wf: Onboarding) -> bool:
    return bool(wf.profile.effective_policy().reachability_script)


# -- 5. first-boot payload ------------------------------------------------------------------------


def _tokens_gone(ctx: Ctx) -> None:
    """Minting for an attempt whose tokens the row already records: the secrets backend lost
    or replaced them. Both are minted again together, so row and backend agree (no manual
    repair of either)."""
    if ctx.wf.token_attempt == ctx.wf.attempt:
        ctx.event(
            "payload.tokens_repaired",
            f"the secrets backend no longer holds attempt {ctx.wf.attempt}'s tokens as the row "
            "records them: minted both again",
        )


def payload_stage(ctx: Ctx) -> Result:
    wf, policy = ctx.wf, ctx.policy
    updates: dict[str, Any] = {}
    tokens = payload.read_tokens(wf) if wf.token_attempt == wf.attempt else None
    if tokens is None:
        _tokens_gone(ctx)
        tokens, updates = payload.mint_tokens(wf.pk, wf.attempt)
        for key, value in updates.items():
            setattr(wf, key, value)
    try:
        payload.render(wf, policy, tokens)  # proves the payload renders for this attempt
    except PayloadRefused as exc:
        return Fail("payload", f"first-boot payload refused: {exc}")
    updates |= {
        "site_bundle_version": policy.bootstrap_bundle_version,
        "agent_bootstrap_version": settings.NODE_AGENT_VERSION,
    }
    ctx.event(
        "payload.rendered",
        f"site bundle {policy.bootstrap_bundle_version or '(none)'} then node-agent bootstrap "
        f"{settings.NODE_AGENT_VERSION}, attempt {wf.attempt}",
        site_bundle_ref=urlsafety.display(policy.bootstrap_bundle_ref),
        site_bundle_version=policy.bootstrap_bundle_version,
        site_bundle_digest=policy.bootstrap_bundle_digest,
        agent_bootstrap_version=settings.NODE_AGENT_VERSION,
        attempt=wf.attempt,
    )
    return Done("first-boot payload rendered", updates)


# -- 6. deploy ------------------------------------------------------------------------------------

# Classifying a failed or stuck deployment from what MAAS shows (docs/onboarding.md, "Deploy
# retry"). Only a datasource/cloud-init failure is retried: the OS installed and the node
# rebooted, but the installed OS never reached MAAS's metadata.
DATASOURCE = re.compile(r"cloud-?init|datasource|DataSourceMAAS", re.IGNORECASE)
CURTIN = re.compile(r"curtin|Installation failed", re.IGNORECASE)
POWER = re.compile(r"Failed to power|Power (?:on|off) for the node failed", re.IGNORECASE)
MAAS_TIMEOUT = re.compile(r"Node operation 'Deploying' timed out", re.IGNORECASE)
INSTALLED = ("Installation complete", "Rebooting")
DEPLOY_WATCH = 120.0  # check-in while Deploying: a stuck datasource shows only in events
DATASOURCE_GRACE = 120.0  # a datasource-like event must persist this long before we act


def deploy_events(ctx: Ctx, system_id: str) -> list[Event]:
    """This deployment's MAAS events (DEBUG and up), oldest first: those after the newest
    deployment request."""
    page = ctx.maas.events(system_ids=[system_id], level="DEBUG", limit=100).events
    mine: list[Event] = []
    for event in page:  # newest first
        if event.type == "User starting deployment":
            break
        mine.append(event)
    return mine[::-1]


def _installed(events: list[Event]) -> bool:
    return any(e.type in INSTALLED for e in events)


def _datasource_evidence(events: list[Event]) -> Event | None:
    """A cloud-init/datasource event after the OS installed and the node rebooted."""
    after = False
    for event in events:
        after = after or event.type in INSTALLED
        if after and DATASOURCE.search(event.message):
            return event
    return None


def classify_deploy_failure(machine: Machine, events: list[Event]) -> tuple[str, str]:
    """(class, evidence) of a Failed deployment, from MAAS's status and this deploy's events."""
    why = machine.error_description or machine.status_message
    if any(e.type == "Node installation failure" for e in events) or CURTIN.search(why):
        return "curtin", why
    power = next((e for e in events if POWER.search(e.message)), None)
    if power is not None or POWER.search(why):
        return "power", power.message if power else why
    datasource = _datasource_evidence(events)
    if datasource is not None:
        return "datasource", datasource.message
    if MAAS_TIMEOUT.search(why):
        if _installed(events):
            return "datasource", f"{why} (the OS installed and rebooted, then never reached MAAS)"
        return "deploy_timeout", f"{why} (before the OS finished installing)"
    return "deploy_failed", why or machine.status_name


def _retry_or_fail(
    ctx: Ctx, machine: Machine, failure: str, evidence: str, *, in_progress: bool
) -> Result:
    """The bounded, classified retry: a datasource failure within ``deploy_retry_limit`` is
    aborted if still in progress, released to Ready and redeployed; anything else fails with
    its class (aborted first if in progress, so the machine rests)."""
    tries = int(ctx.data.get("deploy_tries", 0))
    limit = ctx.policy.deploy_retry_limit
    retry = failure == "datasource" and tries < limit
    ctx.event(
        "retry.decision",
        f"deploy {'stuck' if in_progress else 'failed'}, classified {failure}: "
        + ("abort, release and redeploy" if retry and in_progress else "")
        + ("release and redeploy" if retry and not in_progress else "")
        + ("no retry" if not retry else "")
        + f" (retry {tries} of {limit})",
        classification=failure,
        evidence=evidence[:300],
        retry=retry,
    )
    comment = f"onboarding {ctx.wf.pk}: {failure} failure" + (", redeploy" if retry else "")
    if retry:
        ctx.data["deploy_tries"] = tries + 1
        ctx.data.pop("sent", None)  # the redeploy is a new, separate mutation sequence
        ctx.data.pop("datasource_seen", None)
    if in_progress:
        ctx.maas.abort(machine.system_id, comment=comment)
        if retry:
            return Wait("aborting before redeploy", machine.system_id, int(machine.status), POLL)
    elif retry:
        ctx.maas.release(machine.system_id, comment=comment)
        return Wait("releasing before redeploy", machine.system_id, int(S.RELEASING), POLL)
    return Fail(failure, f"deploy failed ({failure}): {evidence}", {"deploy_tries": tries})


def _deploying(ctx: Ctx, machine: Machine) -> Result:
    """Deploying: watch this deployment's events for the datasource failure MAAS would only
    time out on, after a grace period (a node may recover from a slow metadata answer)."""
    sid = machine.system_id
    if ctx.sent("deploy"):
        evidence = _datasource_evidence(deploy_events(ctx, sid))
        if evidence is not None and "datasource_seen" not in ctx.data:
            ctx.data["datasource_seen"] = evidence.id
            ctx.event(
                "deploy.watch",
                f"datasource-like event while Deploying: {evidence.message}; "
                f"acting on it if it persists {int(DATASOURCE_GRACE)}s",
            )
            return Wait(
                "deploying; datasource-like event seen", sid, int(S.DEPLOYING), DATASOURCE_GRACE
            )
        if evidence is not None:
            return _retry_or_fail(ctx, machine, "datasource", evidence.message, in_progress=True)
    return Wait("deploying", sid, int(S.DEPLOYING), DEPLOY_WATCH)


NEW_FIRST_BOOT: dict[str, Any] = {
    "site_bundle_done_at": None,
    "agent_started_at": None,
    "node_failure": "",
    "node_failure_detail": "",
}


def deploy(ctx: Ctx) -> Result:
    wf, policy, maas = ctx.wf, ctx.policy, ctx.maas
    machine = _machine(ctx)
    ctx.observe(machine)
    status = machine.status
    tries = int(ctx.data.get("deploy_tries", 0))
    if status == S.DEPLOYED:
        how = "MAAS says Deployed" if ctx.sent("deploy") else "already Deployed in MAAS; adopted"
        return Done(f"{how} ({machine.distro_series})")
    if status == S.DEPLOYING:
        return _deploying(ctx, machine)
    if status == S.RELEASING:
        return Wait("releasing before redeploy", machine.system_id, int(status), POLL)
    if status == S.ALLOCATED and ctx.sent("abort") and not ctx.sent("release"):
        # aborted for a redeploy: the prototype releases back to Ready first
        maas.release(machine.system_id, comment=f"onboarding {wf.pk}: release after abort")
        return Wait("releasing before redeploy", machine.system_id, int(S.RELEASING), POLL)
    if status == S.FAILED_DEPLOYMENT and ctx.sent("deploy"):
        failure, evidence = classify_deploy_failure(machine, deploy_events(ctx, machine.system_id))
        return _retry_or_fail(ctx, machine, failure, evidence, in_progress=False)
    if status == S.FAILED_DEPLOYMENT:
        # A failed deployment this stage run did not cause (a retry, rerun or adopt): MAAS
        # refuses to deploy from here, so release first (no erase) and deploy when Ready.
        ctx.event("retry.decision", "machine is Failed deployment: release, then deploy")
        maas.release(machine.system_id, comment=f"onboarding {wf.pk}: release before redeploy")
        return Wait("releasing before redeploy", machine.system_id, int(S.RELEASING), POLL)
    if status in (S.READY, S.ALLOCATED):
        tokens = payload.read_tokens(wf)
        fields: dict[str, Any] = {}
        if tokens is None:  # a retry or adopt moved the attempt on, or storage disagrees
            _tokens_gone(ctx)
            tokens, fields = payload.mint_tokens(wf.pk, wf.attempt)
            ctx.event("payload.rendered", f"payload re-rendered for attempt {wf.attempt}")
        try:
            user_data = payload.render(wf, policy, tokens)
        except PayloadRefused as exc:
            return Fail("payload", f"first-boot payload refused: {exc}")
        if fields:
            ctx.save_now(**fields)  # before deploy: a fast node must find these hashes
        maas.deploy(
            machine.system_id,
            distro_series=wf.profile.distro_series,
            user_data=user_data,
            hwe_kernel=wf.profile.hwe_kernel or None,
            enable_hw_sync=policy.hardware_sync_required,
            comment=f"onboarding {wf.pk} attempt {wf.attempt}",
        )
        ctx.event(
            "maas.action",
            f"deploy sent: {wf.profile.distro_series}"
            + (" with hardware sync" if policy.hardware_sync_required else ""),
            deploy_try=tries + 1,
        )
        # the node will hold this attempt's tokens and report a new first boot (written with
        # the result: a report that lands first changes the row, and the stage runs again)
        return Wait(
            "deploying",
            machine.system_id,
            int(S.DEPLOYING),
            DEPLOY_WATCH,
            {**NEW_FIRST_BOOT, "node_token_attempt": wf.attempt},
        )
    return Fail("unexpected_state", f"machine is {machine.status_name} in MAAS during deploy")


# -- 7. hardware sync -----------------------------------------------------------------------------


def hardware_sync(ctx: Ctx) -> Result:
    if not ctx.policy.hardware_sync_required:
        return Done("hardware sync not required by policy")
    machine = _machine(ctx)
    if not machine.enable_hw_sync:
        return Fail("hardware_sync", "MAAS shows hardware sync disabled on the deployed machine")
    if machine.last_sync is None:
        return Wait("waiting for the first hardware sync", check_in=60)
    return Done(f"hardware sync seeded at {machine.last_sync.isoformat()}")


# -- 8. enrollment --------------------------------------------------------------------------------


NODE_FAILURES = {"site_bundle": "the site bootstrap bundle", "agent_start": "the node agent"}


def enrollment(ctx: Ctx) -> Result:
    """Wait for the node: its reports (site bundle ran, agent started) and its enrollment. A
    failure the node reported ends the wait at once, with the part that failed as the class."""
    wf = ctx.wf
    if wf.node_failure:
        part = NODE_FAILURES.get(wf.node_failure, wf.node_failure)
        return Fail(
            wf.node_failure,
            f"{part} failed on the node: {wf.node_failure_detail or '(no detail)'}",
            {"reported": wf.node_failure, "detail": wf.node_failure_detail},
        )
    if wf.enrolled_at and wf.enrolled_attempt == wf.attempt:
        return Done(f"node agent enrolled at {wf.enrolled_at.isoformat()}")
    return Wait("waiting for the node agent to enroll", check_in=POLL)


# -- 9. completion gates --------------------------------------------------------------------------


def complete(ctx: Ctx) -> Result:
    """Every gate of docs/onboarding.md ("Completion gates"), each a separate fact of this run."""
    wf = ctx.wf
    machine = _machine(ctx)
    node = wf.node.state if wf.node_id and wf.node is not None else None  # loaded with the row
    gates = {
        "maas_deployed": machine.status == S.DEPLOYED,
        "site_bundle": not wf.site_bundle_version or wf.site_bundle_done_at is not None,
        "agent_started": wf.agent_started_at is not None,
        "enrolled": wf.enrolled_at is not None and wf.enrolled_attempt is not None,
        "node_row": node in (NodeState.PROVISIONING, NodeState.ACTIVE),
        "current_attempt": wf.enrolled_attempt == wf.attempt == wf.token_attempt,
    }
    failed = [name for name, ok in gates.items() if not ok]
    if failed:
        return Fail(
            "completion_gate", f"completion gates not met: {', '.join(failed)}", {"gates": gates}
        )
    return Done("all completion gates hold", {"completed_at": timezone.now()})


# -- operator-driven stages: restart-clean's reset and cancel's compensation ----------------------

ABORTABLE = (S.COMMISSIONING, S.DEPLOYING, S.DISK_ERASING, S.TESTING)
IN_MOTION = (S.RELEASING, S.DISK_ERASING)


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
    S.READY: "storage_pxe",
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


# What MAAS may show while a workflow is in a stage (reconciliation: anything else is drift).
# Each set also allows the previous stage's statuses: MAAS is read a moment before our rows.
# A rerun or adopt of a machine already allocated or deployed passes commission and storage_pxe
# as it is, so those statuses are expected there too.
COMMISSIONING = frozenset(
    {S.NEW, S.COMMISSIONING, S.TESTING, S.READY, S.FAILED_COMMISSIONING, *PAST_COMMISSIONING}
)
DEPLOYING = frozenset(
    {S.READY, S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT, S.RELEASING}
)

STAGES: list[Stage[Onboarding]] = [
    Stage("preflight", preflight, 300, ("GET node-facing URLs (not MAAS)",)),
    Stage(
        "discover",
        discover,
        1800,
        (
            "GET machines/?hostname=",
            "GET machines/?op=power_parameters",
            "POST machines/ (create, only if no machine matches)",
        ),
    ),
    Stage(
        "commission",
        commission,
        3600,
        ("GET machine", "POST op=commission (unless Ready)"),
        expects=COMMISSIONING,
    ),
    Stage(
        "storage_pxe",
        storage_pxe,
        600,
        (
            "POST op=set_storage_layout",
            "GET subnets/",
            "POST interface op=unlink_subnet/link_subnet (only if not AUTO on the PXE subnet)",
        ),
        expects=COMMISSIONING | {S.READY},
    ),
    Stage(
        "reachability",
        reachability,
        1800,
        ("POST op=test (the policy's testing script, node-facing URLs)", "GET results"),
        expects=frozenset({S.READY, S.TESTING, S.FAILED_TESTING}),
        applies=_reachability_applies,
    ),
    Stage("payload", payload_stage, 300, expects=frozenset({S.READY, S.ALLOCATED, S.DEPLOYED})),
    Stage(
        "deploy",
        deploy,
        3600,
        (
            "GET machine",
            "POST op=deploy (unless Deployed)",
            "on a datasource failure: POST op=release then op=deploy",
        ),
        expects=DEPLOYING,
    ),
    Stage(
        "hardware_sync",
        hardware_sync,
        1800,
        ("GET machine (if required)",),
        expects=DEPLOYING,
    ),
    Stage("enrollment", enrollment, 1800, expects=frozenset({S.DEPLOYED, S.DEPLOYING})),
    Stage("complete", complete, 300, ("GET machine",), expects=frozenset({S.DEPLOYED})),
]
RESET: Stage[Onboarding] = Stage(
    "reset",
    reset,
    None,
    (
        "GET machine",
        "POST op=abort (if in progress)",
        "POST op=release (if allocated/deployed)",
        "DELETE machine (if this workflow created it)",
    ),
    machine_may_vanish=True,
)
CANCEL: Stage[Onboarding] = Stage(
    "cancel",
    cancel,
    None,
    ("GET machine", "POST op=abort (if in progress)", "POST op=release (if allocated)"),
)

"""Onboarding stages (seed 001 §3-§8). Each looks at MAAS first, acts once, and returns a result.

A stage run twice makes its MAAS mutation once: it adopts what MAAS already shows, and the
engine's intent log (``ctx.sent``) tells a re-run that a mutation may already have been sent.
"""

from __future__ import annotations

import re
from typing import Any

import requests
from cryptography import x509
from django.conf import settings
from django.utils import timezone

from maas_domain.errors import Conflict
from maas_domain.maas.errors import MaasNotFound
from maas_domain.maas.factory import client_for_site
from maas_domain.maas.status import RELEASABLE, NodeStatus
from maas_domain.maas.types import Machine
from maas_domain.models import RoceAssignment
from maas_domain.services.credentials import ipmi_credentials
from maas_domain.workflow.engine import Stage, StageContext
from maas_domain.workflow.results import Done, Fail, Result, StageFailed, Wait
from onboarding import payload
from onboarding.services import target_problems

S = NodeStatus
POLL = 600.0  # check-in fallback when nothing wakes a wait earlier (seconds)


def _machine(ctx: StageContext) -> Machine:
    if not ctx.wf.maas_system_id:
        raise StageFailed("internal", "no MAAS machine recorded; rerun from discover")
    return ctx.maas.get_machine(ctx.wf.maas_system_id)


# -- 1. preflight ---------------------------------------------------------------------------------


def preflight(ctx: StageContext) -> Result:
    wf, policy = ctx.wf, ctx.policy
    site = wf.site
    problems = target_problems(site, wf.profile, wf.sku)
    if policy.bootstrap_bundle_ref and not (
        policy.bootstrap_bundle_version and policy.bootstrap_bundle_digest
    ):
        problems.append("site bootstrap bundle reference lacks a version or digest")
    if site.ca_bundle_pem.strip():
        try:
            certs = x509.load_pem_x509_certificates(site.ca_bundle_pem.encode())
        except ValueError:
            certs = []
        if not certs:
            problems.append("site CA material is not a real PEM certificate (placeholder?)")
    else:
        problems.append("site has no CA material for nodes to trust the control plane")
    if (
        policy.roce_phase2_enabled
        and not RoceAssignment.objects.filter(site=site, hostname=wf.hostname).exists()
    ):
        problems.append(f"profile enables phase-2 RoCE but {wf.hostname} has no RoCE assignment")
    for label, url in _fetch_targets(ctx):
        reason = _fetchable(url)
        if reason:
            problems.append(f"{label} {url} is not fetchable: {reason}")
    if problems:
        return Fail("preflight", "; ".join(problems), {"problems": problems})
    return Done("preflight checks passed")


def _fetch_targets(ctx: StageContext) -> list[tuple[str, str]]:
    targets = [
        ("bootstrap endpoint", f"{payload.node_api_url(ctx.wf.site)}/api/v1/node/health"),
        ("node-agent bootstrap script", payload.agent_script_url(ctx.wf.site)),
    ]
    ref = ctx.policy.bootstrap_bundle_ref
    if ref.startswith(("http://", "https://")):
        targets.append(("site bootstrap bundle", ref))
    return targets


def _fetchable(url: str) -> str:
    """HEAD the URL (GET if HEAD is not allowed): it must answer below 400."""
    try:
        response = requests.head(url, timeout=(3, 5), allow_redirects=True)
        if response.status_code == 405:
            response = requests.get(url, timeout=(3, 5))
    except requests.RequestException as exc:
        return type(exc).__name__
    return "" if response.status_code < 400 else f"HTTP {response.status_code}"


# -- 2. discover ----------------------------------------------------------------------------------


def discover(ctx: StageContext) -> Result:
    """Hostname, then IPMI power address, then PXE MAC; else claim or create. Fail closed."""
    wf, maas = ctx.wf, ctx.maas
    if wf.maas_system_id:
        try:
            machine = maas.get_machine(wf.maas_system_id)
        except MaasNotFound:
            ctx.event("maas.observed", f"recorded machine {wf.maas_system_id} is gone from MAAS")
        else:
            return Done(
                f"machine {machine.system_id} already recorded",
                {"maas_system_id": machine.system_id},
            )

    def adopt(machine: Machine, how: str, created: bool = False) -> Result:
        ctx.event(
            "discover.matched",
            f"{how}: {machine.system_id} ({machine.status_name})",
            system_id=machine.system_id,
            matched_by=how,
        )
        return Done(
            f"using MAAS machine {machine.system_id} ({how})",
            {"maas_system_id": machine.system_id, "created_machine": created or wf.created_machine},
        )

    def single(candidates: list[Machine], how: str) -> Machine | None:
        if len(candidates) > 1:
            ids = [f"{m.system_id} ({m.hostname}, {m.status_name})" for m in candidates]
            raise StageFailed(
                "ambiguous",
                f"{len(candidates)} MAAS machines match {how}: {', '.join(ids)}; refusing to guess",
                candidates=[m.system_id for m in candidates],
            )
        return candidates[0] if candidates else None

    by_host = single(maas.list_machines(hostnames=[wf.hostname]), f"hostname {wf.hostname}")
    if by_host:
        return adopt(by_host, "matched by hostname", created=ctx.sent("create_machine"))
    addresses = maas.power_addresses()
    matches = sorted(sid for sid, addr in addresses.items() if addr == wf.ipmi_ip)
    if matches:
        found = single(maas.list_machines(system_ids=matches), f"IPMI address {wf.ipmi_ip}")
        if found:
            return adopt(found, "matched by IPMI address")
    if wf.pxe_mac and ctx.policy.match_pxe_mac:
        found = single(maas.list_machines(mac_addresses=[wf.pxe_mac]), f"PXE MAC {wf.pxe_mac}")
        if found:
            return adopt(found, "matched by PXE MAC")
    if ctx.policy.auto_claim_new:
        unowned = [
            m for m in maas.list_machines(statuses=["new"]) if not addresses.get(m.system_id)
        ]
        claimed = single(unowned, "'sole New machine without a BMC address' (auto-claim)")
        if claimed:
            # make it ours in MAAS: our hostname and its BMC, so MAAS can power it
            claimed = maas.update_machine(
                claimed.system_id,
                hostname=wf.hostname,
                power_type="ipmi",
                power_parameters=_power_parameters(wf),
            )
            return adopt(claimed, "auto-claimed the only New machine")
    machine = maas.create_machine(
        hostname=wf.hostname,
        mac_addresses=[wf.pxe_mac] if wf.pxe_mac else [],
        architecture=wf.profile.architecture,
        power_parameters=_power_parameters(wf),
        commission=False,
    )
    return adopt(machine, "created in MAAS with IPMI credentials", created=True)


def _power_parameters(wf: Any) -> dict[str, str]:
    """IPMI parameters for the host: per-host override first, else the site default."""
    creds = ipmi_credentials(site=wf.site, hostname=wf.hostname)
    return {
        "power_address": wf.ipmi_ip,
        "power_user": creds.username,
        "power_pass": creds.password,
        "power_driver": "LAN_2_0",
    }


# -- 3. commission --------------------------------------------------------------------------------


def commission(ctx: StageContext) -> Result:
    machine = _machine(ctx)
    ctx.observe(machine)
    status = machine.status
    if status in (S.COMMISSIONING, S.TESTING):
        return Wait(f"commissioning ({machine.status_name})", machine.system_id, int(status), POLL)
    if status == S.READY:
        sent = ctx.sent("commission")
        return Done("commissioned" if sent else "already Ready in MAAS; not recommissioned")
    if status in (S.FAILED_COMMISSIONING, S.FAILED_TESTING) and ctx.sent("commission"):
        return Fail(
            "commissioning",
            f"MAAS commissioning failed: {machine.status_message or machine.status_name}"
            + _failed_scripts(ctx, machine.system_id),
            {"maas_status": machine.status_name},
        )
    if status in (S.NEW, S.BROKEN, S.FAILED_COMMISSIONING, S.FAILED_TESTING):
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
        return Wait("commissioning", machine.system_id, int(S.COMMISSIONING), POLL)
    return Fail(
        "unexpected_state",
        f"machine is {machine.status_name} in MAAS; onboarding needs New or Ready "
        "(release it in MAAS, or adopt the workflow)",
    )


def _failed_scripts(ctx: StageContext, system_id: str) -> str:
    sets = ctx.maas.script_results(system_id, result_type="commissioning")
    failed = [
        r.name for s in sets[-1:] for r in s.results if r.status_name in ("Failed", "Timed out")
    ]
    return f"; failed scripts: {', '.join(failed)}" if failed else ""


# -- 4. storage layout and PXE preflight ----------------------------------------------------------


def storage_pxe(ctx: StageContext) -> Result:
    wf, maas, profile = ctx.wf, ctx.maas, ctx.wf.profile
    machine = _machine(ctx)
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
        maas.link_subnet(machine.system_id, iface.id, mode="auto", subnet=target.id)
    ctx.event("maas.action", f"relinked PXE interface {iface.name} to AUTO on {target.cidr}")
    check = next(i for i in maas.interfaces(machine.system_id) if i.id == iface.id)
    if not any(lk.mode == "auto" and lk.subnet and lk.subnet.id == target.id for lk in check.links):
        return Fail(
            "pxe", f"PXE interface {iface.name} did not take the AUTO link on {target.cidr}"
        )
    return Done(f"PXE interface {iface.name} relinked to AUTO on {target.cidr}")


# -- 5. first-boot payload ------------------------------------------------------------------------


def payload_stage(ctx: StageContext) -> Result:
    wf, policy = ctx.wf, ctx.policy
    updates: dict[str, Any] = {}
    tokens = payload.read_tokens(wf) if wf.token_attempt == wf.attempt else None
    if tokens is None:
        tokens, updates = payload.mint_tokens(wf.pk, wf.attempt)
        for key, value in updates.items():
            setattr(wf, key, value)
    payload.render(wf, policy, tokens)  # proves the templates render for this attempt
    updates |= {
        "site_bundle_version": policy.bootstrap_bundle_version,
        "agent_bootstrap_version": settings.NODE_AGENT_VERSION,
    }
    ctx.event(
        "payload.rendered",
        f"site bundle {policy.bootstrap_bundle_version or '(none)'} then node-agent bootstrap "
        f"{settings.NODE_AGENT_VERSION}, attempt {wf.attempt}",
        site_bundle_ref=policy.bootstrap_bundle_ref,
        site_bundle_version=policy.bootstrap_bundle_version,
        site_bundle_digest=policy.bootstrap_bundle_digest,
        agent_bootstrap_version=settings.NODE_AGENT_VERSION,
        attempt=wf.attempt,
    )
    return Done("first-boot payload rendered", updates)


# -- 6. deploy ------------------------------------------------------------------------------------

DATASOURCE = re.compile(r"cloud-?init|datasource|DataSourceMAAS|timed out", re.IGNORECASE)
CURTIN = re.compile(r"curtin|Installation failed", re.IGNORECASE)


def classify_deploy_failure(ctx: StageContext, machine: Machine) -> tuple[str, str]:
    """(class, evidence) from MAAS's status message and the latest events."""
    events = ctx.maas.events(system_ids=[machine.system_id], level="DEBUG", limit=20).events
    text = " | ".join(
        [machine.status_message, machine.error_description, *(e.message for e in events)]
    )
    if CURTIN.search(machine.status_message) or any(
        e.type == "Node installation failure" for e in events
    ):
        return "curtin", machine.status_message
    if DATASOURCE.search(text):
        hint = next(
            (e.message for e in events if DATASOURCE.search(e.message)), machine.status_message
        )
        return "datasource", hint
    return "deploy_failed", machine.status_message or machine.status_name


def deploy(ctx: StageContext) -> Result:
    wf, policy, maas = ctx.wf, ctx.policy, ctx.maas
    machine = _machine(ctx)
    ctx.observe(machine)
    status = machine.status
    tries = int(ctx.data.get("deploy_tries", 0))
    if status == S.DEPLOYED:
        how = "MAAS says Deployed" if ctx.sent("deploy") else "already Deployed in MAAS; adopted"
        return Done(f"{how} ({machine.distro_series})")
    if status == S.DEPLOYING:
        if ctx.data.get("aborting"):
            return Wait("waiting for abort", machine.system_id, int(status), POLL)
        return Wait("deploying", machine.system_id, int(status), POLL)
    if status == S.RELEASING:
        return Wait("releasing before redeploy", machine.system_id, int(status), POLL)
    if status == S.FAILED_DEPLOYMENT and ctx.sent("deploy"):
        failure, evidence = classify_deploy_failure(ctx, machine)
        retryable = failure == "datasource" and tries < policy.deploy_retry_limit
        ctx.event(
            "retry.decision",
            f"deploy failed, classified {failure}: "
            + ("release and redeploy" if retryable else "no retry")
            + f" (retry {tries} of {policy.deploy_retry_limit})",
            classification=failure,
            evidence=evidence[:300],
            retry=retryable,
        )
        if not retryable:
            return Fail(failure, f"deploy failed ({failure}): {evidence}", {"deploy_tries": tries})
        ctx.data["deploy_tries"] = tries + 1
        ctx.data.pop("sent", None)  # the redeploy is a new, separate mutation sequence
        ctx.heartbeat("release")
        maas.release(machine.system_id, comment=f"onboarding {wf.pk}: datasource failure, redeploy")
        return Wait("releasing before redeploy", machine.system_id, int(S.RELEASING), POLL)
    if status == S.FAILED_DEPLOYMENT:
        # A failed deployment this stage run did not cause (a retry, rerun or adopt): MAAS
        # refuses to deploy from here, so release first (no erase) and deploy when Ready.
        ctx.event("retry.decision", "machine is Failed deployment: release, then deploy")
        ctx.heartbeat("release")
        maas.release(machine.system_id, comment=f"onboarding {wf.pk}: release before redeploy")
        return Wait("releasing before redeploy", machine.system_id, int(S.RELEASING), POLL)
    if status in (S.READY, S.ALLOCATED):
        tokens = payload.read_tokens(wf)
        if tokens is None:  # a retry or adopt moved the attempt on: tokens for this attempt
            tokens, fields = payload.mint_tokens(wf.pk, wf.attempt)
            ctx.save_now(**fields)  # before deploy: a fast node must find these hashes
            ctx.event("payload.rendered", f"payload re-rendered for attempt {wf.attempt}")
        user_data = payload.render(wf, policy, tokens)
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
        return Wait("deploying", machine.system_id, int(S.DEPLOYING), POLL)
    return Fail("unexpected_state", f"machine is {machine.status_name} in MAAS during deploy")


# -- 7. hardware sync -----------------------------------------------------------------------------


def hardware_sync(ctx: StageContext) -> Result:
    if not ctx.policy.hardware_sync_required:
        return Done("hardware sync not required by policy")
    machine = _machine(ctx)
    if not machine.enable_hw_sync:
        return Fail("hardware_sync", "MAAS shows hardware sync disabled on the deployed machine")
    if machine.last_sync is None:
        return Wait("waiting for the first hardware sync", check_in=60)
    return Done(f"hardware sync seeded at {machine.last_sync.isoformat()}")


# -- 8. enrollment --------------------------------------------------------------------------------


def enrollment(ctx: StageContext) -> Result:
    wf = ctx.wf
    if wf.enrolled_at and wf.enrolled_attempt == wf.attempt:
        return Done(f"node agent enrolled at {wf.enrolled_at.isoformat()}")
    return Wait("waiting for the node agent to enroll", check_in=POLL)


# -- 9. completion gates --------------------------------------------------------------------------


def complete(ctx: StageContext) -> Result:
    wf = ctx.wf
    machine = _machine(ctx)
    gates = {
        "maas_deployed": machine.status == S.DEPLOYED,
        "agent_started": wf.agent_started_at is not None,
        "enrolled": wf.enrolled_at is not None,
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


def reset(ctx: StageContext) -> Result:
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
        ctx.heartbeat("release")
        maas.release(machine.system_id, comment=f"restart-clean of onboarding {wf.pk}")
        return Wait("releasing before reset", machine.system_id, int(S.RELEASING), POLL)
    if wf.created_machine:
        maas.delete_machine(machine.system_id)
        ctx.event("maas.action", f"deleted machine {machine.system_id} this workflow created")
        return Done("MAAS progress undone", {"maas_system_id": "", "created_machine": False})
    return Done(f"machine left {machine.status_name} in MAAS (not created by this workflow)")


def cancel(ctx: StageContext) -> Result:
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
    S.DEPLOYED: "enrollment",
}


def adopt_stage(wf: Any) -> tuple[str, dict[str, Any]]:
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


STAGES = [
    Stage("preflight", preflight, ["GET node-facing URLs (not MAAS)"]),
    Stage(
        "discover",
        discover,
        [
            "GET machines/?hostname=",
            "GET machines/?op=power_parameters",
            "POST machines/ (create, only if no machine matches)",
        ],
    ),
    Stage("commission", commission, ["GET machine", "POST op=commission (unless Ready)"]),
    Stage(
        "storage_pxe",
        storage_pxe,
        [
            "POST op=set_storage_layout",
            "GET subnets/",
            "POST interface op=unlink_subnet/link_subnet (only if not AUTO on the PXE subnet)",
        ],
    ),
    Stage("payload", payload_stage, []),
    Stage(
        "deploy",
        deploy,
        [
            "GET machine",
            "POST op=deploy (unless Deployed)",
            "on a datasource failure: POST op=release then op=deploy",
        ],
    ),
    Stage("hardware_sync", hardware_sync, ["GET machine (if required)"]),
    Stage("enrollment", enrollment, []),
    Stage("complete", complete, ["GET machine"]),
]
RESET = Stage(
    "reset",
    reset,
    [
        "GET machine",
        "POST op=abort (if in progress)",
        "POST op=release (if allocated/deployed)",
        "DELETE machine (if this workflow created it)",
    ],
)
CANCEL = Stage(
    "cancel",
    cancel,
    [
        "GET machine",
        "POST op=abort (if in progress)",
        "POST op=release (if allocated)",
    ],
)

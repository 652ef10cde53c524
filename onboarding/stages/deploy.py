"""Stage 6, deploy: deploy once, classify a failure from this deployment's MAAS events, retry a
datasource failure within the policy.
"""

from __future__ import annotations

import re
from typing import Any

from maas_client.types import Event, Machine
from onboarding import payload
from onboarding.cloudconfig import PayloadRefused
from onboarding.stages.common import DEPLOYING, GET, POLL, Ctx, S, deploys, read_machine
from onboarding.stages.payload import tokens_gone
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

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


@stage(
    timeout=3600,
    calls=(
        GET,
        C("deploy", "unless Deployed"),
        C("events", "this deployment's, to classify a failure"),
        C("abort", "a datasource failure while still Deploying"),
        C("release", "before a redeploy (datasource failure, within deploy_retry_limit)"),
    ),
    expects=DEPLOYING,
    applies=deploys,
)
def deploy(ctx: Ctx) -> Result:
    wf, policy, maas = ctx.wf, ctx.policy, ctx.maas
    machine = read_machine(ctx)
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
            tokens_gone(ctx)
            tokens, fields = payload.mint_tokens(wf.pk, wf.attempt, region=wf.site.region)
            ctx.event("payload.rendered", f"payload re-rendered for attempt {wf.attempt}")
        try:
            user_data = payload.render(wf, policy, tokens, memo=ctx.memo)
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
        # the node will hold this attempt's tokens and report a new first boot, and this run's
        # wait at enrollment is a first boot's (written with the result: a report that lands
        # first changes the row, and the stage runs again)
        return Wait(
            "deploying",
            machine.system_id,
            int(S.DEPLOYING),
            DEPLOY_WATCH,
            {**NEW_FIRST_BOOT, "node_token_attempt": wf.attempt, "deployed_attempt": wf.attempt},
        )
    return Fail("unexpected_state", f"machine is {machine.status_name} in MAAS during deploy")

"""Decommission stages (docs/decommission.md). Each looks at MAAS first and acts once; its
declaration at the bottom of this file says everything else about it.

preflight → drain → release (erase per policy; on a failed erase, when policy allows: abort and
mark-broken, the machine left Broken) → redeploy (reimage: a child onboarding runs the
onboarding's own payload, deploy, enrollment and completion stages) or retire (full: delete
from MAAS) → complete.
Node rows change only inside ``ctx.locked()`` (our lease held) or in the engine's hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from maas_client.errors import MaasError, MaasNotFound
from maas_client.status import RELEASABLE, NodeStatus
from maas_client.types import Machine
from maas_domain.errors import Conflict
from maas_domain.models import Allocation, AllocationState, Node, NodeState
from maas_domain.models.sites import ProfileStatus
from maas_domain.services.guardrails import site_problems
from maas_domain.site_client import client_for_site
from maas_domain.work import WorkflowState
from onboarding.models import Onboarding
from onboarding.workflow import KIND as ONBOARDING
from workflows import verbs
from workflows.kinds import Call as C
from workflows.kinds import Stage, StageContext
from workflows.results import Done, Fail, Hold, Result, Wait
from workflows.scheduling import Start, start_workflow

from . import erase
from .models import Decommission, Mode

S = NodeStatus
W = WorkflowState
Ctx = StageContext[Decommission]
POLL = 600.0
ERASING = (S.DISK_ERASING,)


def _machine(ctx: Ctx) -> Machine:
    return ctx.machine(ctx.wf.maas_system_id)  # the site poll's listing, or a GET


def _comment(ctx: Ctx, what: str) -> str:
    return f"{what} (decommission {ctx.wf.pk}, {ctx.wf.mode})"


# -- 1. preflight ---------------------------------------------------------------------------------


def preflight(ctx: Ctx) -> Result:
    wf, policy = ctx.wf, ctx.policy
    problems = site_problems(wf.site)
    if wf.mode == Mode.STORAGE_CLEANUP and policy.erase_mode == "none":
        problems.append("policy erase_mode is none: storage cleanup needs quick or secure")
    if wf.mode == Mode.REIMAGE and (
        wf.profile is None or wf.profile.status != ProfileStatus.ACTIVE
    ):
        problems.append("reimage needs an active profile to deploy")
    held = list(
        Allocation.objects.filter(node_id=wf.node_id, state=AllocationState.ACTIVE).values(
            "id", "holder"
        )
    )
    if held:
        problems.append(
            "node has active allocations: "
            + ", ".join(f"{a['id']} ({a['holder']})" for a in held)
            + "; drain them or start again with force_release"
        )
    machine = _find_machine(ctx)
    if machine is None:
        problems.append(f"no MAAS machine matches {wf.hostname} (system id {wf.maas_system_id!r})")
    if problems:
        return Fail("preflight", "; ".join(problems), {"problems": problems})
    assert machine is not None
    ctx.observe(machine)
    return Done(
        f"preflight checks passed; erase mode {policy.erase_mode}",
        {"maas_system_id": machine.system_id, "erase_mode": policy.erase_mode},
    )


def _find_machine(ctx: Ctx) -> Machine | None:
    wf = ctx.wf
    if wf.maas_system_id:
        try:
            return _machine(ctx)
        except MaasNotFound:
            ctx.event("maas.observed", f"recorded machine {wf.maas_system_id} is gone from MAAS")
    found = ctx.maas.list_machines(hostnames=[wf.hostname])
    if len(found) > 1:
        ids = ", ".join(m.system_id for m in found)
        ctx.event("maas.observed", f"{len(found)} MAAS machines are named {wf.hostname}: {ids}")
        return None  # ambiguous: fail closed
    return found[0] if found else None


# -- 2. drain -------------------------------------------------------------------------------------


def drain(ctx: Ctx) -> Result:
    """The node leaves its pool before MAAS is touched."""
    with ctx.locked():
        node = Node.objects.select_for_update().get(pk=ctx.wf.node_id)
        if node.state == NodeState.DRAINING:
            return Done("node already draining")
        ours = node.state == NodeState.PROVISIONING and ctx.wf.reimage_onboarding_id
        if node.state not in (NodeState.ACTIVE, NodeState.QUARANTINED) and not ours:
            return Fail("node_state", f"node is {node.state}; it cannot be drained")
        before = node.state
        node.drain()
        node.save(update_fields=["state", "updated_at"])
    return Done(f"node drained from its pool (was {before})")


# -- 3. release with erase, and the fallback ------------------------------------------------------


def release(ctx: Ctx) -> Result:
    wf, policy, maas = ctx.wf, ctx.policy, ctx.maas
    machine = _machine(ctx)
    ctx.observe(machine)
    status, sid = machine.status, machine.system_id
    mode = wf.erase_mode or policy.erase_mode
    if ctx.data.get("erase_failed"):
        return _fallback(ctx, machine)
    # our erase runs as a release script: Releasing while wipe-disks runs (Disk erasing only
    # for a release whose one script is wipe-disks, which we no longer send)
    erasing = mode != "none" and (ctx.sent("release") or wf.release_requested)
    if status == S.DISK_ERASING or (status == S.RELEASING and erasing):
        # MAAS 3.5 never times a release's scripts out (docs/maas-api.md §4.3): our own clock
        seen = ctx.data.setdefault("erasing_since", timezone.now().isoformat())
        stuck_at = datetime.fromisoformat(seen) + timedelta(seconds=policy.erase_stuck_seconds)
        if timezone.now() >= stuck_at:
            return _erase_failed(
                ctx, machine, f"{status.label} for more than {policy.erase_stuck_seconds}s"
            )
        left = (stuck_at - timezone.now()).total_seconds() + 1
        return Wait("erasing disks", sid, int(status), min(POLL, left))
    if status == S.RELEASING:
        return Wait("releasing", sid, int(status), POLL)
    if status == S.FAILED_DISK_ERASING:
        return _erase_failed(ctx, machine, machine.status_message or machine.status_name)
    if status == S.FAILED_RELEASING and ctx.sent("release"):
        if erasing:  # wipe-disks failed, or the release after it: the evidence tells which
            report = _erase_evidence(ctx, mode)
            ctx.save_now(erase_evidence=report)
            if not report["erased"]:
                return _erase_failed(ctx, machine, _why(machine))
            return Fail(
                "release_failed",
                f"every disk was erased (evidence kept) but MAAS could not finish the release: "
                f"{_why(machine)}",
                updates={"erased": True},
            )
        return Fail("release_failed", f"MAAS could not release the machine: {_why(machine)}")
    if status == S.READY and (ctx.sent("release") or mode == "none" or wf.erased):
        return _released(ctx, mode)
    if status == S.READY:
        # MAAS erases only when it releases an allocated machine: take it, then release it.
        machine = maas.allocate(sid, comment=_comment(ctx, "allocate to erase its disks"))
        ctx.event(
            "maas.action",
            f"allocated the Ready machine so MAAS can erase its disks: {machine.status_name}",
        )
        status = machine.status
    if status in RELEASABLE:
        if ctx.sent("release"):
            return Wait("waiting for MAAS to start the release", sid, int(status), 30)
        before: dict[str, Any] = {"release_requested": True}
        if mode != "none":  # what the erase must account for, kept before it is sent
            disks = erase.disks_before(maas.machine_hardware(sid).disks)
            # the evidence must come from a run this release makes, not a kept older one
            runs = [r.id for r in maas.release_runs(sid)]
            before["erase_evidence"] = {
                "mode": mode,
                "disks": disks,
                "outcome": "requested",
                "runs_before": max(runs, default=0),
            }
        ctx.save_now(**before)
        answer = maas.release(
            sid,
            erase=mode != "none",
            secure_erase=mode == "secure",
            quick_erase=mode == "quick",
            # The erase's evidence: with wipe-disks alone MAAS runs it in Disk erasing and
            # keeps none of its output; one more entry in the script list (wipe-disks' own
            # tag) runs it in Releasing, which stores each disk's line (docs/decommission.md)
            scripts=[erase.WIPE_TAG] if mode != "none" else None,
            comment=_comment(ctx, "release"),
        )
        ctx.event(
            "maas.action",
            f"release sent ({'no erase' if mode == 'none' else mode + ' erase'}): "
            f"MAAS answered {answer.status_name}",
            erase_mode=mode,
            maas_status=answer.status_name,
        )
        return Wait("releasing", sid, int(answer.status), POLL)
    return Fail("unexpected_state", f"machine is {machine.status_name} in MAAS; cannot release it")


def _why(machine: Machine) -> str:
    return machine.status_message or machine.error_description or machine.status_name


def _released(ctx: Ctx, mode: str) -> Result:
    updates: dict[str, Any] = {}
    if mode != "none" and ctx.sent("release"):
        report = _erase_evidence(ctx, mode)
        updates["erase_evidence"] = report
        if not report["erased"]:
            missing = erase.not_erased(report) or ["MAAS listed no disk"]
            ctx.event("erase.unproven", f"no evidence of erase for: {', '.join(missing)}")
            return Hold(
                "not_erased",
                "MAAS released the machine but shows no evidence of erase for "
                f"{', '.join(missing)[:300]}: disks NOT known erased; node quarantined",
                {"erased": False, **updates},
            )
        ctx.event("erase.proven", f"{len(report['disks'])} disks erased, each by its own line")
    erased = None if mode == "none" else True
    if erased and ctx.wf.erased is not True:
        # a resumed workflow that finally erased: the node leaves quarantine for draining
        with ctx.locked():
            node = Node.objects.select_for_update().get(pk=ctx.wf.node_id)
            if node.state == NodeState.QUARANTINED:
                node.drain()
                node.save(update_fields=["state", "updated_at"])
    how = "disks erased" if erased else "no erase (policy erase_mode none)"
    if not ctx.sent("release") and ctx.wf.erased:
        how = "disks were erased earlier in this workflow"
    return Done(
        f"released: MAAS shows Ready; {how}", {"erased": erased or ctx.wf.erased, **updates}
    )


def _erase_evidence(ctx: Ctx, mode: str) -> dict[str, Any]:
    """Each disk MAAS listed before the release, with what the wipe's output says of it (a
    workflow that kept no list reads MAAS's disks now: MAAS keeps them across a release)."""
    sid = ctx.wf.maas_system_id
    kept = ctx.wf.erase_evidence or {}
    disks = kept.get("disks")
    if not disks:
        disks = erase.disks_before(ctx.maas.machine_hardware(sid).disks)
    runs = ctx.maas.release_runs(sid)
    if "runs_before" not in kept:  # a workflow that kept no mark: any kept run
        return erase.evidence(disks, runs, mode=mode)
    newer = [r for r in runs if r.id > int(kept["runs_before"])]
    return {**erase.evidence(disks, newer, mode=mode), "runs_before": kept["runs_before"]}


def _erase_failed(ctx: Ctx, machine: Machine, why: str) -> Result:
    ctx.data["erase_failed"] = why
    ctx.event(
        "erase.failed",
        f"disk erase failed: {why}",
        system_id=machine.system_id,
        maas_status=machine.status_name,
    )
    if not ctx.policy.release_fallback_allowed:
        return Hold(
            "erase_failed",
            f"disk erase failed ({why}) and policy forbids the no-erase fallback: machine left "
            f"{machine.status_name} in MAAS; disks NOT erased; node quarantined",
            {"erased": False},
        )
    ctx.event("fallback.started", "policy allows the fallback: abort, mark-broken")
    return _fallback(ctx, machine)


def _fallback(ctx: Ctx, machine: Machine) -> Result:
    """Stop the failed erase and take the machine out of MAAS's Ready pool: abort (if still
    erasing), then mark-broken, each once and each in the timeline with MAAS's answer. The
    machine stays Broken, never released without erase to Ready where anything allocating from
    MAAS could hand its unerased disks to the next tenant (docs/decommission.md)."""
    maas, sid, steps = ctx.maas, machine.system_id, ctx.data.setdefault("fallback", [])
    why = ctx.data["erase_failed"]
    for _ in range(4):
        status = machine.status
        if "abort" not in steps:
            steps.append("abort")
            if status in ERASING:
                machine = _step(
                    ctx, "abort", lambda: maas.abort(sid, comment=_comment(ctx, "abort"))
                )
            elif status == S.RELEASING:  # our erase's usual status, which MAAS cannot abort
                ctx.event("fallback.step", "abort: MAAS cannot abort a machine in Releasing")
            else:
                ctx.event("fallback.step", f"abort: nothing in flight (MAAS shows {status.label})")
        elif status in ERASING:
            return Wait("fallback: waiting for the erase to stop", sid, int(status), 30)
        elif status == S.BROKEN:
            return Hold(
                "erase_failed",
                f"disk erase failed ({why}); the fallback left the machine Broken in MAAS (out "
                "of the Ready pool): disks NOT erased; node quarantined",
                {"erased": False, "fallback_used": True},
            )
        elif "mark_broken" not in steps:
            steps.append("mark_broken")
            machine = _step(
                ctx,
                "mark-broken (keeps the unerased machine out of the Ready pool)",
                lambda: maas.mark_broken(sid, comment=_comment(ctx, "erase failed")),
            )
        else:
            return Hold(
                "erase_failed",
                f"disk erase failed ({why}) and MAAS did not mark the machine Broken: left "
                f"{status.label} in MAAS; disks NOT erased; node quarantined",
                {"erased": False, "fallback_used": True},
            )
    return Wait(f"fallback: waiting for MAAS ({machine.status_name})", sid, int(machine.status), 30)


def _step(ctx: Ctx, name: str, call: Callable[[], Machine]) -> Machine:
    try:
        answer = call()
    except MaasError as exc:
        ctx.event("fallback.step", f"{name}: MAAS refused: {exc.message}", error=exc.kind)
        return _machine(ctx)
    ctx.event(
        "fallback.step",
        f"{name}: MAAS answered {answer.status_name}",
        maas_status=answer.status_name,
    )
    return answer


# -- 4a. reimage: redeploy through the onboarding stages ------------------------------------------


def redeploy(ctx: Ctx) -> Result:
    """A child onboarding runs payload → deploy → hardware sync → enrollment → complete with
    new tokens: the deploy logic exists once. A retry of this stage starts a new child."""
    wf = ctx.wf
    child = (
        Onboarding.objects.filter(pk=wf.reimage_onboarding_id).first()
        if wf.reimage_onboarding_id
        else None
    )
    fresh = child is None or (
        child.state in (W.FAILED, W.CANCELLED) and wf.attempt > (wf.reimage_attempt or 0)
    )
    if fresh:
        child = _start_child(ctx)
        ctx.event(
            "reimage.started",
            f"redeploying through onboarding {child.pk} (conformance, acceptance, payload, deploy, "
            "enrollment, gates)",
            onboarding_id=child.pk,
        )
        return Wait(f"redeploying through onboarding {child.pk}", check_in=60)
    assert child is not None
    if child.state == W.SUCCEEDED:
        return Done(f"onboarding {child.pk} redeployed and enrolled the node")
    if child.state == W.FAILED:
        return Fail(
            "reimage",
            f"redeploy failed in onboarding {child.pk} at {child.stage}: {child.reason}",
            {"onboarding_id": child.pk, "onboarding_failure_class": child.failure_class},
        )
    if child.state == W.CANCELLED:
        return Fail("reimage", f"redeploy onboarding {child.pk} was cancelled")
    return Wait(f"onboarding {child.pk} is {child.state} at {child.stage}", check_in=60)


def _start_child(ctx: Ctx) -> Onboarding:
    """The redeploy onboarding, started at its conformance stage inside this workflow's
    admission slot (it runs at once), with its own tokens, timeline, audit row and started
    event; the storage layout and PXE link the first onboarding set are MAAS's still."""
    wf = ctx.wf
    with ctx.locked() as row:
        node = Node.objects.select_for_update().get(pk=wf.node_id)
        if node.state != NodeState.PROVISIONING:
            node.start_provisioning()
            node.save(update_fields=["state", "updated_at"])
        child = start_workflow(
            ONBOARDING,
            Onboarding(
                site=wf.site,
                profile=wf.profile,
                sku=node.sku,
                node=node,
                hostname=wf.hostname,
                ipmi_ip=node.ipmi_ip or "",
                maas_system_id=wf.maas_system_id,
                # the machine is judged against its SKU again (and tested, if policy asks)
                # before it is redeployed: a reimage never hands back a node that lost a GPU
                stage="conformance",
                checkpoint="commission",
                correlation_id=wf.correlation_id,
                parent_kind="decommission",
                parent_id=wf.pk,
            ),
            Start(
                actor=None,
                message=f"reimage of decommission {wf.pk}: redeploy with new tokens",
                audit_action="onboarding.start",
                reason=f"reimage of decommission {wf.pk}",
                event_data={"parent_kind": "decommission", "parent_id": wf.pk},
                run_now=True,
            ),
        )
        row.reimage_onboarding = child
        row.reimage_attempt = wf.attempt
        row.save(update_fields=["reimage_onboarding", "reimage_attempt", "updated_at"])
    wf.reimage_onboarding_id, wf.reimage_attempt = child.pk, wf.attempt
    return child


# -- 4b. full: remove from MAAS -------------------------------------------------------------------


def retire(ctx: Ctx) -> Result:
    wf = ctx.wf
    if not ctx.policy.delete_machine_on_full_decommission:
        return Done("machine left Ready in MAAS (policy keeps it)")
    try:
        ctx.maas.delete_machine(wf.maas_system_id)
    except MaasNotFound:
        return Done("machine already gone from MAAS", {"machine_deleted": True})
    ctx.event("maas.action", f"deleted machine {wf.maas_system_id} from MAAS")
    return Done("machine deleted from MAAS", {"machine_deleted": True})


# -- 5. complete ----------------------------------------------------------------------------------


def complete(ctx: Ctx) -> Result:
    wf = ctx.wf
    if wf.mode == Mode.STORAGE_CLEANUP and wf.erased is not True:
        return Hold("not_erased", "storage cleanup ended without a confirmed erase; quarantined")
    erased = {True: "disks erased", None: "no erase (policy)", False: "disks NOT erased"}
    return Done(f"{wf.mode} complete; {erased[wf.erased]}")


# -- operator-driven: restart-clean's reset and cancel --------------------------------------------


def reset(ctx: Ctx) -> Result:
    """Stop what MAAS is doing for us; the next attempt erases again from the top."""
    wf = ctx.wf
    if child := _cancel_child(wf, f"restart-clean of decommission {wf.pk}"):
        return Wait(f"waiting for onboarding {child} to cancel", check_in=30)
    try:
        machine = _machine(ctx)
    except MaasNotFound:
        return Fail("not_in_maas", f"machine {wf.maas_system_id} is gone from MAAS")
    _abort_in_flight(ctx, machine, "restart-clean")
    return Done(
        "reset: the next attempt starts from preflight",
        {"erased": None, "fallback_used": False, "release_requested": False},
    )


def cancel(ctx: Ctx) -> Result:
    wf = ctx.wf
    if child := _cancel_child(wf, f"decommission {wf.pk} cancelled"):
        return Wait(f"waiting for onboarding {child} to cancel", check_in=30)
    if not wf.maas_system_id:
        return Done("cancelled before MAAS was touched")
    machine = _machine(ctx)
    ctx.observe(machine)
    _abort_in_flight(ctx, machine, "cancel")
    return Done(f"cancelled; MAAS shows {machine.status_name}")


def _abort_in_flight(ctx: Ctx, machine: Machine, why: str) -> None:
    """Abort an erase or a deploy MAAS is running for us, once. Our erase runs in Releasing,
    which MAAS cannot abort: it runs on, and the timeline says so."""
    if ctx.sent("abort"):
        return
    if machine.status in (S.DISK_ERASING, S.DEPLOYING):
        ctx.maas.abort(machine.system_id, comment=_comment(ctx, why))
        ctx.event("maas.action", f"aborted {machine.status_name}")
    elif machine.status == S.RELEASING:
        ctx.event(
            "maas.observed",
            "MAAS cannot abort a machine in Releasing: the release (and its erase) runs on",
        )


def _cancel_child(wf: Decommission, reason: str) -> int | None:
    """Cancel an open redeploy onboarding; its id while it is still open (it wakes us when it
    ends), so two workflows never drive the same machine at once."""
    if wf.reimage_onboarding_id is None:
        return None
    child = Onboarding.objects.filter(pk=wf.reimage_onboarding_id).first()
    if child is None or not child.is_open:
        return None
    if child.state in verbs.VERBS["cancel"].sources:
        verbs.apply(ONBOARDING, child.pk, "cancel", actor=None, reason=reason)
    elif child.state == W.MANUAL_INTERVENTION:
        return None  # frozen by an operator: it drives nothing
    return child.pk


def adopt_stage(wf: Decommission) -> tuple[str, dict[str, Any]]:
    """Read MAAS now and name the stage that matches (for the adopt verb)."""
    client = client_for_site(wf.site)
    try:
        machine = client.get_machine(wf.maas_system_id)
    except MaasNotFound:
        if wf.mode == Mode.FULL:
            return "complete", {"maas_status": "missing", "adopted_stage": "complete"}
        raise Conflict(
            "cannot adopt: the machine is gone from MAAS", current_state=wf.state
        ) from None
    finally:
        client.close()
    if machine.status == S.READY and (wf.erased or wf.erase_mode == "none"):
        stage = {Mode.REIMAGE: "redeploy", Mode.FULL: "retire"}.get(Mode(wf.mode), "complete")
    elif machine.status == S.DEPLOYED and wf.mode == Mode.REIMAGE and wf.reimage_onboarding_id:
        stage = "redeploy"
    elif machine.status in RELEASABLE or machine.status in (
        S.READY,
        S.RELEASING,
        S.DISK_ERASING,
    ):
        stage = "release"
    else:
        raise Conflict(
            f"cannot adopt: MAAS shows {machine.status_name}; fix it in MAAS, or restart-clean",
            current_state=wf.state,
            maas_status=machine.status_name,
        )
    return stage, {"maas_status": machine.status_name, "adopted_stage": stage}


def _mode(*modes: str) -> Callable[[Decommission], bool]:
    return lambda wf: wf.mode in modes


# What MAAS may show while a decommission releases or retires a machine (reconciliation).
RELEASING = frozenset(
    {
        S.DEPLOYED,
        S.ALLOCATED,
        S.DEPLOYING,
        S.FAILED_DEPLOYMENT,
        S.RELEASING,
        S.FAILED_RELEASING,
        S.DISK_ERASING,
        S.FAILED_DISK_ERASING,
        S.READY,
        S.NEW,
        S.BROKEN,
    }
)

GET = C("get_machine")
ABORT = C("abort", "if erasing or deploying")
CHILD = "by the child onboarding, from its conformance stage"
STAGES: list[Stage[Decommission]] = [
    Stage(
        "preflight",
        preflight,
        300,
        (GET, C("list_machines", "by hostname, when no MAAS system id is recorded")),
    ),
    Stage("drain", drain, 600),
    Stage(
        "release",
        release,
        3600,
        (
            GET,
            C("allocate", "only if Ready and an erase is required"),
            C("release", "with the policy's erase mode"),
            C("machine_hardware", "the disks to account for, before an erase is sent"),
            C("release_runs", "the newest run before the release; its wipe's lines, after it"),
            C("abort", "a failed or stuck erase, policy permitting"),
            C("mark_broken", "then, instead of releasing unerased disks"),
        ),
        expects=RELEASING,
    ),
    Stage(
        "redeploy",
        redeploy,
        10800,
        (C("deploy", CHILD), C("events", CHILD), C("release", CHILD), C("abort", CHILD)),
        applies=_mode(Mode.REIMAGE),
    ),
    Stage(
        "retire",
        retire,
        600,
        (C("delete_machine", "unless policy keeps it"),),
        expects=RELEASING,
        machine_may_vanish=True,
        applies=_mode(Mode.FULL),
    ),
    Stage("complete", complete, 300, machine_may_vanish=True),
]
RESET: Stage[Decommission] = Stage("reset", reset, None, (GET, ABORT), machine_may_vanish=True)
CANCEL: Stage[Decommission] = Stage("cancel", cancel, None, (GET, ABORT))

"""Stage 3, release with erase per policy, and the fallback of a failed erase: abort and
mark-broken, never released to Ready with unerased disks (docs/decommission.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from maas_client.errors import MaasError
from maas_client.status import RELEASABLE
from maas_client.types import Machine
from maas_domain.models import Node, NodeState
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Hold, Result, Wait

from .. import erase
from .common import ERASING, GET, POLL, RELEASING, Ctx, S, comment, machine_of


@stage(
    timeout=3600,
    calls=(
        GET,
        C("allocate", "only if Ready and an erase is required"),
        C("release", "with the policy's erase mode"),
        C("machine_hardware", "the disks to account for, before an erase is sent"),
        C("release_runs", "the newest run before the release; its wipe's lines, after it"),
        C("abort", "a failed or stuck erase, policy permitting"),
        C("mark_broken", "then, instead of releasing unerased disks"),
    ),
    expects=RELEASING,
)
def release(ctx: Ctx) -> Result:
    wf, policy, maas = ctx.wf, ctx.policy, ctx.maas
    machine = machine_of(ctx)
    ctx.observe(machine)
    status, sid = machine.status, machine.system_id
    mode = wf.erase_mode or policy.erase_mode
    if ctx.data.get("erase_failed"):
        return _fallback(ctx, machine)
    if ctx.data.get("unproven"):
        return _out_of_the_pool(ctx, machine)
    # our erase runs as a release script: Releasing while wipe-disks runs (Disk erasing only
    # for a release whose one script is wipe-disks, which we no longer send)
    erasing = mode != "none" and (ctx.sent("release") or wf.release_requested)
    if (moving := _in_flight(ctx, machine, mode, erasing=erasing)) is not None:
        return moving
    if status == S.READY and (ctx.sent("release") or mode == "none" or wf.erased):
        return _released(ctx, mode)
    if status == S.READY:
        # MAAS erases only when it releases an allocated machine: take it, then release it.
        machine = maas.allocate(sid, comment=comment(ctx, "allocate to erase its disks"))
        ctx.event(
            "maas.action",
            f"allocated the Ready machine so MAAS can erase its disks: {machine.status_name}",
        )
        status = machine.status
    if status in RELEASABLE:
        if ctx.sent("release"):
            return Wait("waiting for MAAS to start the release", sid, int(status), 30)
        return _send_release(ctx, sid, mode)
    return Fail("unexpected_state", f"machine is {machine.status_name} in MAAS; cannot release it")


def _in_flight(ctx: Ctx, machine: Machine, mode: str, *, erasing: bool) -> Result | None:
    """What a release in flight, or its failure, decides (None: it is not in flight)."""
    status = machine.status
    if status == S.DISK_ERASING or (status == S.RELEASING and erasing):
        return _erasing(ctx, machine)
    if status == S.RELEASING:
        return Wait("releasing", machine.system_id, int(status), POLL)
    if status == S.FAILED_DISK_ERASING:
        return _erase_failed(ctx, machine, machine.status_message or machine.status_name)
    if status == S.FAILED_RELEASING and ctx.sent("release"):
        return _release_failed(ctx, machine, mode, erasing=erasing)
    return None


def _erasing(ctx: Ctx, machine: Machine) -> Result:
    """The erase runs: wait, on our own clock (MAAS 3.5 never times a release's scripts out:
    docs/maas-api.md §4.3); past ``erase_stuck_seconds`` it counts as failed."""
    policy, status = ctx.policy, machine.status
    seen = ctx.data.setdefault("erasing_since", timezone.now().isoformat())
    stuck_at = datetime.fromisoformat(seen) + timedelta(seconds=policy.erase_stuck_seconds)
    if timezone.now() >= stuck_at:
        return _erase_failed(
            ctx, machine, f"{status.label} for more than {policy.erase_stuck_seconds}s"
        )
    left = (stuck_at - timezone.now()).total_seconds() + 1
    return Wait("erasing disks", machine.system_id, int(status), min(POLL, left))


def _send_release(ctx: Ctx, sid: str, mode: str) -> Result:
    """Release with the erase policy names, once; what the erase must account for (the disks,
    the newest release run so far) kept before it is sent."""
    maas = ctx.maas
    before: dict[str, Any] = {"release_requested": True}
    if mode != "none":
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
        # The erase's evidence: with wipe-disks alone MAAS runs it in Disk erasing and keeps
        # none of its output; one more entry in the script list (wipe-disks' own tag) runs it
        # in Releasing, which stores each disk's line (docs/decommission.md)
        scripts=[erase.WIPE_TAG] if mode != "none" else None,
        comment=comment(ctx, "release"),
    )
    ctx.event(
        "maas.action",
        f"release sent ({'no erase' if mode == 'none' else mode + ' erase'}): "
        f"MAAS answered {answer.status_name}",
        erase_mode=mode,
        maas_status=answer.status_name,
    )
    return Wait("releasing", sid, int(answer.status), POLL)


def _release_failed(ctx: Ctx, machine: Machine, mode: str, *, erasing: bool) -> Result:
    """Releasing failed: after an erase, wipe-disks failed or the release after it did; the
    evidence tells which."""
    if not erasing:
        return Fail("release_failed", f"MAAS could not release the machine: {_why(machine)}")
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
            ctx.data["unproven"] = ", ".join(missing)[:300]
            ctx.save_now(erase_evidence=report)
            return _out_of_the_pool(ctx, machine_of(ctx))
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


def _out_of_the_pool(ctx: Ctx, machine: Machine) -> Result:
    """MAAS released the machine to Ready, where anything allocating from MAAS could hand its
    unerased disks to the next tenant: allocate it back (MAAS marks broken only for its owner),
    then mark it Broken naming the disks, each once (docs/decommission.md, "Erase evidence")."""
    sid, missing = machine.system_id, ctx.data["unproven"]
    why = f"disks NOT known erased: {missing}"
    if machine.status == S.READY and not ctx.sent("allocate"):
        machine = ctx.maas.allocate(sid, comment=comment(ctx, "allocate to mark it broken"))
        ctx.event(
            "maas.action", f"allocated the Ready machine to mark it broken: {machine.status_name}"
        )
    if machine.status != S.BROKEN and not ctx.sent("mark_broken"):
        machine = _step(
            ctx,
            "mark-broken (keeps the unerased machine out of the Ready pool)",
            lambda: ctx.maas.mark_broken(sid, comment=comment(ctx, why)),
        )
    left = "Broken in MAAS" if machine.status == S.BROKEN else f"{machine.status_name} in MAAS"
    return Hold(
        "not_erased",
        f"MAAS released the machine but shows no evidence of erase for {missing}: disks NOT "
        f"known erased; machine left {left}; node quarantined",
        {"erased": False},
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
                    ctx, "abort", lambda: maas.abort(sid, comment=comment(ctx, "abort"))
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
                lambda: maas.mark_broken(sid, comment=comment(ctx, "erase failed")),
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
        return machine_of(ctx)
    ctx.event(
        "fallback.step",
        f"{name}: MAAS answered {answer.status_name}",
        maas_status=answer.status_name,
    )
    return answer

"""Stages 7 to 9: hardware sync (when policy requires it), enrollment (the node reports and enrolls
with its tokens) and the completion gates.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from maas_domain.models import NodeState
from onboarding.stages.common import DEPLOYING, GET, POLL, Ctx, S, deploys, read_machine
from onboarding.stages.conformance import conformance
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

# -- 7. hardware sync -----------------------------------------------------------------------------


@stage(
    timeout=1800,
    calls=(C("get_machine", "if required"),),
    expects=DEPLOYING,
    applies=deploys,
)
def hardware_sync(ctx: Ctx) -> Result:
    if not ctx.policy.hardware_sync_required:
        return Done("hardware sync not required by policy")
    machine = read_machine(ctx)
    if not machine.enable_hw_sync:
        return Fail("hardware_sync", "MAAS shows hardware sync disabled on the deployed machine")
    if machine.last_sync is None:
        return Wait("waiting for the first hardware sync", check_in=60)
    return Done(f"hardware sync seeded at {machine.last_sync.isoformat()}")


# -- 8. enrollment --------------------------------------------------------------------------------


NODE_FAILURES = {"site_bundle": "the site bootstrap bundle", "agent_start": "the node agent"}


@stage(timeout=1800, expects=(S.DEPLOYED, S.DEPLOYING), applies=deploys)
def enrollment(ctx: Ctx) -> Result:
    """Wait for the node: its reports (site bundle ran, agent started) and its enrollment. A
    failure the node reported ends the wait at once, with the part that failed as the class.
    A run that redeployed nothing waits only for the node's agent to check in, and only as
    long as policy ``rerun_enrollment_window`` says (``_undeployed``)."""
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
    if wf.deployed_attempt != wf.attempt:
        return _undeployed(ctx)
    return Wait("waiting for the node agent to enroll", check_in=POLL)


def _undeployed(ctx: Ctx) -> Result:
    """This run deployed no payload (MAAS showed the machine Deployed: a rerun, a retry past
    deploy), so nothing boots with this attempt's tokens: only the node's running agent can take
    them, at a check-in (``onboarding/node.py``), and enroll again with them. docs/onboarding.md
    ("Reruns and adopt"): it completes when the agent enrolls with them, or **adopts** the node's
    standing enrollment when the agent checked in with them within the window (it holds this
    attempt's tokens) and had enrolled with the payload the machine runs; otherwise, once the
    window has passed since the stage began, it ends with ``agent_unconfirmed`` and what was
    seen. It never waits longer, and sends MAAS nothing."""
    wf = ctx.wf
    now = timezone.now()
    window = timedelta(seconds=ctx.policy.rerun_enrollment_window)
    checked_in = wf.agent_checkin_at if wf.agent_checkin_attempt == wf.attempt else None
    recent = checked_in is not None and now - checked_in <= window
    standing = _standing_enrollment(wf)
    if recent and standing is not None and checked_in is not None:
        return Done(
            f"adopted the node's enrollment: its agent checked in with attempt {wf.attempt}'s "
            f"tokens at {checked_in.isoformat()} and enrolled with the payload the machine runs "
            f"(attempt {standing}); it did not enroll again",
            {"enrollment_adopted_at": now},
        )
    began = wf.stage_started_at or now
    if now - began >= window:
        return _unconfirmed(ctx, checked_in, standing)
    left = (window - (now - began)).total_seconds()
    return Wait(
        f"waiting for the node's agent to check in for attempt {wf.attempt}'s tokens (this run "
        f"redeployed nothing; at most {int(window.total_seconds())}s)",
        check_in=max(1.0, min(POLL, left + 1)),
    )


def _standing_enrollment(wf: Any) -> int | None:
    """The attempt whose tokens the node's agent last enrolled with, if that was after MAAS
    last deployed the machine (the agent that runs now is one that enrolled), else None."""
    enrolled = (
        wf.events.filter(kind="node.enrolled", attempt__gte=wf.deployed_attempt or 0)
        .order_by("-attempt")
        .values_list("attempt", flat=True)
        .first()
    )
    return int(enrolled) if enrolled is not None else None


def _unconfirmed(ctx: Ctx, checked_in: Any, standing: int | None) -> Fail:
    wf = ctx.wf
    window = ctx.policy.rerun_enrollment_window
    if checked_in is not None:
        seen = (
            f"its agent took attempt {wf.attempt}'s tokens (checked in with them at "
            f"{checked_in.isoformat()}) but never enrolled with the payload the machine runs, "
            "so there is no enrollment to adopt"
        )
    elif wf.node_token_attempt == wf.attempt:
        seen = (
            f"its agent was handed attempt {wf.attempt}'s tokens at a check-in but has neither "
            "enrolled nor checked in with them since"
        )
    elif wf.agent_checkin_at is not None:
        seen = (
            f"its agent has not checked in since {wf.agent_checkin_at.isoformat()} (with attempt "
            f"{wf.agent_checkin_attempt}'s tokens)"
        )
    else:
        seen = "its agent has never checked in"
    return Fail(
        "agent_unconfirmed",
        f"this run redeployed nothing (MAAS shows the machine as deployed by attempt "
        f"{wf.deployed_attempt or '?'}), so only the node's agent can take attempt "
        f"{wf.attempt}'s tokens; within {window}s (policy rerun_enrollment_window) {seen}. "
        "Nothing was changed: the node and its machine are as they were. Restart the agent and "
        "rerun, or reimage the node.",
        {
            "window": window,
            "deployed_attempt": wf.deployed_attempt,
            "node_token_attempt": wf.node_token_attempt,
            "agent_checkin_at": wf.agent_checkin_at.isoformat() if wf.agent_checkin_at else None,
            "agent_checkin_attempt": wf.agent_checkin_attempt,
            "standing_enrollment": standing,
        },
    )


# -- 9. completion gates --------------------------------------------------------------------------


@stage(
    timeout=300,
    calls=(
        GET,
        C("machine_hardware", "only if the machine was never judged (adopted past it)"),
        C("node_devices", "the same, if the SKU states GPUs"),
        C("events", "the same, on a failure"),
    ),
    expects=(S.DEPLOYED,),
    applies=deploys,
)
def complete(ctx: Ctx) -> Result:
    """Every gate of docs/onboarding.md ("Completion gates"), each a separate fact of this run.
    A workflow that never judged its machine (adopted past the conformance stage, or started
    before it existed) judges it here: no node goes active unjudged."""
    wf = ctx.wf
    judged: dict[str, Any] = {}
    if not wf.hardware_report:
        checked = conformance(ctx)
        if not isinstance(checked, Done):
            return checked
        wf.hardware_report = judged["hardware_report"] = checked.updates["hardware_report"]
    machine = read_machine(ctx)
    node = wf.node.state if wf.node_id and wf.node is not None else None  # loaded with the row
    adopted = wf.enrollment_adopted_at is not None
    gates = {
        "maas_deployed": machine.status == S.DEPLOYED,
        "site_bundle": not wf.site_bundle_version or wf.site_bundle_done_at is not None,
        # an adopted enrollment (a run that redeployed nothing): the agent runs, enrolled with
        # the payload the machine runs, and checked in holding this attempt's tokens
        "agent_started": wf.agent_started_at is not None or adopted,
        "enrolled": (wf.enrolled_at is not None and wf.enrolled_attempt is not None) or adopted,
        "node_row": node in (NodeState.PROVISIONING, NodeState.ACTIVE),
        "current_attempt": wf.enrolled_attempt == wf.attempt == wf.token_attempt
        or (adopted and wf.agent_checkin_attempt == wf.attempt == wf.token_attempt),
        # the machine was judged against its SKU (conformant, or policy said warn)
        "hardware_checked": bool(wf.hardware_report)
        and (
            wf.hardware_report.get("conformant") is True or wf.hardware_report.get("mode") == "warn"
        ),
    }
    if ctx.policy.acceptance_scripts:
        gates["acceptance_passed"] = wf.acceptance_report.get("passed") is True
    failed = [name for name, ok in gates.items() if not ok]
    if failed:
        return Fail(
            "completion_gate", f"completion gates not met: {', '.join(failed)}", {"gates": gates}
        )
    return Done("all completion gates hold", {"completed_at": timezone.now(), **judged})

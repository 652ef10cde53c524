"""Stages 7 to 9: hardware sync (when policy requires it), enrollment (the node reports and enrolls
with its tokens) and the completion gates.
"""

from __future__ import annotations

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
    gates = {
        "maas_deployed": machine.status == S.DEPLOYED,
        "site_bundle": not wf.site_bundle_version or wf.site_bundle_done_at is not None,
        "agent_started": wf.agent_started_at is not None,
        "enrolled": wf.enrolled_at is not None and wf.enrolled_attempt is not None,
        "node_row": node in (NodeState.PROVISIONING, NodeState.ACTIVE),
        "current_attempt": wf.enrolled_attempt == wf.attempt == wf.token_attempt,
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

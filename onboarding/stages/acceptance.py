"""Stage 3c, acceptance: the testing scripts infra registered in MAAS (a GPU burn-in, NCCL, an
RDMA loopback, …), named by policy ``acceptance_scripts``, run on the machine through MAAS
(``op=test``) and every result, per script and per device, must pass (docs/hardware.md,
"Acceptance tests"). The product never uploads or runs anything else on a node.

Fail closed: a failed, timed-out or aborted result fails the onboarding (``acceptance_failed``;
the node is quarantined with the evidence) naming each failing script and device with its exit
status and a bounded, redacted excerpt of its output; a run MAAS has no result for never passes.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from maas_client.hardware import RunResult, ScriptRun
from maas_domain import redaction
from onboarding.models import Onboarding
from onboarding.stages.common import GET, POLL, Ctx, S, read_machine, recent_maas_events
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

PASSING = frozenset({"Passed", "Skipped", "Degraded"})  # MAAS's runner decides by exit status
RUNNING = frozenset(
    {"Pending", "Running", "Installing dependencies", "Applying custom network configuration"}
)
EXCERPT_LINES = 20
EXCERPT_CHARS = 1000


def acceptance_applies(wf: Onboarding) -> bool:
    return bool(wf.profile.effective_policy().acceptance_scripts)


@stage(
    timeout=14400,  # a GPU burn-in and an NCCL run take hours
    calls=(
        GET,
        C("test", "policy's acceptance_scripts with acceptance_parameters"),
        C("testing_run", "the results per script and device, with output"),
        C("events", "on a failure, for the evidence"),
    ),
    expects=(S.READY, S.TESTING, S.FAILED_TESTING),
    applies=acceptance_applies,
)
def acceptance(ctx: Ctx) -> Result:
    scripts = list(ctx.policy.acceptance_scripts)
    machine = read_machine(ctx)
    ctx.observe(machine)
    sid = machine.system_id
    waiting = f"running acceptance tests ({', '.join(scripts)}) on the machine"
    if machine.status == S.TESTING:
        return Wait(waiting, sid, int(S.TESTING), POLL)
    if not ctx.sent("test"):
        if machine.status not in (S.READY, S.FAILED_TESTING):
            return Fail(
                "unexpected_state", f"machine is {machine.status_name}; acceptance needs Ready"
            )
        ctx.maas.test(
            sid, testing_scripts=scripts, parameters=dict(ctx.policy.acceptance_parameters)
        )
        ctx.event("maas.action", f"acceptance tests started: {', '.join(scripts)}", scripts=scripts)
        return Wait(waiting, sid, int(S.TESTING), POLL)
    run = ctx.maas.testing_run(sid)
    results = run.results if run is not None else ()
    if any(r.status_name in RUNNING for r in results) and machine.status != S.FAILED_TESTING:
        return Wait(waiting, sid, int(machine.status), POLL)
    report = _report(ctx.wf, scripts, run)
    failed = [r for r in results if r.status_name not in PASSING]
    if results and not failed and machine.status != S.FAILED_TESTING:
        ctx.event(
            "acceptance.passed",
            f"acceptance tests passed: {len(results)} results of {', '.join(scripts)}",
            results=len(results),
        )
        return Done("acceptance tests passed", {"acceptance_report": report})
    if not results:
        why = f"MAAS shows no result of {', '.join(scripts)} (are they registered testing scripts?)"
    else:
        why = "; ".join(_one_line(r) for r in failed) or f"MAAS shows {machine.status_name}"
    ctx.event("acceptance.failed", why, failed=[r.name for r in failed])
    report["maas_events"] = recent_maas_events(ctx, sid)
    return Fail(
        "acceptance_failed",
        f"acceptance tests failed: {why}",
        {"failed": sorted({r.name for r in failed})},
        updates={"acceptance_report": report},
    )


def _report(wf: Onboarding, scripts: list[str], run: ScriptRun | None) -> dict[str, Any]:
    results = run.results if run is not None else ()
    return {
        "scripts": scripts,
        "attempt": wf.attempt,
        "run_id": run.id if run is not None else None,
        "checked_at": timezone.now().isoformat(),
        "passed": bool(results) and all(r.status_name in PASSING for r in results),
        "results": [_result(r) for r in results],
    }


def _result(r: RunResult) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "script": r.name,
        "device": r.device,
        "device_serial": r.device_serial,
        "status": r.status_name,
        "exit_status": r.exit_status,
        "runtime": r.runtime,
        "passed": r.status_name in PASSING,
    }
    if not entry["passed"]:
        entry["output_excerpt"] = excerpt(r.output)
    return entry


def excerpt(output: str) -> str:
    """The end of a script's output as it may be stored and shown: its last lines, at most
    ``EXCERPT_CHARS``, secret shapes blanked (an infra script may print a token)."""
    tail = "\n".join(output.strip().splitlines()[-EXCERPT_LINES:])
    return redaction.redact_text(tail)[-EXCERPT_CHARS:]


def _one_line(r: RunResult) -> str:
    where = f" on {r.device}" if r.device else ""
    status = f" (exit {r.exit_status})" if r.exit_status is not None else ""
    last = excerpt(r.output).splitlines()[-1:] or ["(no output)"]
    return f"{r.name}{where} {r.status_name.lower()}{status}: {last[0][:160]}"

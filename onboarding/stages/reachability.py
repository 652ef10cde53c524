"""Stage 4b, reachability from the node's own network: an infra-owned testing script fetches the
node-facing URLs.
"""

from __future__ import annotations

from maas_client.hardware import Script
from maas_domain import redaction, urlsafety
from onboarding.models import Onboarding
from onboarding.stages.common import GET, POLL, Ctx, S, read_machine
from onboarding.stages.preflight import fetch_targets
from onboarding.stages.storage_pxe import first_deploy
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait

# -- 4b. reachability from the node's own network -------------------------------------------------


def reachability_applies(wf: Onboarding) -> bool:
    """Policy names a script, and the node's network is new to us (a reimage's redeploy
    reuses the network its first onboarding checked)."""
    return bool(wf.profile.effective_policy().reachability_script) and first_deploy(wf)


@stage(
    timeout=1800,
    calls=(
        GET,
        C("testing_scripts", "the script's url parameter, before the test is sent"),
        C("test", "the policy's testing script, node-facing URLs"),
        C("script_results"),
    ),
    expects=(S.READY, S.TESTING, S.FAILED_TESTING),
    applies=reachability_applies,
)
def reachability(ctx: Ctx) -> Result:
    """The infra-owned testing script policy names runs on the machine (MAAS ``op=test``) with
    the URLs the first boot will fetch; its result, read from MAAS, decides before deploy
    (docs/onboarding.md, "Predeploy checks")."""
    maas, script = ctx.maas, ctx.policy.reachability_script
    machine = read_machine(ctx)
    ctx.observe(machine)
    sid = machine.system_id
    if machine.status == S.TESTING:
        return Wait(f"running {script} on the machine", sid, int(S.TESTING), POLL)
    if not ctx.sent("test"):
        if machine.status not in (S.READY, S.FAILED_TESTING):
            return Fail(
                "unexpected_state", f"machine is {machine.status_name}; the check needs Ready"
            )
        urls = [url for _, url in fetch_targets(ctx)]
        if problem := url_parameter_problem(maas.testing_scripts(), script, urls):
            return Fail("reachability_script", problem, {"script": script})
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
    output = _shown_output(found.output, [url for _, url in fetch_targets(ctx)])
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


def url_parameter_problem(scripts: list[Script], name: str, urls: list[str]) -> str:
    """What real MAAS would do with ``<name>_url=<urls joined by commas>``, when it is not a
    check of every URL (docs/onboarding.md, "Predeploy checks"): a script MAAS lacks; a script
    without a ``url`` parameter (MAAS drops the value and the test checks nothing); several URLs
    to a ``url`` parameter without ``allow_list`` (MAAS 3.5 takes one URL there: host:port URLs
    joined by a comma are refused, URLs with paths pass as one URL; recorded against MAAS
    3.5.10); a URL that has a comma of its own (the list is split on commas)."""
    script = next((s for s in scripts if s.name == name), None)
    if script is None:
        return f"MAAS has no testing script {name}: infra registers it (policy names it)"
    param = script.parameters.get("url")
    if param is None or param.get("type") != "url":
        return (
            f"testing script {name} declares no url parameter: MAAS would drop the URLs and "
            "the test would check nothing"
        )
    if len(urls) > 1 and not param.get("allow_list"):
        return (
            f"testing script {name} declares its url parameter without allow_list: MAAS takes "
            f"one URL there, and the node must reach {len(urls)}; declare allow_list: true in "
            "the script's metadata (MAAS's internet-connectivity does)"
        )
    if any("," in url for url in urls):
        return "a node-facing URL has a comma, and MAAS splits the url list on commas"
    return ""


def _shown_output(output: str, urls: list[str]) -> str:
    """The script's output as it may be stored (timeline, reason, events): the URLs it was given
    shown without their query (a presigned bundle URL's signature), other secret shapes blanked."""
    for url in urls:
        output = output.replace(url, urlsafety.display(url))
    return redaction.redact_text(output.strip())

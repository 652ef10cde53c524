"""``maasctl onboardings`` and ``maasctl decommissions``: list, show, timeline (oldest first:
docs/cli.md, "Timelines"), watch and the recovery verbs, written once for both workflow
kinds."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from maasctl import output, watch
from maasctl.cli import (
    FAILED,
    INTERRUPTED,
    STATE,
    WF_COLUMNS,
    body_of,
    confirm,
    cut,
    fail,
    host_of,
    listing,
    send,
    show,
    site_id,
)
from maasctl.options import All, DryRun, Interval, Limit, WorkflowId, Yes
from maasctl.output import clean
from maasctl.verbs import DESTRUCTIVE, NEEDS_CONFIRM, VERBS


def watch_workflow(kind: str, pk: int, interval: float) -> None:
    try:
        wf = watch.workflow(lambda: STATE.api.get(f"/{kind}/{pk}", diagnostics="false"),
                            interval=interval)  # fmt: skip
    except KeyboardInterrupt:
        raise fail(f"stopped watching; {kind[:-1]} {pk} goes on "
                   f"(maasctl {kind} watch {pk})", INTERRUPTED) from None  # fmt: skip
    show(wf, WF_COLUMNS)
    if wf["state"] != "succeeded":
        if STATE.fmt == "table" and wf.get("maas_system_id"):
            # what MAAS says of it now: one read of MAAS, only for a workflow that stopped
            maas_view(kind, pk, STATE.api.get(f"/{kind}/{pk}", diagnostics="refresh"))
        raise typer.Exit(FAILED)


INSTALL_TAIL = 20  # lines of MAAS's installation output shown for a workflow that stopped
QUIET_STATES = ("succeeded", "pending", "running", "waiting", "cancelling", "cancelled")


def maas_view(kind: str, pk: int, data: dict[str, Any], *, status_lines: bool = True) -> None:
    """What MAAS says of a workflow's machine (docs/cli.md, "A failed workflow"): its status and
    message, its error, its latest warnings and errors, and the last lines of the installation
    output, when MAAS was asked in the last minute; else how to ask, with maasctl's own flag."""
    diag = data.get("diagnostics")
    if not diag:
        return
    if not diag.get("available"):
        if diag.get("fetched_at") is None:  # not asked in the last minute: say how
            output.warn(f"MAAS's view of {clean(data.get('hostname', ''))} (its status, events "
                        "and installation log): "
                        f"maasctl {kind} show {pk} --diagnostics refresh")  # fmt: skip
        else:
            output.warn(f"MAAS's view is not available: {clean(diag.get('detail', ''))}")
        return
    if status_lines:  # (``show`` has them in its diagnostics table)
        status = clean(diag.get("status") or "?")
        message = clean(diag.get("status_message") or "")
        output.say(f"MAAS says: {status}" + (f" ({message})" if message else ""))
        if diag.get("error_description"):
            output.say(f"MAAS error: {clean(diag['error_description'])}")
    bad = [e for e in diag.get("events") or [] if e.get("level") in ("ERROR", "WARNING")]
    for event in bad[:3]:
        when, level = clean(event.get("created", "")), clean(event.get("level", ""))
        what, text = clean(event.get("type", "")), clean(event.get("description", ""))
        output.say(f"  {when} {level} {what}: {text}")
    lines = [line for line in str(diag.get("installation_output") or "").splitlines() if line]
    if lines:
        tail = lines[-INSTALL_TAIL:]
        output.say(f"installation output, the last {len(tail)} of {len(lines)} lines:")
        for line in tail:
            output.say(f"  {clean(line)}")


def workflow_commands(kind: str, noun: str) -> typer.Typer:
    group = typer.Typer(help=f"{noun.capitalize()}s: list, show, watch, recovery verbs.")

    @group.command("list")
    def list_(
        site: Annotated[str | None, typer.Option(help="Site id or name.")] = None,
        state: Annotated[list[str] | None, typer.Option(help="State (repeat).")] = None,
        search: Annotated[str | None, typer.Option(help="Hostname contains.")] = None,
        limit: Limit = 100,
        every: All = False,
    ) -> None:
        params = body_of(site=site_id(site) if site else None, state=state, search=search)
        page = STATE.api.pages(f"/{kind}", limit=None if every else limit, **params)
        listing(page, WF_COLUMNS, noun=kind)

    @group.command("show")
    def show_(
        pk: WorkflowId,
        diagnostics: Annotated[str, typer.Option(help="cached, refresh or false.")] = "cached",
    ) -> None:
        data = STATE.api.get(f"/{kind}/{pk}", diagnostics=diagnostics)
        if STATE.fmt != "table":
            show(data)
            return
        show(data, (*WF_COLUMNS, "maas_system_id", "allowed_verbs", "created_at",
                    "finished_at", "timeline_count"))  # fmt: skip
        latest, total = data["timeline"][-20:], int(data.get("timeline_count", 0))
        title = f"timeline: the latest {len(latest)} of {total} entries, oldest first"
        show(latest, ("at", "kind", "stage", "attempt", "message"), title=title)
        if len(latest) < total:
            output.warn(f"every entry: maasctl {kind} timeline {pk} --all")
        reports(data)
        diag = data.get("diagnostics")
        if diag and diag.get("available"):
            age = diag.get("age_seconds")
            title = "diagnostics" + (f" ({age:.0f} s old)" if age is not None else "")
            show({k: v for k, v in diag.items() if k not in ("events", "installation_output",
                                                             "commissioning_results")},
                 title=title)  # fmt: skip
        if diag and (data.get("state") not in QUIET_STATES or diagnostics == "refresh"):
            maas_view(kind, pk, data, status_lines=False)

    @group.command("timeline")
    def timeline_(
        pk: WorkflowId,
        limit: Annotated[int, typer.Option(help="The latest this many entries.")] = 200,
        every: All = False,
    ) -> None:
        """The workflow's timeline, oldest first: the latest --limit entries, or --all."""
        got = STATE.api.latest(f"/{kind}/{pk}/timeline", limit=None if every else limit)
        show(got.entries, ("at", "kind", "stage", "attempt", "actor_name", "message"))
        cut(len(got.entries), got.total, "entries", also=" (the latest)")

    @group.command("watch")
    def watch_(pk: WorkflowId, interval: Interval = 3.0) -> None:
        watch_workflow(kind, pk, interval)

    for verb in VERBS:
        group.command(verb, help=f"The {verb} recovery verb (docs/api.md).")(
            verb_command(kind, verb)
        )
    return group


def reports(data: dict[str, Any]) -> None:
    """An onboarding's hardware judgement and acceptance results (docs/hardware.md)."""
    hw = data.get("hardware_report") or {}
    if hw.get("checks") or hw.get("missing"):
        verdict = "conformant" if hw.get("conformant") else "NOT conformant"
        title = f"hardware: {verdict} to SKU {hw.get('sku', '?')} (mode {hw.get('mode', '?')})"
        if hw.get("missing"):
            output.warn(f"{title}: MAAS has no {output.clean(hw['missing'])}")
        else:
            show(hw["checks"], ("requirement", "expected", "observed", "passed"), title=title)
    acc = data.get("acceptance_report") or {}
    if acc.get("scripts"):
        title = f"acceptance: {'passed' if acc.get('passed') else 'FAILED'}"
        show(acc.get("results") or [], ("script", "device", "status", "exit_status", "runtime",
                                        "output_excerpt"), title=title)  # fmt: skip


def verb_command(kind: str, verb: str) -> Any:
    def run(
        pk: WorkflowId,
        reason: Annotated[str, typer.Option(help="Why (audited).")] = "",
        dry_run: DryRun = False,
        yes: Yes = False,
    ) -> None:
        body: dict[str, Any] = {"reason": reason}
        if verb in DESTRUCTIVE:
            if not (yes or dry_run):  # the question names the host and where it stands
                wf = STATE.api.get(f"/{kind}/{pk}", diagnostics="false")
                at = f"{clean(wf.get('state'))} at {clean(wf.get('stage') or '-')}"
                confirm(f"{verb} {kind[:-1]} {pk} of {host_of(wf)} (now {at})", False)
            body["confirm"] = verb in NEEDS_CONFIRM or None
        answer = send("POST", f"/{kind}/{pk}/{verb}", body_of(**body), dry_run=dry_run,
                      idempotent=True, columns=WF_COLUMNS)  # fmt: skip
        show(answer, (*WF_COLUMNS, "allowed_verbs"))

    return run


onboardings = workflow_commands("onboardings", "onboarding")
decommissions = workflow_commands("decommissions", "decommission")

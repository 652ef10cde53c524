"""``maasctl onboardings`` and ``maasctl decommissions``: list, show, timeline, watch and the
recovery verbs, written once for both workflow kinds."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from maasctl import watch
from maasctl.cli import (
    FAILED,
    INTERRUPTED,
    STATE,
    WF_COLUMNS,
    body_of,
    confirm,
    fail,
    show,
    site_id,
)
from maasctl.options import Interval, Limit, WorkflowId, Yes
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
        raise typer.Exit(FAILED)


def workflow_commands(kind: str, noun: str) -> typer.Typer:
    group = typer.Typer(help=f"{noun.capitalize()}s: list, show, watch, recovery verbs.")

    @group.command("list")
    def list_(
        site: Annotated[str | None, typer.Option(help="Site id or name.")] = None,
        state: Annotated[list[str] | None, typer.Option(help="State (repeat).")] = None,
        search: Annotated[str | None, typer.Option(help="Hostname contains.")] = None,
        limit: Limit = 100,
    ) -> None:
        params = body_of(site=site_id(site) if site else None, state=state, search=search)
        show(STATE.api.pages(f"/{kind}", limit=limit, **params), WF_COLUMNS)

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
        show(data["timeline"][-20:], ("at", "kind", "stage", "attempt", "message"),
             title="timeline (latest)")  # fmt: skip
        diag = data.get("diagnostics")
        if diag:
            age = diag.get("age_seconds")
            title = "diagnostics" + (f" ({age:.0f} s old)" if age is not None else "")
            show({k: v for k, v in diag.items() if k not in ("events", "installation_output",
                                                             "commissioning_results")},
                 title=title)  # fmt: skip

    @group.command("timeline")
    def timeline_(pk: WorkflowId, limit: Limit = 200) -> None:
        show(STATE.api.pages(f"/{kind}/{pk}/timeline", limit=limit),
             ("at", "kind", "stage", "attempt", "actor_name", "message"))  # fmt: skip

    @group.command("watch")
    def watch_(pk: WorkflowId, interval: Interval = 3.0) -> None:
        watch_workflow(kind, pk, interval)

    for verb in VERBS:
        group.command(verb, help=f"The {verb} recovery verb (docs/api.md).")(
            verb_command(kind, verb)
        )
    return group


def verb_command(kind: str, verb: str) -> Any:
    def run(
        pk: WorkflowId,
        reason: Annotated[str, typer.Option(help="Why (audited).")] = "",
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan only.")] = False,
        yes: Yes = False,
    ) -> None:
        body: dict[str, Any] = {"reason": reason}
        if verb in DESTRUCTIVE and not dry_run:
            confirm(f"{verb} {kind[:-1]} {pk}", yes)
            body["confirm"] = verb in NEEDS_CONFIRM or None
        answer = STATE.api.call("POST", f"/{kind}/{pk}/{verb}", body_of(**body),
                                params={"dry_run": "true" if dry_run else None})  # fmt: skip
        if dry_run:
            show(answer, ("verb", "current_state", "from_stage", "attempt", "maas_calls",
                          "preconditions"))  # fmt: skip
        else:
            show(answer, (*WF_COLUMNS, "allowed_verbs"))

    return run


onboardings = workflow_commands("onboardings", "onboarding")
decommissions = workflow_commands("decommissions", "decommission")

"""``maasctl batches``: onboarding batches with their admission state and pause reason, counts
per state and failed hosts; resume a paused batch, cancel one, watch one to its end
(docs/onboarding.md, "Batches")."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from maasctl import output, watch
from maasctl.cli import (
    BATCH_COLUMNS,
    FAILED,
    INTERRUPTED,
    STATE,
    confirm,
    fail,
    listing,
    send,
    show,
    site_id,
)
from maasctl.options import All, DryRun, Interval, Limit, Watch, WorkflowId, Yes

app = typer.Typer(help="Onboarding batches: list, show (--watch), resume, cancel.")
DETAIL = (*BATCH_COLUMNS, "paused_at", "counts", "canary", "failure_budget")


def _phase(row: dict[str, Any]) -> dict[str, Any]:
    """A table's phase cell: the API's (the admin's word), with a finished batch that was
    cancelled saying so, as the admin's batch page does."""
    phase = row.get("phase") or row.get("state")
    if phase == "finished" and row.get("state") == "cancelled":
        phase = "finished (cancelled)"
    return {**row, "phase": phase}


def _paused(summary: dict[str, Any], pk: int) -> None:
    if summary.get("state") == "paused":
        reason = output.clean(summary.get("paused_reason") or "no reason given")
        output.warn(f"batch {pk} is paused: {reason}; its {summary.get('queued', 0)} pending "
                    f"host(s) wait for `maasctl batches resume {pk}`")  # fmt: skip


def watch_batch(pk: int, interval: float) -> None:
    try:
        summary = watch.batch(lambda: STATE.api.get(f"/onboardings/batches/{pk}"),
                              interval=interval)  # fmt: skip
    except KeyboardInterrupt:
        raise fail(f"stopped watching; batch {pk} goes on "
                   f"(maasctl batches show {pk} --watch)", INTERRUPTED) from None  # fmt: skip
    counts = {k: v for k, v in summary["counts"].items() if v}
    output.say(f"batch {pk}: " + ", ".join(f"{v} {output.clean(k)}" for k, v in counts.items()))
    if summary["failed"]:
        output.console.print(watch.failures_table(summary["failed"]))
    _paused(summary, pk)
    if counts.get("succeeded", 0) != summary["size"]:
        raise typer.Exit(FAILED)


@app.command("list")
def batches_list(
    site: Annotated[str | None, typer.Option()] = None,
    limit: Limit = 50,
    every: All = False,
) -> None:
    """Batches with their admission state, pause reason and counts per state."""
    page = STATE.api.pages("/onboardings/batches", limit=None if every else limit,
                           site=site_id(site) if site else None)  # fmt: skip
    if STATE.fmt == "table":
        page.items[:] = [_phase(row) for row in page.items]
        for row in page.items:
            row["counts"] = {k: v for k, v in row["counts"].items() if v}
    listing(page, (*BATCH_COLUMNS, "counts"), noun="batches")


@app.command("show")
def batch_show(pk: WorkflowId, watch_: Watch = False, interval: Interval = 3.0) -> None:
    """A batch's summary: state, pause reason, counts, canary, failure budget, failed hosts."""
    if watch_:
        watch_batch(pk, interval)
        return
    data = STATE.api.get(f"/onboardings/batches/{pk}")
    show(_phase(data) if STATE.fmt == "table" else data, DETAIL)
    if STATE.fmt == "table":
        if data["failed"]:
            output.console.print(watch.failures_table(data["failed"]))
        _paused(data, pk)


@app.command("resume")
def batch_resume(
    pk: WorkflowId,
    reason: Annotated[str, typer.Option(help="Why (audited).")] = "",
    dry_run: DryRun = False,
) -> None:
    """Lift a pause (a failed canary or a spent failure budget): pending hosts start again."""
    answer = send("POST", f"/onboardings/batches/{pk}/resume", {"reason": reason},
                  dry_run=dry_run, idempotent=True, columns=DETAIL)  # fmt: skip
    show(answer, DETAIL)


@app.command("cancel")
def batch_cancel(
    pk: WorkflowId,
    reason: Annotated[str, typer.Option(help="Why (audited).")] = "",
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Stop admitting the batch and cancel its open onboardings (asks first); those waiting
    for an operator (manual_intervention) are left to them and listed."""
    if not (yes or dry_run):
        batch = STATE.api.get(f"/onboardings/batches/{pk}")
        confirm(f"cancel batch {pk} ({batch.get('size')} hosts on site {batch.get('site_id')}) "
                f"and its {batch.get('open', 0)} open onboardings", False)  # fmt: skip
    answer = send("POST", f"/onboardings/batches/{pk}/cancel", {"reason": reason},
                  dry_run=dry_run, idempotent=True, columns=DETAIL)  # fmt: skip
    show(answer, (*DETAIL, "cancelled", "left_for_operator"))

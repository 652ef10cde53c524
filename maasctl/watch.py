"""Watching work until it ends: a live progress bar per state for a batch, a status line for one
workflow. Ctrl-C stops the watching, never the work (it goes on in the control plane)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from maasctl import output

ENDED = ("succeeded", "failed", "cancelled")
MOVING = ("pending", "running", "waiting", "cancelling")  # the rest wait for an operator
ACTIVE = ("running", "waiting", "cancelling")  # moving even while a batch is paused
STATES = ("pending", "running", "waiting", "cancelling", "manual_intervention", *ENDED)
COLOURS = {"succeeded": "green", "failed": "red", "cancelled": "yellow",
           "manual_intervention": "magenta", "running": "cyan", "waiting": "blue"}  # fmt: skip


def settled(summary: dict[str, Any]) -> bool:
    """Nothing of the batch moves on its own: every onboarding ended or waits for an operator,
    or the batch is paused (its pending hosts wait for ``batches resume``) and none is active."""
    counts = summary["counts"]
    if summary.get("state") == "paused":
        return not any(counts.get(state, 0) for state in ACTIVE)
    return not any(counts.get(state, 0) for state in MOVING)


def batch(fetch: Callable[[], dict[str, Any]], *, interval: float) -> dict[str, Any]:
    """Poll a batch until it is ``settled``; the last summary."""
    summary = fetch()
    size = max(int(summary["size"]), 1)
    with Progress(
        TextColumn("[{task.fields[colour]}]{task.description:>20}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=output.console,
        refresh_per_second=4,
    ) as progress:
        tasks = {
            state: progress.add_task(state, total=size, colour=COLOURS.get(state, "white"))
            for state in STATES
        }
        while True:
            for state, task in tasks.items():
                progress.update(task, completed=summary["counts"].get(state, 0))
            if settled(summary):
                break
            time.sleep(interval)
            summary = fetch()
    return summary


def failures_table(rows: list[dict[str, Any]]) -> Table:
    columns = ("id", "hostname", "stage", "failure_class", "reason")
    table = Table(title="failed")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(output.text(row.get(c, "")) for c in columns))
    return table


def workflow(fetch: Callable[[], dict[str, Any]], *, interval: float) -> dict[str, Any]:
    """Poll one workflow until it ends or waits for an operator; the last answer."""
    wf = fetch()
    with output.console.status("") as status:
        while True:
            line = (
                f"{wf['hostname']}: {wf['state']} at {wf['stage'] or '-'} (attempt {wf['attempt']})"
            )
            status.update(Text(output.clean(line)))
            if wf["state"] not in MOVING:
                break
            time.sleep(interval)
            wf = fetch()
    return wf

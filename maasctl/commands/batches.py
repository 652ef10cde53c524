"""Onboarding batches: their counts per state, failed hosts, and watching one to its end."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl import output, watch
from maasctl.cli import BATCH_COLUMNS, FAILED, INTERRUPTED, STATE, fail, show, site_id
from maasctl.options import Interval, Limit, Watch, WorkflowId


def watch_batch(pk: int, interval: float) -> None:
    try:
        summary = watch.batch(lambda: STATE.api.get(f"/onboardings/batches/{pk}"),
                              interval=interval)  # fmt: skip
    except KeyboardInterrupt:
        raise fail(f"stopped watching; batch {pk} goes on "
                   f"(maasctl onboardings batch {pk} --watch)", INTERRUPTED) from None  # fmt: skip
    counts = {k: v for k, v in summary["counts"].items() if v}
    output.console.print(f"batch {pk}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if summary["failed"]:
        output.console.print(watch.failures_table(summary["failed"]))
    if counts.get("succeeded", 0) != summary["size"]:
        raise typer.Exit(FAILED)


def batches_list(site: Annotated[str | None, typer.Option()] = None, limit: Limit = 50) -> None:
    """Batches with their counts per state."""
    rows = STATE.api.pages("/onboardings/batches", limit=limit,
                           site=site_id(site) if site else None)  # fmt: skip
    if STATE.fmt != "table":
        show(rows)
        return
    for row in rows:
        row["counts"] = {k: v for k, v in row["counts"].items() if v}
    show(rows, (*BATCH_COLUMNS, "counts"))


def batch_show(pk: WorkflowId, watch_: Watch = False, interval: Interval = 3.0) -> None:
    if watch_:
        watch_batch(pk, interval)
        return
    data = STATE.api.get(f"/onboardings/batches/{pk}")
    show(data, (*BATCH_COLUMNS, "counts"))
    if STATE.fmt == "table" and data["failed"]:
        output.console.print(watch.failures_table(data["failed"]))

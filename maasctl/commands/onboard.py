"""``maasctl onboard HOST ...`` (one host) and ``maasctl onboard batch FILE.csv`` (a CSV, one
all-or-nothing batch request)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from maasctl import csvfile, output
from maasctl.api import ApiError
from maasctl.cli import (
    STATE,
    WF_COLUMNS,
    body_of,
    profile_id,
    read_csv_or_fail,
    row_errors,
    send,
    show,
    site_id,
    sku_id,
)
from maasctl.commands.batches import watch_batch
from maasctl.commands.workflows import watch_workflow
from maasctl.options import DryRun, Interval, ProfileOpt, SiteOpt, SkuOpt, Watch


class OnboardGroup(TyperGroup):
    """``onboard HOST ...`` (one host) beside ``onboard batch FILE.csv``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["host", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=OnboardGroup, help="Onboard one host (onboard HOST ...) or a CSV "
                                         "(onboard batch FILE.csv ...).")  # fmt: skip


@app.command("host", hidden=True)
def onboard_host(
    hostname: str,
    ipmi_ip: Annotated[str, typer.Option("--ipmi-ip")],
    site: SiteOpt,
    profile: ProfileOpt,
    sku: SkuOpt,
    confirm_host: Annotated[str | None, typer.Option(help="Guarded sites: the host again.")] = None,
    watch_: Watch = False,
    interval: Interval = 3.0,
    dry_run: DryRun = False,
) -> None:
    """Onboard one host. --dry-run answers the preflight report (guardrails, what MAAS knows of
    the host, the stages and their MAAS calls) and starts nothing."""
    pk = site_id(site)
    body = body_of(site_id=pk, profile_id=profile_id(pk, profile), sku_id=sku_id(sku),
                   hostname=hostname, ipmi_ip=ipmi_ip, confirm_host=confirm_host)  # fmt: skip
    key = csvfile.idempotency_key("onboard", body)
    wf = send("POST", "/onboardings", body, headers={"Idempotency-Key": key}, dry_run=dry_run)
    if STATE.api.replayed:  # the same request was sent before: nothing new started
        made = output.clean(wf.get("created_at", "?"))
        host = output.clean(wf.get("hostname", hostname))
        output.warn(f"replayed: already accepted as onboarding {wf['id']} ({host}, created "
                    f"{made}); nothing new was started")  # fmt: skip
    show(wf, WF_COLUMNS)
    if watch_:
        watch_workflow("onboardings", wf["id"], interval)


@app.command("batch")
def onboard_batch(
    file: Annotated[Path, typer.Argument(help="CSV with exactly: hostname,ipmi_ip")],
    site: SiteOpt,
    profile: ProfileOpt,
    sku: SkuOpt,
    watch_: Watch = False,
    interval: Interval = 3.0,
    dry_run: DryRun = False,
) -> None:
    """Every row is checked (with its line number) before any call; then one batch request,
    all or nothing, with an Idempotency-Key derived from the file: running it again replays
    the first answer instead of starting anything twice."""
    rows = read_csv_or_fail(file, csvfile.ONBOARD, unique=("hostname", "ipmi_ip"))
    pk = site_id(site)
    body = {"site_id": pk, "profile_id": profile_id(pk, profile), "sku_id": sku_id(sku),
            "rows": rows.rows}  # fmt: skip
    key = csvfile.idempotency_key("batch", body)
    try:
        batch = send("POST", "/onboardings/batch", body, headers={"Idempotency-Key": key},
                     dry_run=dry_run)  # fmt: skip
    except ApiError as exc:
        row_errors(file, rows, exc)
        raise
    if STATE.api.replayed:  # this file (and options) was sent before: nothing new started
        made = output.clean(batch.get("created_at", "?"))
        by = output.clean(batch.get("created_by", "?"))
        output.say(f"replayed: already accepted as batch {batch['id']} ({batch['size']} "
                   f"host(s), created {made} by {by}); nothing new was started")  # fmt: skip
    else:
        output.say(f"batch {batch['id']}: {batch['size']} host(s) accepted")
    if watch_:
        watch_batch(batch["id"], interval)

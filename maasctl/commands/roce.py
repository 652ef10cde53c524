"""``maasctl roce``: RoCE interface addresses (phase-2 RoCE), imported from a CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from maasctl import csvfile
from maasctl.api import ApiError
from maasctl.cli import STATE, listing, read_csv_or_fail, row_errors, send, show, site_id
from maasctl.options import All, DryRun, Limit, SiteOpt, SiteRef

app = typer.Typer(help="RoCE interface addresses (phase-2 RoCE).")


@app.command("list")
def roce_list(site: SiteRef, limit: Limit = 1000, every: All = False) -> None:
    page = STATE.api.pages(f"/maas-sites/{site_id(site)}/roce-assignments",
                           limit=None if every else limit)  # fmt: skip
    listing(page, ("id", "hostname", "interface", "ipv4_cidr"), noun="assignments")


@app.command("import")
def roce_import(
    file: Annotated[Path, typer.Argument(help="CSV with exactly: hostname,interface,ipv4_cidr")],
    site: SiteOpt,
    dry_run: DryRun = False,
) -> None:
    """All or nothing; rows checked with their line numbers before any call."""
    rows = read_csv_or_fail(file, csvfile.ROCE, unique=("ipv4_cidr",))
    body = {"items": rows.rows}
    try:  # an upsert: sending the same file twice changes nothing the second time
        summary = send("POST", f"/maas-sites/{site_id(site)}/roce-assignments", body,
                       dry_run=dry_run)  # fmt: skip
    except ApiError as exc:
        row_errors(file, rows, exc)
        raise
    show(summary)

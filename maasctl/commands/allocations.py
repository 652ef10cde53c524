"""``maasctl allocations``: tenant workloads holding nodes."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl.cli import STATE, listing, node_id, send, show
from maasctl.options import All, DryRun, Limit, NodeOpt, NodeRef

app = typer.Typer(help="Tenant workloads holding nodes.")
COLUMNS = ("id", "node_id", "hostname", "holder", "state", "created_at", "released_at")


@app.command("list")
def allocations_list(
    node: NodeOpt = None,
    state: Annotated[str | None, typer.Option()] = None,
    limit: Limit = 100,
    every: All = False,
) -> None:
    page = STATE.api.pages("/allocations", limit=None if every else limit, node=node_id(node),
                           state=state)  # fmt: skip
    listing(page, COLUMNS, noun="allocations")


@app.command("create")
def allocations_create(
    node: NodeRef, holder: Annotated[str, typer.Option()], dry_run: DryRun = False
) -> None:
    body = {"node_id": node_id(node), "holder": holder}
    show(send("POST", "/allocations", body, dry_run=dry_run, columns=COLUMNS), COLUMNS)


@app.command("release")
def allocations_release(
    allocation: int, reason: Annotated[str, typer.Option()] = "", dry_run: DryRun = False
) -> None:
    answer = send("POST", f"/allocations/{allocation}/release", {"reason": reason},
                  dry_run=dry_run, columns=COLUMNS)  # fmt: skip
    show(answer, COLUMNS)

"""``maasctl allocations``: tenant workloads holding nodes."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl.cli import STATE, show
from maasctl.options import Limit

app = typer.Typer(help="Tenant workloads holding nodes.")
COLUMNS = ("id", "node_id", "hostname", "holder", "state", "created_at", "released_at")


@app.command("list")
def allocations_list(
    node: Annotated[int | None, typer.Option()] = None,
    state: Annotated[str | None, typer.Option()] = None,
    limit: Limit = 100,
) -> None:
    show(STATE.api.pages("/allocations", limit=limit, node=node, state=state), COLUMNS)


@app.command("create")
def allocations_create(node: int, holder: Annotated[str, typer.Option()]) -> None:
    body = {"node_id": node, "holder": holder}
    show(STATE.api.call("POST", "/allocations", body), COLUMNS)


@app.command("release")
def allocations_release(allocation: int, reason: Annotated[str, typer.Option()] = "") -> None:
    show(STATE.api.call("POST", f"/allocations/{allocation}/release", {"reason": reason}),
         COLUMNS)  # fmt: skip

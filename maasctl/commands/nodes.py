"""``maasctl nodes``: the inventory, a node's workflows and its merged timeline."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl import output
from maasctl.cli import STATE, body_of, show, site_id, sku_id
from maasctl.options import Limit

app = typer.Typer(help="Nodes: inventory, workflows and timeline.")
COLUMNS = ("id", "hostname", "site_name", "sku_code", "state", "maas_system_id")
TIMELINE_COLUMNS = ("at", "source", "kind", "workflow_kind", "workflow_id", "stage", "message")


@app.command("list")
def nodes_list(
    site: Annotated[str | None, typer.Option(help="Site id or name.")] = None,
    state: Annotated[str | None, typer.Option()] = None,
    sku: Annotated[str | None, typer.Option()] = None,
    search: Annotated[str | None, typer.Option(help="Hostname contains.")] = None,
    limit: Limit = 100,
) -> None:
    params = body_of(site=site_id(site) if site else None, state=state,
                     sku=sku_id(sku) if sku else None, search=search)  # fmt: skip
    show(STATE.api.pages("/nodes", limit=limit, **params), COLUMNS)


@app.command("show")
def nodes_show(node: int) -> None:
    data = STATE.api.get(f"/nodes/{node}")
    if STATE.fmt != "table":
        show(data)
        return
    show(data, (*COLUMNS, "ipmi_ip", "maas_observation"))
    columns = ("kind", "id", "state", "stage", "attempt", "created_at", "reason")
    show(data["open_workflows"] + data["recent_workflows"][:5], columns, title="workflows")
    show(data["active_allocations"], ("id", "holder", "created_at"), title="active allocations")


@app.command("timeline")
def nodes_timeline(
    node: int,
    maas_events: Annotated[
        bool, typer.Option("--maas-events", help="Merge the machine's MAAS events.")
    ] = False,
    limit: Annotated[int, typer.Option()] = 50,
) -> None:
    page = STATE.api.get(f"/nodes/{node}/timeline", limit=limit,
                         maas_events="true" if maas_events else None)  # fmt: skip
    if STATE.fmt != "table":
        show(page)
        return
    show(page["results"], TIMELINE_COLUMNS, title=f"{page['count']} entries, newest first")
    status = page["maas_events"]
    if status["requested"] and not status["available"]:
        output.errors.print(f"MAAS events not available: {status['detail']}", markup=False)

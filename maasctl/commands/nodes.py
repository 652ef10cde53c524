"""``maasctl nodes``: the inventory, a node's workflows and its merged timeline (oldest first,
like every timeline maasctl prints: docs/cli.md, "Timelines")."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl import output
from maasctl.cli import STATE, body_of, cut, listing, node_id, show, site_id, sku_id
from maasctl.options import All, Limit, NodeRef

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
    every: All = False,
) -> None:
    params = body_of(site=site_id(site) if site else None, state=state,
                     sku=sku_id(sku) if sku else None, search=search)  # fmt: skip
    listing(STATE.api.pages("/nodes", limit=None if every else limit, **params), COLUMNS,
            noun="nodes")  # fmt: skip


@app.command("show")
def nodes_show(node: NodeRef) -> None:
    data = STATE.api.get(f"/nodes/{node_id(node)}")
    if STATE.fmt != "table":
        show(data)
        return
    show(data, (*COLUMNS, "ipmi_ip", "maas_observation"))
    columns = ("kind", "id", "state", "stage", "attempt", "created_at", "reason")
    show(data["open_workflows"] + data["recent_workflows"][:5], columns, title="workflows")
    show(data["active_allocations"], ("id", "holder", "created_at"), title="active allocations")


@app.command("timeline")
def nodes_timeline(
    node: NodeRef,
    maas_events: Annotated[
        bool, typer.Option("--maas-events", help="Merge the machine's MAAS events.")
    ] = False,
    limit: Annotated[int, typer.Option(help="The latest this many entries.")] = 50,
    every: All = False,
) -> None:
    """Every workflow's events and the operator actions on the node, oldest first: the latest
    --limit entries, or every one with --all."""
    got = STATE.api.latest(f"/nodes/{node_id(node)}/timeline", limit=None if every else limit,
                           maas_events="true" if maas_events else None)  # fmt: skip
    status = got.first_page.get("maas_events") or {}
    if STATE.fmt != "table":
        extra = {k: v for k, v in got.first_page.items() if k not in ("next", "previous")}
        show({**extra, "count": got.total, "results": got.entries})
    else:
        title = f"the latest {len(got.entries)} of {got.total} entries, oldest first"
        show(got.entries, TIMELINE_COLUMNS, title=title if len(got.entries) < got.total
             else f"{got.total} entries, oldest first")  # fmt: skip
    cut(len(got.entries), got.total, "entries", also=" (the latest)")
    if status.get("requested") and not status.get("available"):
        output.warn(f"MAAS events not available: {output.clean(status.get('detail', ''))}")


EVIDENCE_COLUMNS = ("id", "kind", "workflow_kind", "workflow_id", "maas_system_id", "reason",
                    "created_at")  # fmt: skip


@app.command("evidence")
def nodes_evidence(
    node: NodeRef,
    evidence: Annotated[int | None, typer.Argument(help="One piece of evidence, in full.")] = None,
) -> None:
    """What put the node in quarantine, frozen when it happened (docs/hardware.md): the list,
    or one piece with its report, MAAS's events and the workflow's timeline."""
    pk = node_id(node)
    if evidence is None:
        page = STATE.api.pages(f"/nodes/{pk}/evidence", limit=None)
        listing(page, EVIDENCE_COLUMNS, noun="pieces of evidence")
        return
    data = STATE.api.get(f"/nodes/{pk}/evidence/{evidence}")
    if STATE.fmt != "table":
        show(data)
        return
    show(data, EVIDENCE_COLUMNS)
    report = data.get("report") or {}
    if report.get("checks"):
        show(report["checks"], ("requirement", "expected", "observed", "passed"),
             title="hardware checks")  # fmt: skip
    if report.get("results"):
        show(report["results"], ("script", "device", "status", "exit_status", "output_excerpt"),
             title="acceptance results")  # fmt: skip
    if report.get("disks"):
        show(report["disks"], ("name", "serial", "model", "size", "mode", "outcome", "line"),
             title="disks")  # fmt: skip
    show(data.get("maas_events") or [], ("created", "level", "message"), title="MAAS events")
    show((data.get("timeline") or [])[-20:], ("at", "kind", "stage", "message"),
         title="timeline (the latest 20)")  # fmt: skip

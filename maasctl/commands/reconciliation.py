"""``maasctl drift``, ``maasctl reconcile`` and ``maasctl leaks``: drift between our records and
MAAS, and giving back the machines we hold failed with nothing of ours on them."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl.cli import STATE, body_of, confirm, fail, listing, node_id, send, show, site_id
from maasctl.options import All, DryRun, Limit, NodeOpt, SiteOpt, Yes

drift = typer.Typer(help="Drift between our records and MAAS.")
reconcile = typer.Typer(help="Compare our records with MAAS now, or see how it went.")
leaks = typer.Typer(help="Machines MAAS shows held by us, failed, with nothing of ours on them.")
DRIFT_COLUMNS = ("id", "site_id", "kind", "severity", "state", "hostname", "system_id", "message")
SWEEP_COLUMNS = ("hostname", "system_id", "status", "action", "erase", "erase_owed",
                 "tenant_data", "outcome", "why")  # fmt: skip


@drift.command("list")
def drift_list(
    site: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[str | None, typer.Option()] = None,
    state: Annotated[str | None, typer.Option()] = None,
    node: NodeOpt = None,
    limit: Limit = 100,
    every: All = False,
) -> None:
    params = body_of(site=site_id(site) if site else None, kind=kind, state=state,
                     node=node_id(node))  # fmt: skip
    page = STATE.api.pages("/reconciliation/drift", limit=None if every else limit, **params)
    listing(page, DRIFT_COLUMNS, noun="drift records")


@drift.command("resolve")
def drift_resolve(
    node: Annotated[
        str | None, typer.Argument(metavar="NODE", help="Node id or hostname (or --machine).")
    ] = None,
    machine: Annotated[str | None, typer.Option(help="A MAAS system id with no node.")] = None,
    action: Annotated[
        str, typer.Option(help="acknowledge, adopt or mark-manual-intervention")
    ] = "acknowledge",
    kind: Annotated[str | None, typer.Option()] = None,
    reason: Annotated[str, typer.Option()] = "",
    expires_in: Annotated[
        int | None, typer.Option(help="Seconds an acknowledgement lasts.")
    ] = None,
    dry_run: DryRun = False,
) -> None:
    if (node is None) == (machine is None):
        raise fail("give a node id or --machine SYSTEM_ID")
    path = (f"/reconciliation/drift/{node_id(node)}/resolve" if node is not None
            else f"/reconciliation/drift/machines/{machine}/resolve")  # fmt: skip
    body = body_of(action=action, kind=kind, reason=reason, expires_in=expires_in)
    answer = send("POST", path, body, dry_run=dry_run, idempotent=True)
    show(answer["resolved"], DRIFT_COLUMNS)


@reconcile.command("run")
def reconcile_run(
    site: Annotated[str | None, typer.Option()] = None, dry_run: DryRun = False
) -> None:
    body = body_of(site_id=site_id(site) if site else None)
    runs = send("POST", "/reconciliation/run", body, dry_run=dry_run, idempotent=True)["runs"]
    show(runs, ("id", "site_id", "state", "trigger", "queued_at", "reused"))


@reconcile.command("status")
def reconcile_status() -> None:
    data = STATE.api.get("/reconciliation/status")
    if STATE.fmt != "table":
        show(data)
        return
    rows = [{**s, "open_drift": s["open_drift"]["total"],
             "last_run": (s["last_run"] or {}).get("state")} for s in data["sites"]]  # fmt: skip
    show(rows, ("site_id", "site_name", "site_status", "last_run", "open_drift", "next_run_at"))


@leaks.command("list")
def leaks_list(
    site: Annotated[str | None, typer.Option(help="Site id or name.")] = None,
    limit: Limit = 100,
    every: All = False,
) -> None:
    """Open leaks (drift of kind leak), each naming the workflow that left its machine."""
    params = body_of(site=site_id(site) if site else None, kind="leak", state="open")
    page = STATE.api.pages("/reconciliation/drift", limit=None if every else limit, **params)
    listing(page, DRIFT_COLUMNS, noun="leaks")


@leaks.command("sweep")
def leaks_sweep(
    site: SiteOpt,
    machine: Annotated[
        str | None, typer.Option(help="One MAAS system id; without it, every leak of the site.")
    ] = None,
    reason: Annotated[str, typer.Option()] = "",
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Release (with the erase its policy asks for when a tenant may have written to it) or
    mark Broken the leaked machines of a site, or one (docs/reconciliation.md, "Leaks")."""
    target = f"machine {machine}" if machine else "every leaked machine"
    confirm(f"sweep {target} of site {site}", yes or dry_run)
    body = body_of(site_id=site_id(site), system_id=machine, reason=reason or None)
    answer = send("POST", "/reconciliation/leaks/sweep", body, dry_run=dry_run, idempotent=True)
    show(answer["swept"], SWEEP_COLUMNS, title="swept")
    if answer["failed"]:
        show(answer["failed"], (*SWEEP_COLUMNS[:4], "error"), title="MAAS refused")
    if answer["skipped"]:
        show(answer["skipped"], ("hostname", "system_id", "reason"), title="not leaks")
    if answer["failed"]:
        raise typer.Exit(1)

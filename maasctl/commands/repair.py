"""``maasctl nodes cordon|uncordon|repair`` and ``maasctl repairs``: the fleet loop from the
command line (docs/cli.md, "Cordons and repairs"; docs/repair.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from maasctl import output
from maasctl.cli import STATE, WF_COLUMNS, body_of, confirm, host_of, node, node_id, send, show
from maasctl.commands.workflows import watch_workflow, workflow_commands
from maasctl.options import DryRun, Interval, NodeRef, Watch, WorkflowId, Yes

NODE_COLUMNS = ("id", "hostname", "state", "schedulable", "cordons")
Reason = Annotated[str, typer.Option(help="Why (audited; required).")]


def _cordons(node: dict[str, Any]) -> dict[str, Any]:
    """A node as the cordon commands print it: each cordon as "reason: detail"."""
    shown = dict(node)
    shown["cordons"] = "; ".join(f"{c['reason']}: {c['detail']}" for c in node.get("cordons") or [])
    return shown


def cordon(node_ref: NodeRef, reason: Reason, dry_run: DryRun = False) -> None:
    """Take a node out of scheduling: new allocations on it are refused (its tenant stays)."""
    pk = node_id(node_ref)
    answer = send("POST", f"/nodes/{pk}/cordon", {"reason": reason}, dry_run=dry_run)
    show(_cordons(answer), NODE_COLUMNS)


def uncordon(node_ref: NodeRef, reason: Reason, yes: Yes = False, dry_run: DryRun = False) -> None:
    """Return a node to scheduling, every cordon lifted (admin)."""
    target = node(node_ref, read=not (yes or dry_run))  # a question names the host
    pk = target["id"]
    confirm(f"uncordon node {pk}, {host_of(target)}: it may take tenants again", yes or dry_run)
    answer = send("POST", f"/nodes/{pk}/uncordon", {"reason": reason}, dry_run=dry_run)
    show(_cordons(answer), NODE_COLUMNS)


def repair_start(
    node_ref: NodeRef,
    ticket: Annotated[str, typer.Option(help="The RMA ticket.")] = "",
    reason: Annotated[str, typer.Option()] = "",
    profile: Annotated[
        int | None, typer.Option(help="Profile id (requalification target).")
    ] = None,
    yes: Yes = False,
    watch_: Watch = False,
    interval: Interval = 3.0,
    dry_run: DryRun = False,
) -> None:
    """Hand a quarantined (or cordoned) node to repair: its machine is marked Broken in MAAS."""
    target = node(node_ref, read=not (yes or dry_run))
    pk = target["id"]
    confirm(f"hand node {pk}, {host_of(target)}, to repair (its machine is marked Broken in "
            "MAAS)", yes or dry_run)  # fmt: skip
    body = body_of(ticket=ticket, reason=reason, profile_id=profile)
    wf = send("POST", f"/nodes/{pk}/repair", body, dry_run=dry_run, idempotent=True,
              columns=WF_COLUMNS)  # fmt: skip
    show(wf, WF_COLUMNS)
    if watch_:
        watch_workflow("repairs", wf["id"], interval)


repairs = workflow_commands("repairs", "repair")


@repairs.command("requalify")
def requalify(
    pk: WorkflowId,
    note: Annotated[str, typer.Option(help="What was repaired.")] = "",
    watch_: Watch = False,
    interval: Interval = 3.0,
    dry_run: DryRun = False,
) -> None:
    """The repair is done: commission the machine again, judge, test and (per policy) deploy it;
    the node returns only if all pass."""
    wf = send("POST", f"/repairs/{pk}/requalify", body_of(note=note), dry_run=dry_run,
              columns=WF_COLUMNS)  # fmt: skip
    show(wf, WF_COLUMNS)
    if watch_:
        watch_workflow("repairs", pk, interval)


@repairs.command("packet")
def packet(pk: WorkflowId) -> None:
    """The repair's RMA packet (as JSON with -o json: attach it to the ticket)."""
    data = STATE.api.get(f"/repairs/{pk}", diagnostics="false")["packet"]
    if not data:
        output.warn(f"repair {pk} has not frozen its packet yet")
        return
    if STATE.fmt != "table":
        show(data)
        return
    show({k: v for k, v in data.items() if not isinstance(v, list | dict)}, title="packet")
    show(data["failing"], ("category", "requirement", "expected", "observed", "script", "disk"),
         title="what failed")  # fmt: skip
    show(data["parts"], ("category", "pci_address", "pci_id", "name", "serial", "model",
                         "firmware_version", "mac_address"), title="parts")  # fmt: skip

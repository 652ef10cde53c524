"""``maasctl decommission NODE`` and ``maasctl storage-cleanup NODE``: start a decommission
(reimage, full, or an erase back to the pool). Both ask first."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl.cli import WF_COLUMNS, body_of, confirm, fail, host_of, node, send, show
from maasctl.commands.workflows import watch_workflow
from maasctl.options import DryRun, Interval, NodeRef, Watch, Yes


def decommission_start(
    node_ref: NodeRef,
    mode: Annotated[str, typer.Option(help="reimage or full.")],
    profile: Annotated[int | None, typer.Option(help="Profile id (reimage target).")] = None,
    force_release: Annotated[
        bool, typer.Option("--force-release", help="Take the node from its tenants.")
    ] = False,
    reason: Annotated[str, typer.Option()] = "",
    confirm_host: Annotated[str | None, typer.Option()] = None,
    yes: Yes = False,
    watch_: Watch = False,
    interval: Interval = 3.0,
    dry_run: DryRun = False,
) -> None:
    """Reimage (erase, then deploy again) or fully decommission a node."""
    if mode not in ("reimage", "full"):
        raise fail("--mode must be reimage or full")
    target = node(node_ref, read=not (yes or dry_run))  # a question names the host
    pk = target["id"]
    what = "reimage (erase, then deploy again)" if mode == "reimage" else "full decommission of"
    confirm(f"{what} node {pk}, {host_of(target)}", yes or dry_run)
    body = body_of(mode=mode, profile_id=profile, force_release=force_release, reason=reason,
                   confirm=True if mode == "full" else None, confirm_host=confirm_host)  # fmt: skip
    wf = send("POST", f"/nodes/{pk}/decommission", body, dry_run=dry_run, idempotent=True,
              columns=WF_COLUMNS)  # fmt: skip
    show(wf, WF_COLUMNS)
    if watch_:
        watch_workflow("decommissions", wf["id"], interval)


def storage_cleanup(
    node_ref: NodeRef,
    force_release: Annotated[bool, typer.Option("--force-release")] = False,
    reason: Annotated[str, typer.Option()] = "",
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Erase a node's disks and return it to its pool."""
    target = node(node_ref, read=not (yes or dry_run))
    pk = target["id"]
    confirm(f"storage cleanup (erase its disks) of node {pk}, {host_of(target)}", yes or dry_run)
    body = {"force_release": force_release, "reason": reason}
    wf = send("POST", f"/nodes/{pk}/storage-cleanup", body, dry_run=dry_run, idempotent=True,
              columns=WF_COLUMNS)  # fmt: skip
    show(wf, WF_COLUMNS)

"""``maasctl skus``: the hardware classes nodes are bound to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from maasctl import output
from maasctl.cli import (
    STATE,
    body_of,
    confirm,
    document_option,
    fail,
    if_match,
    listing,
    send,
    show,
    sku_id,
)
from maasctl.options import All, DryRun, Limit, Revision, Yes

app = typer.Typer(help="Hardware classes nodes are bound to.")
COLUMNS = ("id", "code", "name", "gpu_model", "gpu_count", "active", "node_count")


@app.command("list")
def skus_list(
    search: Annotated[str | None, typer.Option()] = None,
    active: Annotated[bool | None, typer.Option("--active/--inactive")] = None,
    limit: Limit = 100,
    every: All = False,
) -> None:
    flag = None if active is None else str(active).lower()
    page = STATE.api.pages("/skus", limit=None if every else limit, search=search, active=flag)
    listing(page, COLUMNS, noun="SKUs")


HardwareFile = Annotated[
    Path | None,
    typer.Option(
        "--hardware",
        help="The hardware profile, a YAML or JSON file (- for stdin; docs/hardware.md). "
        "Replaces the SKU's whole profile.",
    ),
]


@app.command("show")
def skus_show(sku: str) -> None:
    data = STATE.api.get(f"/skus/{sku_id(sku)}")
    if STATE.fmt != "table":
        show(data)
        return
    show(data, (*COLUMNS, "revision"))
    if data.get("hardware"):
        output.say("hardware profile:\n" + yaml.safe_dump(data["hardware"], sort_keys=False))


@app.command("create")
def skus_create(
    code: str,
    name: Annotated[str, typer.Option()],
    gpu_model: Annotated[str | None, typer.Option()] = None,
    gpu_count: Annotated[int | None, typer.Option()] = None,
    hardware: HardwareFile = None,
    dry_run: DryRun = False,
) -> None:
    body = body_of(code=code, name=name, gpu_model=gpu_model, gpu_count=gpu_count,
                   hardware=document_option(hardware, "--hardware"))  # fmt: skip
    show(send("POST", "/skus", body, dry_run=dry_run, columns=COLUMNS), COLUMNS)


@app.command("update")
def skus_update(
    sku: str,
    name: Annotated[str | None, typer.Option()] = None,
    gpu_model: Annotated[str | None, typer.Option()] = None,
    gpu_count: Annotated[int | None, typer.Option()] = None,
    active: Annotated[bool | None, typer.Option("--active/--inactive")] = None,
    hardware: HardwareFile = None,
    revision: Revision = None,
    dry_run: DryRun = False,
) -> None:
    body = body_of(name=name, gpu_model=gpu_model, gpu_count=gpu_count, active=active,
                   hardware=document_option(hardware, "--hardware"))  # fmt: skip
    if not body:
        raise fail("nothing to change: give at least one option")
    answer = send("PATCH", f"/skus/{sku_id(sku)}", body, headers=if_match(revision),
                  dry_run=dry_run, columns=COLUMNS)  # fmt: skip
    show(answer, COLUMNS)


@app.command("delete")
def skus_delete(sku: str, yes: Yes = False, dry_run: DryRun = False) -> None:
    """Deletes an unused SKU; one that nodes refer to is disabled instead."""
    pk = sku_id(sku)
    confirm(f"delete SKU {sku}", yes or dry_run)
    kept = send("DELETE", f"/skus/{pk}", dry_run=dry_run, columns=COLUMNS)
    if kept is None:
        output.say(f"SKU {pk} deleted.")
    else:
        output.say(f"SKU {pk} is in use: disabled instead.")
        show(kept, COLUMNS)

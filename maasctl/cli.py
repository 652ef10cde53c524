"""What every maasctl command shares: the invocation's state (config profile, output format, the
API client), failing with the exit code docs/cli.md lists, confirmation, request bodies, and
sites, profiles and SKUs named by id or by name."""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from maasctl import csvfile, output
from maasctl.api import USAGE, Api, ApiError
from maasctl.config import load

FAILED = 1  # the request worked and what it reports failed (probe unhealthy, workflow failed)
INTERRUPTED = 130
WF_COLUMNS = ("id", "hostname", "state", "stage", "attempt", "failure_class", "reason")
BATCH_COLUMNS = ("id", "site_id", "size", "open", "queued", "created_by", "created_at")


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


class _State:
    profile: str | None = None
    fmt: str = "table"
    _api: Api | None = None

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(load(self.profile))
        return self._api


STATE = _State()


def fail(message: str, code: int = USAGE) -> typer.Exit:
    output.errors.print(f"maasctl: {message}", markup=False, highlight=False)
    return typer.Exit(code)


def api_failure(exc: ApiError) -> typer.Exit:
    lines = [exc.message]
    fields = exc.body.get("fields") or {}
    lines += [f"  {name}: {'; '.join(map(str, reasons))}" for name, reasons in fields.items()]
    for key in ("open_workflows", "allocations", "current_state", "allowed_verbs", "problems",
                "open_onboarding", "current_revision"):  # fmt: skip
        if key in exc.body:
            lines.append(f"  {key}: {json.dumps(exc.body[key], default=str)}")
    return fail("\n".join(lines), exc.exit_code)


def show(data: Any, columns: tuple[str, ...] = (), title: str = "") -> None:
    output.show(data, STATE.fmt, columns=columns, title=title)


def confirm(what: str, yes: bool) -> None:
    if yes:
        return
    try:
        answered = typer.confirm(f"{what}?", default=False)
    except typer.Abort:  # no answer (stdin closed)
        raise fail(f"{what}: not confirmed (answer y, or pass --yes)") from None
    if not answered:
        raise fail("not confirmed")


def json_option(raw: str | None, name: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise fail(f"{name} is not JSON: {exc}") from None


def body_of(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def if_match(revision: int | None) -> dict[str, str]:
    return {"If-Match": f'"{revision}"'} if revision is not None else {}


# -- references by id or name ---------------------------------------------------------------------


def site_id(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [s for s in STATE.api.pages("/maas-sites", limit=500, name=ref) if s["name"] == ref]
    if not found:
        raise fail(f"no site named {ref!r}", 4)
    return int(found[0]["id"])


def profile_id(site: int, ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [p for p in STATE.api.pages(f"/maas-sites/{site}/profiles", limit=500, name=ref)
             if p["name"] == ref]  # fmt: skip
    if not found:
        raise fail(f"no profile named {ref!r} on site {site}", 4)
    return int(found[0]["id"])


def sku_id(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = STATE.api.pages("/skus", limit=1, code=ref)
    if not found:
        raise fail(f"no SKU with code {ref!r}", 4)
    return int(found[0]["id"])


# -- CSV files ----------------------------------------------------------------------------------


def _row_problem(file: Path, line: object, field: str | None, reason: object) -> None:
    where = f"{file}:{line}" + (f" {field}" if field else "")
    output.errors.print(f"{where}: {reason}", markup=False, highlight=False)


def read_csv_or_fail(
    file: Path, spec: Mapping[str, csvfile.Check], *, unique: tuple[str, ...]
) -> csvfile.Rows:
    """The file's rows, or every problem with its line number and exit 1 (nothing sent)."""
    rows, errors = csvfile.read(file, spec, unique=unique)
    if errors:
        for e in errors:
            _row_problem(file, e.line, e.field, e.reason)
        raise fail(f"{len(errors)} problem(s) in {file}; nothing was sent")
    return rows


def row_errors(file: Path, rows: csvfile.Rows, exc: ApiError) -> None:
    """The server's row errors (all or nothing refused) at the file's line numbers."""
    for e in exc.body.get("rows", []):
        _row_problem(file, rows.line_of(e.get("index")), e.get("field"), e.get("reason"))

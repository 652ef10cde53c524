"""What every maasctl command shares: the invocation's state (config profile, output format, the
API client), failing with the exit code docs/cli.md lists, confirmation, request bodies, state
changes (with ``--dry-run``), lists said aloud when cut, and sites, profiles and SKUs named by
id or by name."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
import yaml

from maasctl import csvfile, output, plan
from maasctl.api import IDEMPOTENCY_KEY, SERVER, USAGE, Api, ApiError, Page
from maasctl.config import load
from maasctl.output import clean

FAILED = 1  # the request worked and what it reports failed (probe unhealthy, workflow failed)
INTERRUPTED = 130
WF_COLUMNS = ("id", "hostname", "state", "stage", "attempt", "failure_class", "reason")
# phase: finished once every onboarding of it ended, else its admission state (the API's and
# the admin's word for it: onboarding/selectors.py)
BATCH_COLUMNS = ("id", "site_id", "size", "phase", "paused_reason", "open", "queued",
                 "created_by", "created_at")  # fmt: skip


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
    """Print ``message`` on stderr and return the exit to raise. Its line breaks are ours:
    server text in it must be ``output.clean`` already (a line break of the server's then shows
    as ``\\n``, never as a line that looks like ours)."""
    for line in message.split("\n"):
        line = output.clean(line)
        output.warn(line if line.startswith(" ") else f"maasctl: {line}")
    return typer.Exit(code)


def api_failure(exc: ApiError) -> typer.Exit:
    clean = output.clean
    lines = [exc.message]
    fields = exc.body.get("fields") or {}
    for name, reasons in fields.items() if isinstance(fields, dict) else ():
        listed = reasons if isinstance(reasons, list) else [reasons]
        lines.append(f"  {clean(name)}: {'; '.join(map(clean, listed))}")
    for key in ("open_workflows", "allocations", "current_state", "allowed_verbs", "problems",
                "open_onboarding", "current_revision", "sites_on_maas"):  # fmt: skip
        if key in exc.body:
            lines.append(f"  {key}: {clean(json.dumps(exc.body[key], default=str))}")
    if exc.status == 403:
        lines.append("  (a token's scope bounds what it may do: `maasctl tokens list` shows it)")
    return fail("\n".join(lines), exc.exit_code)


def show(data: Any, columns: tuple[str, ...] = (), title: str = "") -> None:
    output.show(data, STATE.fmt, columns=columns, title=title)


def listing(page: Page, columns: tuple[str, ...], *, noun: str = "entries") -> None:
    """A list, and on stderr how much of it was shown when that is not all of it."""
    show(page.items, columns)
    cut(len(page.items), page.total, noun)


def cut(shown: int, total: int, noun: str, *, also: str = "") -> None:
    if shown < total:
        output.warn(f"{shown} of {total} {noun} shown{also}; --all for every one, "
                    "or --limit N")  # fmt: skip


def send(
    method: str,
    path: str,
    body: Any = None,
    *,
    dry_run: bool,
    headers: dict[str, str] | None = None,
    idempotent: bool = False,
    columns: Sequence[str] = (),
) -> Any:
    """A state-changing request (docs/cli.md, "Dry runs" and "Rate limits").

    ``dry_run``: ``?dry_run=true`` and never an Idempotency-Key (a plan must not be stored as
    the answer a later real request with the same key replays); the plan is printed and the
    command ends here, with 1 when the plan says it would be refused. ``idempotent``: the route
    takes an Idempotency-Key, so a key made for this invocation lets a 429 be retried safely.
    """
    headers = dict(headers or {})
    if dry_run:
        headers.pop(IDEMPOTENCY_KEY, None)
        answer = STATE.api.call(method, path, body, params={"dry_run": "true"}, headers=headers)
        if not plan.honoured(answer):
            raise fail(
                f"{method} {STATE.api.base}{path}?dry_run=true was not answered with a plan: "
                "this server may not know --dry-run and may have APPLIED the change; look "
                "before going on",
                SERVER,
            )
        raise typer.Exit(plan.present(answer, STATE.fmt, columns=columns))
    if idempotent:
        headers.setdefault(IDEMPOTENCY_KEY, f"maasctl-{uuid.uuid4()}")
    return STATE.api.call(method, path, body, headers=headers)


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


def document_option(path: Path | None, name: str) -> Any:
    """A YAML or JSON document from a file (``-``: standard input), for an option that takes
    a structure (a SKU's hardware profile)."""
    if path is None:
        return None
    try:
        raw = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
        return yaml.safe_load(raw)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise fail(f"{name}: cannot read {path}: {clean(str(exc))}") from None


def body_of(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def if_match(revision: int | None) -> dict[str, str]:
    return {"If-Match": f'"{revision}"'} if revision is not None else {}


# -- references by id or name ---------------------------------------------------------------------


def site_id(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [s for s in STATE.api.pages("/maas-sites", limit=500, name=ref).items
             if s["name"] == ref]  # fmt: skip
    if not found:
        raise fail(f"no site named {ref!r}", 4)
    return int(found[0]["id"])


def profile_id(site: int, ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [p for p in STATE.api.pages(f"/maas-sites/{site}/profiles", limit=500, name=ref).items
             if p["name"] == ref]  # fmt: skip
    if not found:
        raise fail(f"no profile named {ref!r} on site {site}", 4)
    return int(found[0]["id"])


def node(ref: str, *, read: bool = True) -> dict[str, Any]:
    """A node named by id or by hostname (docs/cli.md, "Nodes by id or hostname"): its API
    answer, for the id and for a confirmation that names the host (``read=False``: an id is
    taken as it is, no request). A hostname that several live nodes share (one per site) is
    refused, listing them; a hostname only retired nodes carry names the newest of them."""
    ref = ref.strip()
    if ref.isdigit():
        return dict(STATE.api.get(f"/nodes/{ref}")) if read else {"id": int(ref)}
    found = STATE.api.pages("/nodes", limit=50, hostname=ref).items
    live = [n for n in found if n.get("state") != "retired"] or sorted(
        found, key=lambda n: -int(n["id"])
    )[:1]
    if not live:
        raise fail(f"no node with hostname {clean(ref)!r} (give its id, or see "
                   "`maasctl nodes list --search …`)", 4)  # fmt: skip
    if len(live) > 1:
        listed = ", ".join(f"{n['id']} on {clean(n.get('site_name', '?'))}" for n in live)
        raise fail(f"hostname {clean(ref)!r} names {len(live)} nodes ({listed}): give the id")
    return dict(live[0])


def node_id(ref: str | None) -> Any:
    """A node's id from its id or hostname (None stays None: an option not given)."""
    return None if ref is None else int(node(ref, read=False)["id"])


def host_of(row: dict[str, Any]) -> str:
    """How a confirmation names a node or a workflow: "node 6 (gpu-b01 on demo)"."""
    where = f" on {clean(row['site_name'])}" if row.get("site_name") else ""
    return f"{clean(row.get('hostname', '?'))}{where}"


def sku_id(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = STATE.api.pages("/skus", limit=1, code=ref).items
    if not found:
        raise fail(f"no SKU with code {ref!r}", 4)
    return int(found[0]["id"])


# -- CSV files ----------------------------------------------------------------------------------


def _row_problem(file: Path, line: object, field: str | None, reason: object) -> None:
    where = f"{file}:{line}" + (f" {output.clean(field)}" if field else "")
    output.warn(f"{where}: {output.clean(reason)}")


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

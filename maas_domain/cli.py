"""``maascp``: the operators' bulk CLI. It talks to the admin API over HTTP (so it runs anywhere
an operator has a token) and never to the database: every action goes through the same
services, checks and audit as any other API call.

    python -m maas_domain.cli --url http://cp:8000 --token "$MAASCP_API_TOKEN" <command> ...

Commands:
  onboard-csv FILE --site N --profile N --sku N   CSV (hostname,ipmi_ip) → one batch
  roce-csv FILE --site N                           CSV (hostname,interface,ipv4_cidr) → upsert
  decommission MODE NODE_ID... [--force-release] [--reason R] [--profile N] [--yes]
  verb onboardings|decommissions VERB ID... [--reason R] [--yes] [--dry-run]
  batch N                                          a batch's progress

CSV is converted here, before the API call (seed 000 §5.1: the API itself is JSON only). Each
command prints one JSON line per item and exits 1 if any item failed. A batch carries an
Idempotency-Key derived from its body, so re-running the same file replays the first answer
instead of starting anything twice.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import requests

MODES = {"reimage": "decommission", "full": "decommission", "storage-cleanup": "storage-cleanup"}
DESTRUCTIVE_VERBS = {"restart-clean", "cancel"}


class Api:
    def __init__(self, url: str, token: str, timeout: float = 60.0) -> None:
        self.base = url.rstrip("/") + "/api/v1/admin"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        response = self.session.request(
            method, self.base + path, json=body, headers=headers, timeout=self.timeout
        )
        try:
            data = response.json()
        except ValueError:
            data = {"error": "not_json", "detail": response.text[:200]}
        return response.status_code, data


def _rows(handle: TextIO, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(handle)
    header = tuple(reader.fieldnames or ())
    if header != columns:
        raise SystemExit(f"CSV header must be exactly {','.join(columns)} (got {','.join(header)})")
    for row in reader:
        yield reader.line_num, {k: (v or "").strip() for k, v in row.items()}


def _emit(out: TextIO, **item: Any) -> None:
    out.write(json.dumps(item, sort_keys=True) + "\n")


def _csv_request(
    api: Api,
    out: TextIO,
    path: str,
    file: str,
    columns: tuple[str, ...],
    list_field: str,
    fields: dict[str, Any],
) -> tuple[int, Any]:
    """One all-or-nothing request for the whole file, with an Idempotency-Key derived from its
    body; row errors are printed with their CSV line numbers."""
    with open(file, newline="") as handle:
        parsed = list(_rows(handle, columns))
    lines = [line for line, _ in parsed]
    body = {**fields, list_field: [row for _, row in parsed]}
    key = "csv-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]
    status, data = api.call("POST", path, body, **{"Idempotency-Key": key})
    if status >= 300:
        for error in data.get("rows", []):  # point at the CSV line, not the JSON index
            _emit(out, ok=False, line=lines[error["index"]], field=error["field"],
                  reason=error["reason"])  # fmt: skip
        _emit(out, ok=False, status=status, error=data.get("error"), detail=data.get("detail"))
    return status, data


def onboard_csv(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    ids = {"site_id": args.site, "profile_id": args.profile, "sku_id": args.sku}
    status, data = _csv_request(
        api, out, "/onboardings/batch", args.file, ("hostname", "ipmi_ip"), "rows", ids
    )
    if status != 202:
        return 1
    _emit(out, ok=True, batch_id=data["id"], size=data["size"], counts=data["counts"])
    return 0


def roce_csv(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    path = f"/maas-sites/{args.site}/roce-assignments"
    columns = ("hostname", "interface", "ipv4_cidr")
    status, data = _csv_request(api, out, path, args.file, columns, "items", {})
    if status >= 300:
        return 1
    _emit(out, ok=True, **data)
    return 0


def _confirmed(args: argparse.Namespace, what: str, count: int) -> bool:
    if args.yes:
        return True
    sys.stderr.write(f"{what} on {count} item(s). Type 'yes' to go on: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip() == "yes"


def decommission(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    if not _confirmed(args, f"{args.mode} decommission", len(args.nodes)):
        return 2
    body: dict[str, Any] = {"force_release": args.force_release, "reason": args.reason}
    if args.mode != "storage-cleanup":
        body["mode"] = args.mode
    if args.mode == "full":
        body["confirm"] = True
    if args.profile is not None:
        body["profile_id"] = args.profile
    failed = 0
    for node in args.nodes:
        status, data = api.call("POST", f"/nodes/{node}/{MODES[args.mode]}", body)
        ok = status == 202
        failed += not ok
        _emit(out, ok=ok, status=status, **{"node_id": node, **_summary(data, ok)})
    return 1 if failed else 0


def verb(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    destructive = args.verb in DESTRUCTIVE_VERBS and not args.dry_run
    if destructive and not _confirmed(args, args.verb, len(args.ids)):
        return 2
    body: dict[str, Any] = {"reason": args.reason}
    if args.verb == "restart-clean":
        body["confirm"] = True
    suffix = "?dry_run=true" if args.dry_run else ""
    failed = 0
    for pk in args.ids:
        status, data = api.call("POST", f"/{args.kind}/{pk}/{args.verb}{suffix}", body)
        ok = status in (200, 202)
        failed += not ok
        _emit(out, ok=ok, status=status, **{"id": pk, **_summary(data, ok)})
    return 1 if failed else 0


def batch(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    status, data = api.call("GET", f"/onboardings/batches/{args.id}")
    _emit(out, ok=status == 200, status=status, **data)
    return 0 if status == 200 else 1


def _summary(data: dict[str, Any], ok: bool) -> dict[str, Any]:
    if not ok:
        return {k: v for k, v in data.items() if k != "ok"}
    keep = ("id", "state", "stage", "attempt", "mode", "from_stage", "maas_calls")
    return {k: data[k] for k in keep if k in data}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="maascp", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("MAASCP_API_URL", "http://127.0.0.1:8000"))
    p.add_argument("--token", default=os.environ.get("MAASCP_API_TOKEN", ""))
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("onboard-csv", help="CSV (hostname,ipmi_ip) to one onboarding batch")
    c.add_argument("file")
    for name in ("--site", "--profile", "--sku"):
        c.add_argument(name, type=int, required=True)
    c.set_defaults(run=onboard_csv)
    c = sub.add_parser("roce-csv", help="CSV (hostname,interface,ipv4_cidr) to RoCE assignments")
    c.add_argument("file")
    c.add_argument("--site", type=int, required=True)
    c.set_defaults(run=roce_csv)
    c = sub.add_parser("decommission", help="start decommissions of many nodes")
    c.add_argument("mode", choices=sorted(MODES))
    c.add_argument("nodes", type=int, nargs="+")
    c.add_argument("--force-release", action="store_true")
    c.add_argument("--profile", type=int)
    c.add_argument("--reason", default="")
    c.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    c.set_defaults(run=decommission)
    c = sub.add_parser("verb", help="a recovery verb on many workflows")
    c.add_argument("kind", choices=["onboardings", "decommissions"])
    c.add_argument(
        "verb",
        choices=["retry", "resume", "rerun", "restart-clean", "cancel", "adopt",
                 "mark-manual-intervention"],
    )  # fmt: skip
    c.add_argument("ids", type=int, nargs="+")
    c.add_argument("--reason", default="")
    c.add_argument("--dry-run", action="store_true")
    c.add_argument("--yes", action="store_true")
    c.set_defaults(run=verb)
    c = sub.add_parser("batch", help="progress of an onboarding batch")
    c.add_argument("id", type=int)
    c.set_defaults(run=batch)
    return p


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.token:
        raise SystemExit("an API token is needed: --token or MAASCP_API_TOKEN")
    return int(args.run(Api(args.url, args.token), args, out or sys.stdout))


if __name__ == "__main__":
    sys.exit(main())

"""Export workflow timelines as JSON lines, one file per workflow (workflows/archive.py
says what "archived" means), or ship them to Loki with ``--to-loki`` (with the MAAS events of
each workflow's machine on ``--maas-diagnostics``): the correlation fields as structured
metadata, labels only for what takes few values (docs/observability.md, "Timelines and MAAS
diagnostics in Loki"). Read-only: nothing in the database changes."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import requests
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from maas_domain.diagnostics import machine_diagnostics
from maas_domain.observability import loki
from maas_domain.urlsafety import display as without_query
from maas_domain.work import OPEN_STATES
from workflows.archive import loki_entries, write_timeline
from workflows.kinds import KINDS


def _date(value: str) -> datetime.datetime:
    try:
        day = datetime.date.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"--finished-before {value!r} is not a date (YYYY-MM-DD)") from exc
    return datetime.datetime.combine(day, datetime.time.min, tzinfo=datetime.UTC)


class Command(BaseCommand):
    help = (
        "Write <kind>-<id>.jsonl per workflow into --out-dir: the workflow, then its timeline. "
        "Without --id, every finished workflow of the kind (narrowed by --finished-before)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", required=True, help="workflow kind (onboarding, ...)")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--out-dir", type=Path)
        where.add_argument(
            "--to-loki",
            nargs="?",
            const="",
            metavar="PUSH_URL",
            help="push to Loki instead of files (default URL: MAASCP_LOKI_URL)",
        )
        parser.add_argument(
            "--maas-diagnostics",
            action="store_true",
            help="with --to-loki: also the MAAS events of each workflow's machine (read live)",
        )
        parser.add_argument("--id", type=int, action="append", dest="ids", help="repeatable")
        parser.add_argument("--finished-before", help="YYYY-MM-DD (UTC)")

    def handle(self, *args: Any, **opts: Any) -> None:
        kind = KINDS.get(opts["kind"])
        if kind is None:
            raise CommandError(f"unknown kind {opts['kind']!r}; one of: {', '.join(KINDS)}")
        url = None
        if opts["to_loki"] is not None:
            url = opts["to_loki"] or settings.LOKI_URL
            if not url:
                raise CommandError("--to-loki needs a push URL or MAASCP_LOKI_URL")
        elif opts["maas_diagnostics"]:
            raise CommandError("--maas-diagnostics goes with --to-loki")
        rows = kind.model.objects.select_related("site").order_by("id")
        if opts["ids"]:
            rows = rows.filter(pk__in=opts["ids"])
            missing = set(opts["ids"]) - set(rows.values_list("pk", flat=True))
            if missing:
                raise CommandError(f"no {kind.name} with id {sorted(missing)}")
        else:
            rows = rows.exclude(state__in=OPEN_STATES)
        if opts["finished_before"]:
            rows = rows.filter(finished_at__lt=_date(opts["finished_before"]))
        if url is not None:
            self._to_loki(kind.name, rows, url, with_maas=opts["maas_diagnostics"])
            return
        out: Path = opts["out_dir"]
        out.mkdir(parents=True, exist_ok=True)
        count = 0
        for wf in rows.iterator(chunk_size=500):
            write_timeline(kind.name, wf, out)
            count += 1
        self.stdout.write(
            f"exported {count} {kind.name} timeline(s) to {out} "
            f"at {timezone.now():%Y-%m-%dT%H:%M:%SZ}"
        )

    def _to_loki(self, kind: str, rows: Any, url: str, *, with_maas: bool) -> None:
        session = requests.Session()
        workflows = lines = 0
        unavailable: list[str] = []
        for wf in rows.iterator(chunk_size=100):
            maas = None
            if with_maas and wf.maas_system_id:
                found = machine_diagnostics(wf.site, wf.maas_system_id)
                maas = found.get("events", [])
                if not found["available"]:
                    unavailable.append(f"{kind} {wf.pk}: {found['detail']}")
            try:
                lines += loki.push(
                    url,
                    loki_entries(kind, wf, maas, labels=settings.LOKI_LABELS),
                    tenant=settings.LOKI_TENANT or None,
                    session=session,
                )
            except (requests.RequestException, loki.LokiRefused) as exc:
                raise CommandError(
                    f"Loki at {display(url)} did not take {kind} {wf.pk}'s entries "
                    f"({workflows} workflow(s) sent before it): {exc}"
                ) from None
            workflows += 1
        for line in unavailable:
            self.stderr.write(f"MAAS diagnostics not available for {line}")
        self.stdout.write(
            f"sent {lines} line(s) of {workflows} {kind} timeline(s) to Loki at {display(url)}"
        )


def display(url: str) -> str:
    """The push URL as it may be printed: no credentials (basic auth may be in it), no query."""
    shown = without_query(url)
    scheme, sep, rest = shown.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"

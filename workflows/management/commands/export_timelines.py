"""Export workflow timelines as JSON lines, one file per workflow (workflows/archive.py
says what "archived" means). Read-only: nothing in the database changes."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from maas_domain.work import OPEN_STATES
from workflows.archive import write_timeline
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
        parser.add_argument("--out-dir", required=True, type=Path)
        parser.add_argument("--id", type=int, action="append", dest="ids", help="repeatable")
        parser.add_argument("--finished-before", help="YYYY-MM-DD (UTC)")

    def handle(self, *args: Any, **opts: Any) -> None:
        kind = KINDS.get(opts["kind"])
        if kind is None:
            raise CommandError(f"unknown kind {opts['kind']!r}; one of: {', '.join(KINDS)}")
        out: Path = opts["out_dir"]
        out.mkdir(parents=True, exist_ok=True)
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
        count = 0
        for wf in rows.iterator(chunk_size=500):
            write_timeline(kind.name, wf, out)
            count += 1
        self.stdout.write(
            f"exported {count} {kind.name} timeline(s) to {out} "
            f"at {timezone.now():%Y-%m-%dT%H:%M:%SZ}"
        )

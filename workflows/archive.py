"""Export a workflow's timeline as JSON lines, to archive it outside the database.

Timelines are history and stay in the database (retention never prunes them; docs/operations.md,
"Retention"). *Archived* means: a self-contained copy, one file per workflow, that an operator
keeps in long-term storage (object store, ticket, audit evidence) independently of database
backups. The first line describes the workflow, each following line is one timeline event,
oldest first. Nothing here holds a secret: timelines never contain secret values.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from workflows.models import COMMON_FIELDS, Workflow

FORMAT = "maascp.timeline/1"


def timeline_lines(kind: str, wf: Workflow) -> Iterator[str]:
    head: dict[str, Any] = {
        "record": "workflow",
        "format": FORMAT,
        "kind": kind,
        "id": wf.pk,
        "site": wf.site.name,
        "hostname": wf.hostname,
        **{name: getattr(wf, name) for name in COMMON_FIELDS},
    }
    yield json.dumps(head, cls=DjangoJSONEncoder, sort_keys=True)
    for event in wf.events.order_by("at", "id").iterator(chunk_size=2000):
        yield json.dumps(
            {
                "record": "event",
                "id": event.pk,
                "at": event.at,
                "stage": event.stage,
                "kind": event.kind,
                "attempt": event.attempt,
                "message": event.message,
                "data": event.data,
                "actor": event.actor_name,
            },
            cls=DjangoJSONEncoder,
            sort_keys=True,
        )


def write_timeline(kind: str, wf: Workflow, directory: Path) -> Path:
    """Write ``<kind>-<id>.jsonl`` in ``directory`` atomically (a reader never sees half a file;
    a re-run replaces it with the same or a longer timeline)."""
    target = directory / f"{kind}-{wf.pk}.jsonl"
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for line in timeline_lines(kind, wf):
                out.write(line + "\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

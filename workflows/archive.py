"""A workflow's timeline as JSON lines, to archive it outside the database.

*Archived* means: a self-contained copy, one file per workflow, that an operator keeps in
long-term storage (object store, ticket, audit evidence) independently of database backups. The
first line describes the workflow, each following line is one timeline event, oldest first.
``manage.py export_timelines`` writes them on demand; the retention task writes them under
``MAASCP_ARCHIVE_DIR`` before it prunes the timeline of a workflow closed longer than
``MAASCP_RETENTION_TIMELINE_DAYS`` (``prune_timelines``; docs/operations.md, "Retention and
archives"). Nothing here holds a secret: timelines never contain secret values.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from maas_domain.archive import archive_dir, dumps, write_jsonl
from maas_domain.observability import loki
from maas_domain.retention import delete_in_batches
from maas_domain.work import OPEN_STATES
from workflows.kinds import KINDS
from workflows.models import COMMON_FIELDS, Workflow

log = logging.getLogger("workflows.archive")

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
    yield dumps(head)
    for event in wf.events.order_by("at", "id").iterator(chunk_size=2000):
        yield dumps(
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
            }
        )


def correlation(kind: str, wf: Workflow) -> dict[str, Any]:
    """What operators correlate a workflow's entries by (docs/observability.md): site,
    onboarding or decommission id, node, MAAS system id, hostname, correlation id."""
    return {
        "site": wf.site.name,
        "site_id": wf.site_id,
        f"{kind}_id": wf.pk,
        "node_id": wf.node_id,
        "maas_system_id": wf.maas_system_id,
        "hostname": wf.hostname,
        "correlation_id": wf.correlation_id,
    }


def loki_entries(
    kind: str,
    wf: Workflow,
    maas_events: list[dict[str, Any]] | None = None,
    *,
    labels: dict[str, str] | None = None,
) -> list[loki.Entry]:
    """The workflow's timeline (and, given, the MAAS events of its machine as diagnostics
    reported them) as Loki entries: labels only for what takes few values (``app``,
    ``source`` = timeline or maas, ``workflow_kind``, ``site_id``), the correlation fields as
    structured metadata on every line, the line itself the archive's JSON record."""
    fields = correlation(kind, wf)
    metadata = loki.structured_metadata(fields)
    base = {"app": "maascp", **(labels or {}), "workflow_kind": kind, "site_id": str(wf.site_id)}
    entries: list[loki.Entry] = []
    for line in list(timeline_lines(kind, wf))[1:]:
        record = json.loads(line)
        at = datetime.fromisoformat(record["at"])
        entries.append(({**base, "source": "timeline"}, _ns(at), line, metadata))
    for event in maas_events or []:
        at = datetime.fromisoformat(event["created"])
        line = dumps({"record": "maas_event", **event, **fields})
        entries.append(({**base, "source": "maas"}, _ns(at), line, metadata))
    return entries


def _ns(at: datetime) -> str:
    return str(int(at.timestamp() * 1_000_000) * 1000)


def write_timeline(kind: str, wf: Workflow, directory: Path, name: str = "") -> Path:
    """Write ``<kind>-<id>.jsonl`` (or ``name``) in ``directory`` atomically (a reader never
    sees half a file; a re-run replaces it with the same or a longer timeline)."""
    return write_jsonl(directory / (name or f"{kind}-{wf.pk}.jsonl"), timeline_lines(kind, wf))


WORKFLOWS_PER_PASS = 200


def prune_timelines(cutoff: datetime) -> int:
    """Archive, then delete, the timeline of every workflow (any kind) closed before
    ``cutoff``; the workflow rows stay. Returns the events deleted. A workflow's archive is
    ``timelines/<kind>/<kind>-<id>.<last event id>.jsonl``: a workflow reopened and closed again
    later gets a second file, never a replaced one. A file that cannot be written stops the
    pass before anything of that workflow is deleted."""
    deleted = 0
    for kind in KINDS.values():
        parent = kind.event_parent
        events = kind.event_model._default_manager
        closed = {f"{parent}__finished_at__lt": cutoff}
        out = archive_dir("timelines", kind.name)
        while True:
            ids = list(
                events.filter(**closed)
                .exclude(**{f"{parent}__state__in": OPEN_STATES})
                .order_by()
                .values_list(f"{parent}_id", flat=True)
                .distinct()[:WORKFLOWS_PER_PASS]
            )
            if not ids:
                break
            for wf in kind.model.objects.select_related("site").filter(pk__in=ids):
                rows = events.filter(**{parent: wf})
                last = rows.order_by("-pk").values_list("pk", flat=True).first()
                write_timeline(kind.name, wf, out, f"{kind.name}-{wf.pk}.{last}.jsonl")
                deleted += delete_in_batches(rows.filter(pk__lte=last or 0))
    if deleted:
        log.info("archived and pruned closed workflows' timelines", extra={"events": deleted})
    return deleted

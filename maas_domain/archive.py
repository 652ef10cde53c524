"""Archives of history the database prunes (docs/operations.md, "Retention and archives").

Timelines of closed workflows and old audit rows are written here as JSON lines before the
retention task deletes them, so pruning never loses history: it moves it out of PostgreSQL into
files under ``MAASCP_ARCHIVE_DIR`` (``timelines/<kind>/…``, ``audit/<day>/…``) that an operator
keeps in long-term storage. Every file is written atomically (a reader never sees half of one)
and its name is unique to the rows it holds, so a second archival never replaces a first.
Nothing archived holds a secret: timelines never contain one and audit rows are redacted when
written (``audit.redact``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

AUDIT_FORMAT = "maascp.audit/1"


def archive_dir(*parts: str) -> Path:
    """``MAASCP_ARCHIVE_DIR``/parts, created on first use."""
    path = Path(settings.ARCHIVE_DIR).joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, cls=DjangoJSONEncoder, sort_keys=True)


def write_jsonl(target: Path, lines: Iterable[str]) -> Path:
    """Write ``lines`` (one JSON document each) to ``target`` atomically."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())  # on disk before the rows it holds are deleted
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def audit_record(row: Any) -> dict[str, Any]:
    return {
        "record": "audit",
        "format": AUDIT_FORMAT,
        "id": row.pk,
        "created_at": row.created_at,
        "actor": row.actor_name,
        "action": row.action,
        "target_type": row.target_type,
        "target_id": row.target_id,
        "before": row.before,
        "after": row.after,
        "reason": row.reason,
        "correlation_id": row.correlation_id,
    }

"""Open-workflow lookups shared by every app.

Site and profile services ask "what is still open on this site?" without importing the
workflow apps (which depend on this one): the answer comes from the kinds registered with the
workflow engine (``maas_domain.workflow.engine.KINDS``), the one registry of workflow kinds.
"""

from __future__ import annotations

from typing import Any


def open_workflows(**filters: Any) -> list[dict[str, Any]]:
    """Every open workflow matching ``filters`` (e.g. site=…, profile=…), as small dicts."""
    from maas_domain.workflow.engine import KINDS

    found: list[dict[str, Any]] = []
    for kind in KINDS.values():
        rows = kind.model.objects.filter(kind.model.open_filter(), **filters).values(
            "id", "hostname", "state"
        )[:50]
        found.extend({"kind": kind.name, **row} for row in rows)
    return found


def open_on_node(
    node_id: int, *, exclude: set[tuple[str, int]] | None = None
) -> list[dict[str, Any]]:
    """Open workflows holding a node (one open workflow per node across kinds), except
    ``exclude`` ((kind, id) pairs: the caller itself and its parent or children)."""
    skip = exclude or set()
    return [w for w in open_workflows(node_id=node_id) if (w["kind"], w["id"]) not in skip]

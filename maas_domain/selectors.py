"""Reads about one node across every workflow kind: its workflows, its merged timeline, what MAAS
last showed. Workflow kinds come from the registry (``kinds.KINDS``) and the last MAAS
observation from whichever app registers it (reconciliation does, from its ``ready()``), so this
module imports none of those apps (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import BigIntegerField, CharField, F, Q, QuerySet, Value
from django.db.models.functions import Cast

from maas_client.errors import MaasError
from maas_domain.models import Allocation, AuditLog, Node
from maas_domain.secrets import SecretsError
from maas_domain.secrets.sites import unreadable
from maas_domain.site_client import client_for_site
from maas_domain.work import KINDS, OPEN_STATES

WORKFLOW_FIELDS = ("id", "state", "stage", "attempt", "failure_class", "reason", "created_at",
                   "finished_at")  # fmt: skip
RECENT_WORKFLOWS = 10
MAAS_EVENTS_MERGED = 1000  # the machine's latest MAAS events merged into its timeline
TIMELINE_COLUMNS = ("at", "source", "kind", "workflow_kind", "workflow_id", "stage", "attempt",
                    "message", "actor_name", "data")  # fmt: skip

Observation = Callable[[Node], "dict[str, Any] | None"]
_observers: list[Observation] = []


def register_observation(source: Observation) -> None:
    """An app that watches MAAS registers how to read what it last saw of a node."""
    if source not in _observers:
        _observers.append(source)


def last_observation(node: Node) -> dict[str, Any] | None:
    for source in _observers:
        if (found := source(node)) is not None:
            return found
    return None


def node_workflows(node: Node) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(open workflows, the most recent ones) of every kind, newest first: one query per kind."""
    rows: list[dict[str, Any]] = []
    for name, kind in sorted(KINDS.items()):
        for row in (
            kind.model.objects.filter(node_id=node.pk)
            .order_by("-id")
            .values(*WORKFLOW_FIELDS)[:RECENT_WORKFLOWS]
        ):
            rows.append({"kind": name, **row})
    rows.sort(key=lambda r: r["created_at"], reverse=True)
    return [r for r in rows if r["state"] in OPEN_STATES], rows[:RECENT_WORKFLOWS]


def every_workflow(node: Node, *, limit: int = 500) -> list[dict[str, Any]]:
    """Every workflow of the node, of every kind (a reimage's child included), newest first
    (at most ``limit`` per kind): one query per kind. Each row names its kind and the model
    it lives in, so a page can link to it without importing the app."""
    rows: list[dict[str, Any]] = []
    for name, kind in sorted(KINDS.items()):
        for row in (
            kind.model.objects.filter(node_id=node.pk)
            .order_by("-id")
            .values(*WORKFLOW_FIELDS, "maas_system_id")[:limit]
        ):
            rows.append({"kind": name, "model": kind.model, **row})
    rows.sort(key=lambda r: r["created_at"], reverse=True)
    return rows


def active_allocations(node: Node) -> QuerySet[Allocation]:
    return node.allocations.filter(state="active").order_by("id")


def timeline(node: Node) -> QuerySet[Any]:
    """Every workflow event of the node (all kinds, a reimage's child included) and the
    operator actions on it and its allocations, as one query (a UNION), oldest first like
    every timeline (docs/api.md, "Timelines"): by time, then by row id within a source."""
    parts: list[QuerySet[Any]] = []
    for name, kind in sorted(KINDS.items()):
        parent = kind.event_parent
        rows = kind.event_model._default_manager.filter(**{f"{parent}__node_id": node.pk})
        parts.append(
            _columns(
                rows,
                t_at=F("at"),
                t_source=Value("workflow", output_field=CharField()),
                t_kind=F("kind"),
                t_workflow_kind=Value(name, output_field=CharField()),
                t_workflow_id=Cast(f"{parent}_id", BigIntegerField()),
                t_stage=F("stage"),
                t_attempt=Cast("attempt", BigIntegerField()),
                t_message=F("message"),
                t_actor=F("actor_name"),
                t_data=F("data"),
                t_id=F("id"),
            )
        )
    allocations = [str(pk) for pk in node.allocations.values_list("id", flat=True)]
    audit = Q(target_type="maas_domain.node", target_id=str(node.pk))
    if allocations:
        audit |= Q(target_type="maas_domain.allocation", target_id__in=allocations)
    parts.append(
        _columns(
            AuditLog.objects.filter(audit),
            t_at=F("created_at"),
            t_source=Value("operator", output_field=CharField()),
            t_kind=F("action"),
            t_workflow_kind=Value("", output_field=CharField()),
            t_workflow_id=Value(None, output_field=BigIntegerField()),
            t_stage=Value("", output_field=CharField()),
            t_attempt=Value(None, output_field=BigIntegerField()),
            t_message=F("reason"),
            t_actor=F("actor_name"),
            t_data=F("after"),
            t_id=F("id"),
        )
    )
    first, *rest = parts
    return first.union(*rest, all=True).order_by("t_at", "t_source", "t_id")


def _columns(rows: QuerySet[Any], **columns: Any) -> QuerySet[Any]:
    selected: QuerySet[Any] = rows.order_by().annotate(**columns).values_list(*columns)
    return selected


def as_entry(row: tuple[Any, ...]) -> dict[str, Any]:
    """A timeline row as the API shows it (the ordering id left out)."""
    return dict(zip(TIMELINE_COLUMNS, row[: len(TIMELINE_COLUMNS)], strict=True))


def maas_events(node: Node, limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The machine's latest ``limit`` MAAS events as timeline entries, oldest first, and how
    the fetch went. A MAAS or secrets problem is reported in the status, never raised."""
    if not node.maas_system_id:
        return [], {"requested": True, "available": False, "detail": "no MAAS machine"}
    try:
        client = client_for_site(node.site, read_attempts=1, read_timeout=10)
    except SecretsError as exc:
        return [], {"requested": True, "available": False, "detail": unreadable(exc)}
    try:
        page = client.events(system_ids=[node.maas_system_id], level="DEBUG", limit=limit)
    except MaasError as exc:
        return [], {"requested": True, "available": False,
                    "detail": f"MAAS {exc.kind}: {exc.message}"}  # fmt: skip
    finally:
        client.close()
    entries = [
        {
            "at": e.created,
            "source": "maas",
            "kind": e.type,
            "workflow_kind": "",
            "workflow_id": None,
            "stage": "",
            "attempt": None,
            "message": e.description,
            "actor_name": "",
            "data": {"maas_event_id": e.id, "level": e.level},
        }
        for e in reversed(page.events)  # MAAS answers newest first
    ]
    return entries, {"requested": True, "available": True, "detail": "",
                     "fetched": len(entries)}  # fmt: skip


def merged(db_rows: list[dict[str, Any]], maas_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Oldest first across both sources (a stable sort: each source keeps its own order)."""

    def key(row: dict[str, Any]) -> datetime:
        at: datetime = row["at"]
        return at

    return sorted(db_rows + maas_rows, key=key)

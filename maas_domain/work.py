"""Open work, as the core records see it: the workflow states, and the registry of workflow
kinds the core reads without importing the engine (``workflows/``) or the apps.

The engine registers each kind here (``workflows.kinds.register``); the core only needs a kind's
name, its row model and its timeline model (``Kind``). That is how a site knows it still has
open work, how a node shows its workflows and timeline, and how the gauges count every kind
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from django.db import models
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from maas_domain import events
from maas_domain.observability import loki
from maas_domain.observability.metrics import WORKFLOWS


class WorkflowState(models.TextChoices):
    # Labels equal the values: the API and the admin show the values as they are.
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    WAITING = "waiting", "waiting"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLING = "cancelling", "cancelling"
    CANCELLED = "cancelled", "cancelled"
    MANUAL_INTERVENTION = "manual_intervention", "manual_intervention"


W = WorkflowState
# A workflow in one of these states owns its host: nothing else may start on it. ``failed`` is
# closed so a host is not stuck behind a failure nobody can cancel; a recovery verb that reopens
# a failed workflow goes through the same unique constraint.
OPEN_STATES = (W.PENDING, W.RUNNING, W.WAITING, W.CANCELLING, W.MANUAL_INTERVENTION)
# States that hold one of the site's admission slots (max_concurrent_workflows).
ACTIVE_STATES = (W.RUNNING, W.WAITING, W.CANCELLING)


class WorkflowRow(Protocol):
    """What the core reads of a workflow row of any kind (events, diagnostics): the engine's
    ``workflows.models.Workflow`` is one."""

    pk: Any
    site: Any  # the MaasSite row
    site_id: int
    hostname: str
    maas_system_id: str
    correlation_id: str
    state: str
    stage: str
    attempt: int
    updated_at: datetime  # its last change (diagnostics older than it are not reused)


class Kind(Protocol):
    """What the core reads of a workflow kind (``workflows.kinds.WorkflowKind`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> Any: ...  # a concrete workflow model (``workflows.models.Workflow``)

    @property
    def event_model(self) -> Any: ...  # its timeline model

    @property
    def event_parent(self) -> str: ...  # the timeline row's foreign key to the workflow

    @property
    def node_start(self) -> tuple[str, tuple[str, ...]] | None: ...  # started from a node page


KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> None:
    """Called by the engine for every kind: the core, the event catalogue and the gauges know
    it from here on."""
    KINDS[kind.name] = kind
    events.register_kind(kind.name)
    loki.register_kind(kind.name)


def open_workflows(*, limit: int | None = 50, **filters: Any) -> list[dict[str, Any]]:
    """Open workflows of any kind matching ``filters`` (e.g. site=…, node_id=…), as small dicts:
    how a site or node learns what is still open on it. At most ``limit`` per kind (enough to
    name them in a refusal); ``None`` when every one matters (a batch's conflict check)."""
    found: list[dict[str, Any]] = []
    for kind in KINDS.values():
        rows = kind.model.objects.filter(state__in=OPEN_STATES, **filters).values(
            "id", "hostname", "state"
        )
        found.extend(
            {"kind": kind.name, **row} for row in (rows if limit is None else rows[:limit])
        )
    return found


def open_on_node(
    node_id: int, *, exclude: set[tuple[str, int]] | None = None
) -> list[dict[str, Any]]:
    """Open workflows holding a node (one open workflow per node across kinds), except
    ``exclude`` ((kind, id) pairs: the caller itself and its parent or children)."""
    skip = exclude or set()
    return [w for w in open_workflows(node_id=node_id) if (w["kind"], w["id"]) not in skip]


def workflows_gauge() -> list[GaugeMetricFamily]:
    """Workflows by kind and state for the metrics endpoint: one GROUP BY per registered kind,
    every state present (zeros included) so that series do not vanish."""
    family = GaugeMetricFamily(WORKFLOWS, "Workflows by kind and state", labels=["kind", "state"])
    for name, kind in sorted(KINDS.items()):
        counts = dict(kind.model.objects.order_by().values_list("state").annotate(n=Count("id")))
        for state in WorkflowState.values:
            family.add_metric([name, state], counts.get(state, 0))
    return [family]

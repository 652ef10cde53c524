"""The fleet at a glance: per site, the counts an operator scans first (docs/admin.md, "The
fleet page"), each one a link to the list it counts, filtered.

The page is built from *sections*, each a few columns counted in one query for every site at
once (a fleet of any size costs the same handful of queries). The core declares what it knows:
nodes per state, read from the node state machine's declared states (a state added to
``NodeState`` gets its column by itself) and workflows running, waiting or waiting for an
operator per registered kind (a kind registered with the engine gets its columns by itself).
Apps above the core add their sections from their ``ready()`` with ``register`` (drift by
severity: ``reconciliation``; batches in flight: ``onboarding``), as they add metrics sources.

``ARRIVING`` (the section "not counted yet") is the place kept for counts whose feature is not
built yet: each is shown marked "not counted yet", naming the issue that brings it. When the
feature lands it
registers a ``Section`` (or adds its ``Column`` to the nodes section) with a real count and its
entry here goes.

``tests/admin/test_fleet.py`` checks every count against the API's own answer for the same
filter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count
from django.urls import reverse

from maas_domain.humanize import NODE_STATE_COLOURS, STATE_COLOURS
from maas_domain.models import Cordon, MaasSite, Node
from maas_domain.work import KINDS, WorkflowState

Counts = dict[tuple[int, str], int]  # (site id, column key) -> count


@dataclass(frozen=True)
class Column:
    """One count: ``key`` names it (``nodes.active``), ``link(site_id)`` is the URL of the list
    it counts filtered to that site (``None``: every site). ``alarm``: a count above zero is
    shown in this colour. ``arriving``: not counted yet, and why (the issue that brings it)."""

    key: str
    label: str
    link: Callable[[int | None], str] | None = None
    alarm: str = ""
    arriving: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    order: int
    columns: Callable[[], list[Column]]
    counts: Callable[[], Counts] = field(default=lambda: {})


SECTIONS: dict[str, Section] = {}


def register(section: Section) -> None:
    """An app's section of the fleet page (called from its ``ready()``)."""
    SECTIONS[section.title] = section


def changelist(model: Any, **filters: Any) -> Callable[[int | None], str]:
    """The link of a count: ``model``'s admin list with ``filters`` and, given a site, that
    site's rows (the admin's own list-filter parameters)."""
    base = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")

    def link(site_id: int | None) -> str:
        params = {**filters, **({"site__id__exact": site_id} if site_id is not None else {})}
        return f"{base}?{urlencode(params)}"

    return link


# -- the core's sections ------------------------------------------------------------------------

# the node states that call for a look when above zero (the others are the fleet's shape),
# in their colours on every page (maas_domain/humanize.py)
NODE_ALARMS = {s: NODE_STATE_COLOURS[s] for s in ("quarantined", "draining")}


def _node_states() -> list[str]:
    """Every state the node state machine declares (its protected field's choices), in order."""
    return [str(value) for value, _ in Node._meta.get_field("state").choices or []]


def _node_columns() -> list[Column]:
    return [
        *(
            Column(
                f"nodes.{state}",
                state,
                changelist(Node, state__exact=state),
                alarm=NODE_ALARMS.get(state, ""),
            )
            for state in _node_states()
        ),
        # whatever their state: taking no new work (docs/operations.md, "Cordons")
        Column("nodes.cordoned", "cordoned", changelist(Node, cordoned="yes"), alarm="#b45309"),
    ]


def _node_counts() -> Counts:
    rows = Node.objects.order_by().values_list("site_id", "state").annotate(n=Count("id"))
    counts = {(site, f"nodes.{state}"): n for site, state, n in rows}
    held = (
        Cordon.objects.filter(lifted_at__isnull=True)
        .order_by()
        .values_list("node__site_id")
        .annotate(n=Count("node_id", distinct=True))
    )
    counts.update({(site, "nodes.cordoned"): n for site, n in held})
    return counts


# Workflow states the page counts, per kind: moving, and waiting for an operator.
WORKFLOW_STATES = {
    WorkflowState.RUNNING: "",
    WorkflowState.WAITING: "",
    WorkflowState.MANUAL_INTERVENTION: STATE_COLOURS[WorkflowState.MANUAL_INTERVENTION],
}
WORKFLOW_LABELS = {WorkflowState.MANUAL_INTERVENTION: "needs operator"}


def _workflow_section(order: int, name: str, kind: Any) -> Section:
    """A registered kind's section: its workflows running, waiting, waiting for an operator."""

    def columns() -> list[Column]:
        return [
            Column(
                f"workflows.{name}.{state}",
                WORKFLOW_LABELS.get(state, state),
                changelist(kind.model, state__exact=state),
                alarm=alarm,
            )
            for state, alarm in WORKFLOW_STATES.items()
        ]

    def counts() -> Counts:
        rows = (
            kind.model.objects.filter(state__in=list(WORKFLOW_STATES))
            .order_by()
            .values_list("site_id", "state")
            .annotate(n=Count("id"))
        )
        return {(site, f"workflows.{name}.{state}"): n for site, state, n in rows}

    return Section(f"{name}s", order, columns, counts)


def _workflow_sections() -> list[Section]:
    """One section per workflow kind the engine registered (a new kind shows by itself)."""
    return [_workflow_section(40 + i, n, k) for i, (n, k) in enumerate(sorted(KINDS.items()))]


# Counts whose feature is not built yet (see the module's docstring): shown, marked, not counted.
ARRIVING = [
    Column(
        "workflows.over_time_limit",
        "over time limit",
        arriving="arrives with issue 35 (workflow time limits)",
    ),
]

register(Section("nodes", 10, _node_columns, _node_counts))
register(Section("not counted yet", 20, lambda: list(ARRIVING)))


# -- the page's data ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    column: Column
    count: int | None  # None: not counted yet
    url: str


def fleet() -> dict[str, Any]:
    """Every site (active first, then by name) with a cell per column of every section, and a
    totals row; one query per section (one per kind for workflows) and one for the sites."""
    sections = sorted([*SECTIONS.values(), *_workflow_sections()], key=lambda s: s.order)
    layout = [(s, s.columns()) for s in sections]
    counts: Counts = {}
    for section in sections:
        counts.update(section.counts())
    sites = list(MaasSite.objects.order_by("status", "name").only("id", "name", "status", "health"))

    def cells(site_id: int | None) -> list[tuple[str, list[Cell]]]:
        """(section title, its cells) for one site, or every site (``None``)."""
        found = []
        for section, columns in layout:
            group = []
            for c in columns:
                if c.arriving:
                    group.append(Cell(c, None, ""))
                    continue
                n = (
                    counts.get((site_id, c.key), 0)
                    if site_id is not None
                    else sum(v for (_, key), v in counts.items() if key == c.key)
                )
                group.append(Cell(c, n, c.link(site_id) if c.link else ""))
            found.append((section.title, group))
        return found

    return {
        "rows": [{"site": site, "cells": cells(site.pk)} for site in sites],
        "totals": cells(None),
    }

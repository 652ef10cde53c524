"""Parent and child workflows: a workflow run on behalf of another (a reimage's redeploy is an
onboarding run by a decommission) keeps the one link between them, on the child: ``parent_kind``,
``parent_id`` and the parent's ``parent_attempt`` when it started the child
(``workflows.models.Workflow``). Everything else is derived here, for every kind alike: a
parent's children, the family that is not a conflict on one node, and the parent's wake when a
child ends (docs/architecture.md, "Parent and child workflows").
"""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from maas_domain.work import WorkflowState as W
from workflows.kinds import KINDS, M, WorkflowKind
from workflows.models import Workflow
from workflows.scheduling import Start, start_workflow, wake

ENDED = (W.SUCCEEDED, W.FAILED, W.CANCELLED)


def start_child(
    parent_kind: WorkflowKind[Any], parent: Workflow, kind: WorkflowKind[M], row: M, how: Start
) -> M:
    """Start ``row`` (a workflow of ``kind``) on behalf of ``parent``: linked to it, so the
    parent is woken when it ends and the two are one family on their node."""
    row.parent_kind, row.parent_id, row.parent_attempt = parent_kind.name, parent.pk, parent.attempt
    return start_workflow(kind, row, how)


def kind_of(wf: Workflow) -> WorkflowKind[Any]:
    """The registered kind whose row ``wf`` is."""
    return next(k for k in KINDS.values() if isinstance(wf, k.model))


def children(wf: Workflow) -> list[Workflow]:
    """Every workflow (of any kind) started on behalf of ``wf``, newest first."""
    name = kind_of(wf).name
    found: list[Workflow] = []
    for kind in KINDS.values():
        found += kind.model._default_manager.filter(parent_kind=name, parent_id=wf.pk)
    return sorted(found, key=lambda child: (child.created_at, child.pk), reverse=True)


def latest_child(wf: Workflow) -> Workflow | None:
    """The child ``wf`` started last, if any."""
    return next(iter(children(wf)), None)


def with_latest_child(rows: QuerySet[Any], child_kind: WorkflowKind[Any]) -> QuerySet[Any]:
    """``rows`` (workflows of one kind) with ``latest_child_id``: the newest workflow of
    ``child_kind`` each started, in the same query (a list's answer)."""
    parent_kind = next(k.name for k in KINDS.values() if k.model is rows.model)
    newest = child_kind.model._default_manager.filter(
        parent_kind=parent_kind, parent_id=OuterRef("pk")
    ).order_by("-created_at", "-id")
    annotated: QuerySet[Any] = rows.annotate(latest_child_id=Subquery(newest.values("id")[:1]))
    return annotated


def family(wf: Workflow) -> set[tuple[str, int]]:
    """``wf``'s parent and children as (kind, id) pairs: the workflows that share its node
    without being a conflict."""
    linked = {(kind_of(child).name, child.pk) for child in children(wf)}
    if wf.parent_kind and wf.parent_id:
        linked.add((wf.parent_kind, wf.parent_id))
    return linked


def wake_parent(wf: Workflow) -> None:
    """A child ended (succeeded, failed or cancelled): its parent, if it waits on it,
    continues. Called by the engine and the verbs in the transaction that ended the child."""
    parent_kind = KINDS.get(wf.parent_kind) if wf.parent_kind else None
    if parent_kind is not None and wf.parent_id and wf.state in ENDED:
        wake(parent_kind, wf.parent_id, f"{kind_of(wf).name} {wf.pk} {wf.state}")

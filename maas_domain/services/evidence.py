"""Quarantine evidence (docs/hardware.md, "Quarantine evidence"): frozen in the transaction that
quarantines the node, from what the failing stage stored (its report, with MAAS's events for
the machine) and the workflow's timeline so far. Written once, never changed
(``maas_domain/models/evidence.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from maas_domain import audit
from maas_domain.models import CordonReason, Node, QuarantineEvidence
from maas_domain.services import cordons

TIMELINE_KEPT = 300  # the workflow's latest timeline entries frozen with the evidence


def timeline_of(workflow: Any) -> list[dict[str, Any]]:
    """A workflow's timeline so far (any kind's ``events``), oldest first, for ``freeze``."""
    return [
        dict(e) for e in workflow.events.order_by("id").values("at", "kind", "stage", "message")
    ]


def freeze(
    *,
    node: Node,
    kind: str,
    workflow_kind: str,
    workflow_id: int,
    maas_system_id: str,
    reason: str,
    report: dict[str, Any],
    timeline: Iterable[dict[str, Any]],
) -> QuarantineEvidence:
    """One evidence row for ``node`` (locked by the caller, who quarantines it in the same
    transaction), audited. The report's ``maas_events`` are kept apart from the report."""
    body = {k: v for k, v in report.items() if k != "maas_events"}
    entries = [
        {
            "at": e["at"].isoformat() if hasattr(e["at"], "isoformat") else str(e["at"]),
            "kind": e["kind"],
            "stage": e.get("stage", ""),
            "message": e["message"],
        }
        for e in timeline
    ][-TIMELINE_KEPT:]
    evidence = QuarantineEvidence.objects.create(
        node=node,
        kind=kind,
        workflow_kind=workflow_kind,
        workflow_id=workflow_id,
        maas_system_id=maas_system_id,
        reason=reason[:500],
        report=body,
        maas_events=list(report.get("maas_events") or []),
        timeline=entries,
    )
    cordons.cordon(
        node, CordonReason.QUARANTINE, f"{kind}: {reason}", source=f"evidence:{evidence.pk}"
    )
    audit.record(
        actor=None,
        action="node.evidence",
        target=node,
        after={
            "evidence_id": evidence.pk,
            "kind": kind,
            "workflow": f"{workflow_kind} {workflow_id}",
        },
        reason=reason[:500],
    )
    return evidence

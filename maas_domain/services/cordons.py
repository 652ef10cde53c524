"""Cordons (docs/operations.md, "Cordons"): why a node may not take new work.

A node with any active cordon is unschedulable at once, whatever its state: an open critical
drift of its machine, a quarantine (its evidence frozen), a repair, an operator's cordon with a
reason. ``POST /allocations`` on it answers 409 naming the reasons; a tenant's existing
allocation is left alone, and a ``node.cordoned`` event tells the allocation domain to drain it.
A cordon is lifted by a requalification (conformance and acceptance passed on data newer than
the cordon) or by an operator with a reason. Every change is audited and announced.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from maas_domain import audit, events
from maas_domain.errors import Conflict, InvalidInput
from maas_domain.models import Cordon, CordonReason, MaasSite, Node, NodeState
from maas_domain.observability.metrics import NODES_CORDONED
from maas_domain.services.common import lock

CORDONED = "node.cordoned"
UNCORDONED = "node.uncordoned"
# An operator may cordon a node in these states (a retired node takes no work anyway; one
# never onboarded has none to refuse).
CORDONABLE = (
    NodeState.PROVISIONING,
    NodeState.ACTIVE,
    NodeState.DRAINING,
    NodeState.QUARANTINED,
    NodeState.IN_REPAIR,
)


def active(node_ids: Iterable[int] | None = None) -> QuerySet[Cordon]:
    rows = Cordon.objects.filter(lifted_at__isnull=True)
    return rows if node_ids is None else rows.filter(node_id__in=list(node_ids))


def reasons(node: Node) -> list[dict[str, Any]]:
    """The node's active cordons, oldest first, as the API and a refusal show them."""
    return [shown(c) for c in active([node.pk]).order_by("id")]


def shown(cordon: Cordon) -> dict[str, Any]:
    return {
        "id": cordon.pk,
        "reason": cordon.reason,
        "source": cordon.source,
        "detail": cordon.detail,
        "created_at": cordon.created_at,
        "created_by": cordon.created_by,
    }


def cordon(
    node: Node, reason: str, detail: str, *, source: str = "", actor: audit.Actor = None
) -> Cordon | None:
    """Cordon ``node`` (the caller holds its row lock, or is the only writer of this cause) in
    the caller's transaction; None if the same cause already cordons it."""
    return cordon_many([(node, reason, detail, source)], actor=actor)[0]


def cordon_many(
    causes: list[tuple[Node, str, str, str]], *, actor: audit.Actor = None
) -> list[Cordon | None]:
    """Cordon each (node, reason, detail, source) not already cordoned for that cause: one read
    of the cordons, one insert, one audit row and one event per new cordon. A cause with a
    source (a drift record, a piece of evidence) cordons its node once: after an operator lifted
    it, the same drift seen again by the next run does not cordon the node again."""
    if not causes:
        return []
    ids = {n.pk for n, *_ in causes}
    existing = set(
        Cordon.objects.filter(
            Q(lifted_at__isnull=True) | ~Q(source=""), node_id__in=ids
        ).values_list("node_id", "reason", "source")
    )
    by = audit.actor_name(actor) if actor is not None else ""
    made: list[Cordon | None] = []
    fresh: list[Cordon] = []
    for node, reason, detail, source in causes:
        key = (node.pk, reason, source)
        if key in existing:
            made.append(None)
            continue
        existing.add(key)
        row = Cordon(node=node, reason=reason, source=source, detail=detail[:500], created_by=by)
        fresh.append(row)
        made.append(row)
    if not fresh:
        return made
    with transaction.atomic():
        Cordon.objects.bulk_create(fresh)
        audit.record_many(
            actor=actor,
            entries=[
                audit.Entry(
                    "node.cordon",
                    row.node,
                    after={"cordon_id": row.pk, "reason": row.reason, "source": row.source},
                    reason=row.detail,
                )
                for row in fresh
            ],
        )
        events.emit_others(CORDONED, [_payload(row.node, row, row.detail) for row in fresh])
    return made


def operator_cordon(*, actor: audit.Actor, node_id: int, reason: str) -> Node:
    """An operator takes a node out of scheduling, with a reason (audited)."""
    reason = _required(reason)
    with transaction.atomic():
        node = lock(Node.objects.select_related("site"), node_id, "Node")
        if node.state not in CORDONABLE:
            raise Conflict(
                f"node {node.hostname} is {node.state}; only a node in "
                f"{', '.join(CORDONABLE)} can be cordoned",
                current_state=node.state,
            )
        if cordon(node, CordonReason.OPERATOR, reason, actor=actor) is None:
            raise Conflict(
                f"node {node.hostname} is already cordoned by an operator",
                cordons=reasons(node),
            )
    return node


def operator_uncordon(*, actor: audit.Actor, node_id: int, reason: str) -> Node:
    """An operator returns a node to scheduling, every cordon lifted, with a reason (audited).
    A node in repair comes back only by its requalification."""
    reason = _required(reason)
    with transaction.atomic():
        node = lock(Node.objects.select_related("site"), node_id, "Node")
        if node.state == NodeState.IN_REPAIR:
            raise Conflict(
                f"node {node.hostname} is in_repair; it returns by requalification",
                current_state=node.state,
            )
        if not lift(node, by=audit.actor_name(actor), why=reason, actor=actor):
            raise Conflict(f"node {node.hostname} is not cordoned", current_state=node.state)
    return node


def lift(node: Node, *, by: str, why: str, actor: audit.Actor = None) -> int:
    """Lift every active cordon of ``node`` in the caller's transaction (an operator's
    uncordon, or a requalification that passed); how many were lifted."""
    rows = list(active([node.pk]).select_for_update())
    if not rows:
        return 0
    now = timezone.now()
    active([node.pk]).update(lifted_at=now, lifted_by=by[:150], lift_reason=why[:500])
    audit.record(
        actor=actor,
        action="node.uncordon",
        target=node,
        before={"cordons": [{"id": c.pk, "reason": c.reason} for c in rows]},
        after={"cordons": []},
        reason=why,
    )
    events.emit_other(UNCORDONED, _payload(node, None, why))
    return len(rows)


def _required(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("A reason is required.", fields={"reason": ["This field is required."]})
    return reason


def _payload(node: Node, cordon: Cordon | None, reason: str) -> dict[str, Any]:
    return {
        "site_id": node.site_id,
        "node_id": node.pk,
        "hostname": node.hostname,
        "maas_system_id": node.maas_system_id or None,
        "node_state": node.state,
        "cordon_reason": cordon.reason if cordon is not None else None,
        "source": cordon.source if cordon is not None else None,
        "reason": reason[:500],
    }


def cordons_gauge() -> list[GaugeMetricFamily]:
    """Active cordons by site and reason (zeros included, so series do not vanish)."""
    family = GaugeMetricFamily(
        NODES_CORDONED, "Active node cordons by site and reason", labels=["site", "reason"]
    )
    counts = {
        (site, reason): n
        for site, reason, n in active()
        .order_by()
        .values_list("node__site__name", "reason")
        .annotate(n=Count("id"))
    }
    for site in sorted(MaasSite.objects.values_list("name", flat=True)):
        for reason in CordonReason.values:
            family.add_metric([site, reason], counts.get((site, reason), 0))
    return [family]

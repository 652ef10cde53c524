"""Allocations: a tenant workload takes an active node, and releases it when drained.

Taking a node needs it active with no open workflow (checked under the node's row lock, the lock
every workflow start takes). Releasing is the holder's drain; a decommission's force release is
the decommission's own (decommission/services.py). Each change is audited.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from maas_domain import audit
from maas_domain.errors import Conflict, InvalidInput
from maas_domain.models import Allocation, AllocationState, Node, NodeState
from maas_domain.services import cordons
from maas_domain.services.common import lock
from maas_domain.work import open_on_node


def allocation_create(*, actor: audit.Actor, node_id: int, holder: str) -> Allocation:
    with transaction.atomic():
        node = Node.objects.select_for_update().filter(pk=node_id).first()
        if node is None:
            raise InvalidInput(
                "Invalid allocation.", fields={"node_id": [f"Node {node_id} does not exist."]}
            )
        if node.state != NodeState.ACTIVE:
            raise Conflict(
                f"node {node.hostname} is {node.state}; only an active node can be allocated",
                node={"id": node.pk, "state": node.state},
            )
        if held := cordons.reasons(node):
            raise Conflict(
                f"node {node.hostname} is cordoned ("
                + "; ".join(f"{c['reason']}: {c['detail']}" for c in held)[:400]
                + "); it takes no new allocation",
                cordons=held,
            )
        if busy := open_on_node(node.pk):
            raise Conflict(
                f"node {node.hostname} has an open {busy[0]['kind']} ({busy[0]['id']})",
                open_workflows=busy,
            )
        allocation = Allocation.objects.create(node=node, holder=holder)
        audit.record(
            actor=actor,
            action="allocation.create",
            target=allocation,
            after={"node_id": node.pk, "holder": holder, "state": allocation.state},
        )
    return allocation


def allocation_release(*, actor: audit.Actor, allocation_id: int, reason: str = "") -> Allocation:
    with transaction.atomic():
        allocation = lock(Allocation.objects.all(), allocation_id, "Allocation")
        if allocation.state != AllocationState.ACTIVE:
            raise Conflict(
                f"allocation {allocation.pk} is already {allocation.state}",
                current_state=allocation.state,
            )
        allocation.release()
        allocation.released_at = timezone.now()
        allocation.released_by = audit.actor_name(actor)
        allocation.release_reason = reason[:500]
        allocation.save()
        audit.record(
            actor=actor,
            action="allocation.release",
            target=allocation,
            before={"state": AllocationState.ACTIVE},
            after={"state": allocation.state, "node_id": allocation.node_id},
            reason=reason,
        )
    return allocation

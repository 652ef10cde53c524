"""Stage 2, drain: the node leaves its pool before MAAS is touched."""

from __future__ import annotations

from maas_domain.models import Node, NodeState
from workflows import family
from workflows.kinds import stage
from workflows.results import Done, Fail, Result

from .common import Ctx


@stage(timeout=600)
def drain(ctx: Ctx) -> Result:
    """The node leaves its pool before MAAS is touched."""
    with ctx.locked():
        node = Node.objects.select_for_update().get(pk=ctx.wf.node_id)
        if node.state == NodeState.DRAINING:
            return Done("node already draining")
        # provisioning by this workflow's own redeploy (a retry of the reimage)
        ours = node.state == NodeState.PROVISIONING and family.latest_child(ctx.wf) is not None
        if node.state not in (NodeState.ACTIVE, NodeState.QUARANTINED) and not ours:
            return Fail("node_state", f"node is {node.state}; it cannot be drained")
        before = node.state
        node.drain()
        node.save(update_fields=["state", "updated_at"])
    return Done(f"node drained from its pool (was {before})")

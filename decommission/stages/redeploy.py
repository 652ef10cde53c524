"""Stage 4a (reimage), redeploy: a child onboarding runs the onboarding's own conformance,
acceptance, payload, deploy, enrollment and completion stages with new tokens."""

from __future__ import annotations

from maas_domain.models import Node, NodeState
from onboarding.models import Onboarding
from onboarding.workflow import KIND as ONBOARDING
from workflows import family
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.models import Workflow
from workflows.results import Done, Fail, Result, Wait
from workflows.scheduling import Start

from ..models import Decommission, Mode
from .common import Ctx, W

CHILD = "by the child onboarding, from its conformance stage"


def reimaging(wf: Decommission) -> bool:
    return wf.mode == Mode.REIMAGE


@stage(
    timeout=10800,
    calls=(
        C("deploy", CHILD, by_child=True),
        C("events", CHILD, by_child=True),
        C("release", CHILD, by_child=True),
        C("abort", CHILD, by_child=True),
    ),
    applies=reimaging,
)
def redeploy(ctx: Ctx) -> Result:
    """A child onboarding runs payload → deploy → hardware sync → enrollment → complete with
    new tokens: the deploy logic exists once. A retry of this stage starts a new child."""
    wf = ctx.wf
    child = family.latest_child(wf)
    fresh = child is None or (
        child.state in (W.FAILED, W.CANCELLED) and wf.attempt > (child.parent_attempt or 0)
    )
    if fresh:
        child = _start_child(ctx)
        ctx.event(
            "reimage.started",
            f"redeploying through onboarding {child.pk} (conformance, acceptance, payload, deploy, "
            "enrollment, gates)",
            onboarding_id=child.pk,
        )
        return Wait(f"redeploying through onboarding {child.pk}", check_in=60)
    assert child is not None
    if child.state == W.SUCCEEDED:
        return Done(f"onboarding {child.pk} redeployed and enrolled the node")
    if child.state == W.FAILED:
        return Fail(
            "reimage",
            f"redeploy failed in onboarding {child.pk} at {child.stage}: {child.reason}",
            {"onboarding_id": child.pk, "onboarding_failure_class": child.failure_class},
        )
    if child.state == W.CANCELLED:
        return Fail("reimage", f"redeploy onboarding {child.pk} was cancelled")
    return Wait(f"onboarding {child.pk} is {child.state} at {child.stage}", check_in=60)


def _start_child(ctx: Ctx) -> Workflow:
    """The redeploy onboarding, started at its conformance stage inside this workflow's
    admission slot (it runs at once), with its own tokens, timeline, audit row and started
    event; the storage layout and PXE link the first onboarding set are MAAS's still."""
    wf = ctx.wf
    with ctx.locked():
        node = Node.objects.select_for_update().get(pk=wf.node_id)
        if node.state != NodeState.PROVISIONING:
            node.start_provisioning()
            node.save(update_fields=["state", "updated_at"])
        return family.start_child(
            ctx.kind,
            wf,
            ONBOARDING,
            Onboarding(
                site=wf.site,
                profile=wf.profile,
                sku=node.sku,
                node=node,
                hostname=wf.hostname,
                ipmi_ip=node.ipmi_ip or "",
                maas_system_id=wf.maas_system_id,
                # the machine is judged against its SKU again (and tested, if policy asks)
                # before it is redeployed: a reimage never hands back a node that lost a GPU
                stage="conformance",
                checkpoint="commission",
                layout_kept=True,
                correlation_id=wf.correlation_id,
            ),
            Start(
                actor=None,
                message=f"reimage of decommission {wf.pk}: redeploy with new tokens",
                audit_action="onboarding.start",
                reason=f"reimage of decommission {wf.pk}",
                event_data={"parent_kind": ctx.kind.name, "parent_id": wf.pk},
                run_now=True,
            ),
        )

"""Stage 5, requalify: the machine marked fixed in MAAS, then a child onboarding commissions it
again (fresh inventory), judges it against its SKU, runs the profile's acceptance tests and,
per policy (``requalify_redeploys``), deploys it through the onboarding's own stages; only its
success returns the node (docs/repair.md, "Requalification"). A failure leaves the node in
quarantine with the new evidence."""

from __future__ import annotations

from maas_domain.models import Node, NodeState
from onboarding.models import Onboarding
from onboarding.workflow import KIND as ONBOARDING
from workflows import family
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, Wait
from workflows.scheduling import Start

from .common import GET, Ctx, S, W, comment, machine_of

CHILD = "by the requalifying onboarding"


@stage(
    timeout=None,  # the child's own stages are timed
    calls=(
        GET,
        C("mark_fixed", "once the repair is reported done"),
        C("commission", CHILD, by_child=True),
        C("machine_hardware", CHILD, by_child=True),
        C("node_devices", CHILD, by_child=True),
        C("test", CHILD, by_child=True),
        C("deploy", CHILD, by_child=True),
    ),
    expects=(S.BROKEN, S.READY, S.COMMISSIONING, S.TESTING, S.ALLOCATED, S.DEPLOYING,
             S.DEPLOYED, S.FAILED_COMMISSIONING, S.FAILED_TESTING, S.FAILED_DEPLOYMENT),
)  # fmt: skip
def requalify(ctx: Ctx) -> Result:
    wf = ctx.wf
    child = family.latest_child(wf)
    if child is None or (
        child.state in (W.FAILED, W.CANCELLED) and wf.attempt > (child.parent_attempt or 0)
    ):
        return _start(ctx)
    if child.state == W.SUCCEEDED:
        return Done(f"requalified by onboarding {child.pk}: the node is back in service")
    if child.state == W.FAILED:
        return Fail(
            "requalification",
            f"requalification failed in onboarding {child.pk} at {child.stage}: {child.reason}",
            {"onboarding_id": child.pk, "onboarding_failure_class": child.failure_class},
        )
    if child.state == W.CANCELLED:
        return Fail("requalification", f"requalifying onboarding {child.pk} was cancelled")
    return Wait(f"onboarding {child.pk} is {child.state} at {child.stage}", check_in=600)


def _start(ctx: Ctx) -> Result:
    machine = machine_of(ctx)
    ctx.observe(machine)
    if machine.status == S.BROKEN:
        if ctx.sent("mark_fixed"):
            return Wait(
                "waiting for MAAS to mark the machine fixed", machine.system_id, int(S.BROKEN), 60
            )
        machine = ctx.maas.mark_fixed(machine.system_id, comment=comment(ctx, "repaired"))
        ctx.event("maas.action", f"marked fixed in MAAS: {machine.status_name}")
    if machine.status != S.READY:
        # mark_fixed answers Deployed for a machine broken while deployed: never handed back
        # without a new commissioning, which MAAS refuses there
        return Fail(
            "unexpected_state",
            f"machine is {machine.status_name} in MAAS after mark-fixed; requalification "
            "commissions a Ready machine (release it, then retry)",
        )
    child = _start_child(ctx)
    ctx.event(
        "requalify.started",
        f"requalifying through onboarding {child.pk}: commission, conformance, acceptance"
        + (", deploy" if child.deploys else ""),
        onboarding_id=child.pk,
    )
    return Wait(f"requalifying through onboarding {child.pk}", check_in=600)


def _start_child(ctx: Ctx) -> Onboarding:
    """The requalifying onboarding, started at its commission stage inside this workflow's
    admission slot, commissioning even the Ready machine (fresh facts only)."""
    wf = ctx.wf
    with ctx.locked():
        node = Node.objects.select_for_update().get(pk=wf.node_id)
        if node.state == NodeState.IN_REPAIR:
            node.requalify()
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
                stage="commission",
                checkpoint="discover",
                recommission=True,
                deploys=ctx.policy.requalify_redeploys,
                correlation_id=wf.correlation_id,
            ),
            Start(
                actor=None,
                message=f"requalification of repair {wf.pk}",
                audit_action="onboarding.start",
                reason=f"requalification of repair {wf.pk}",
                event_data={"parent_kind": ctx.kind.name, "parent_id": wf.pk},
                run_now=True,
            ),
        )

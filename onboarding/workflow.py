"""The onboarding workflow kind: its stages (``stages.py``), policy, and what happens to its
node when it ends."""

from __future__ import annotations

from maas_domain.models import EvidenceKind, Node, NodeState, QuarantineEvidence
from maas_domain.policy import Policy
from maas_domain.services import cordons
from maas_domain.services import evidence as evidence_services
from onboarding import budget
from onboarding.models import Onboarding, OnboardingEvent
from onboarding.stages import CANCEL, RESET, STAGES, adopt_stage
from workflows.kinds import WorkflowKind


def _policy(wf: Onboarding) -> Policy:
    return wf.profile.effective_policy()


def _on_success(wf: Onboarding) -> None:
    """The node row reaches active with the workflow (a completion gate, same transaction)."""
    node = Node.objects.select_for_update().get(pk=wf.node_id or 0)
    node.maas_system_id = wf.maas_system_id
    if node.state != NodeState.ACTIVE:
        node.activate()
    node.save()
    if wf.commissioned_attempt == wf.attempt:
        # requalified: commissioned by this run, judged (and tested) on those fresh facts
        cordons.lift(
            node,
            by=f"{KIND.name} {wf.pk}",
            why="requalified: commissioned again, conformance and acceptance passed",
        )
    budget.after_success(wf)


# A failure that is the machine's, not the run's: the node is quarantined with the evidence
# (docs/hardware.md), the report the failing stage stored.
QUARANTINING = {
    EvidenceKind.HARDWARE_NONCONFORMANT: "hardware_report",
    EvidenceKind.ACCEPTANCE_FAILED: "acceptance_report",
}


def _on_failure(wf: Onboarding) -> None:
    if wf.failure_class in QUARANTINING and wf.node_id:
        _quarantine(wf)
    budget.after_failure(wf)


def _quarantine(wf: Onboarding) -> None:
    node = Node.objects.select_for_update().get(pk=wf.node_id or 0)
    if node.state not in (NodeState.PROVISIONING, NodeState.ACTIVE):
        return
    node.quarantine()
    if not node.maas_system_id and not _system_id_taken(node, wf.maas_system_id):
        node.maas_system_id = wf.maas_system_id  # the admin page's MAAS diagnostics need it
    node.save()
    report = getattr(wf, QUARANTINING[EvidenceKind(wf.failure_class)])
    evidence = evidence_services.freeze(
        node=node,
        kind=wf.failure_class,
        workflow_kind=KIND.name,
        workflow_id=wf.pk,
        maas_system_id=wf.maas_system_id,
        reason=wf.reason,
        report=report,
        timeline=evidence_services.timeline_of(wf),
    )
    KIND.add_event(
        wf,
        "node.quarantined",
        f"node {node.hostname} quarantined ({wf.failure_class}); evidence {evidence.pk}",
        evidence_id=evidence.pk,
    )


def _system_id_taken(node: Node, system_id: str) -> bool:
    return (
        not system_id
        or Node.objects.filter(site_id=node.site_id, maas_system_id=system_id)
        .exclude(pk=node.pk)
        .exclude(state=NodeState.RETIRED)
        .exists()
    )


def _on_reopen(wf: Onboarding) -> None:
    """A reopened workflow describes its active run: no completion, no node failure heard yet.
    Within the same attempt (resume, adopt) what the node proved stands; a new attempt needs a
    new enrollment and a running agent again. That the site bundle ran belongs to the payload
    the node runs: a new deploy clears it (docs/onboarding.md, "Reruns and adopt")."""
    wf.completed_at = None
    wf.node_failure = wf.node_failure_detail = ""
    if (
        wf.node_id
        and QuarantineEvidence.objects.filter(workflow_kind=KIND.name, workflow_id=wf.pk).exists()
    ):
        # its hardware failed (and may have been repaired since): judged again only on the
        # facts of a new commissioning, never on the inventory that failed
        wf.recommission = True
    if wf.node_id:
        _take_back_from_quarantine(wf)
    if wf.token_attempt != wf.attempt:  # a new attempt: its tokens are not even minted yet
        wf.enrolled_at = wf.enrolled_attempt = None
        wf.agent_started_at = wf.enrollment_adopted_at = None


def _take_back_from_quarantine(wf: Onboarding) -> None:
    """Reopened after its hardware put the node in quarantine (repaired, re-tested): the node
    is provisioning again, and the stages judge the machine anew. Quarantine for any other
    reason (disks not erased) is not this workflow's to lift."""
    node = Node.objects.select_for_update().get(pk=wf.node_id or 0)
    latest = node.evidence.order_by("-id").first()
    if (
        node.state == NodeState.QUARANTINED
        and latest is not None
        and (
            latest.workflow_kind,
            latest.workflow_id,
        )
        == (KIND.name, wf.pk)
    ):
        node.recheck()
        node.save()


KIND: WorkflowKind[Onboarding] = WorkflowKind(
    name="onboarding",
    model=Onboarding,
    event_model=OnboardingEvent,
    stages=STAGES,
    policy=_policy,
    on_success=_on_success,
    on_failure=_on_failure,
    on_hold=budget.after_failure,
    on_reopen=_on_reopen,
    reset=RESET,
    cancel=CANCEL,
    adopt=adopt_stage,
    admission_filter=budget.held_back,
    select_related=("site", "profile__site", "sku", "node"),
)

"""The onboarding workflow as the engine sees it: stages, policy, hooks on success/failure."""

from __future__ import annotations

from maas_domain.models import Node
from maas_domain.policy import Policy
from maas_domain.workflow import engine
from onboarding.models import Onboarding, OnboardingEvent
from onboarding.stages import CANCEL, RESET, STAGES

add_event = engine.event_writer(OnboardingEvent, "onboarding")


def _policy(wf: Onboarding) -> Policy:
    return wf.profile.effective_policy()


def _on_success(wf: Onboarding) -> None:
    """The node row reaches active with the workflow (a completion gate, same transaction)."""
    node = Node.objects.select_for_update().get(pk=wf.node_id or 0)
    node.maas_system_id = wf.maas_system_id
    if node.state != "active":
        node.activate()
    node.save()
    _wake_parent(wf)


def _wake_parent(wf: Onboarding) -> None:
    """A workflow that runs this onboarding on its behalf (reimage) continues when it ends."""
    if wf.parent_kind and wf.parent_id:
        engine.wake(engine.KINDS[wf.parent_kind], wf.parent_id, f"onboarding {wf.pk} {wf.state}")


def _family(wf: Onboarding) -> set[tuple[str, int]]:
    return {(wf.parent_kind, wf.parent_id)} if wf.parent_kind and wf.parent_id else set()


KIND = engine.WorkflowKind(
    name="onboarding",
    model=Onboarding,
    stages=STAGES,
    add_event=add_event,
    policy=_policy,
    on_success=_on_success,
    select_related=("site", "profile__site", "sku", "node"),
    on_failure=_wake_parent,
    on_cancelled=_wake_parent,
    reset=RESET,
    cancel=CANCEL,
    family=_family,
)

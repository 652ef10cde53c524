"""A small fake workflow kind for driving the engine directly: its own table, three scripted
stages, a reset and a cancel stage, and hooks that record what they saw.

A test scripts what each stage returns (``Script.then``) and calls the engine's functions
itself: no broker, no worker, no MAAS. What the engine would send to Celery is recorded by the
``sent`` fixture (tests/workflow/conftest.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q

from maas_domain.models import Node
from maas_domain.policy import Policy, resolve_policy
from maas_domain.work import OPEN_STATES
from workflows.kinds import Call, RetryPolicy, Stage, StageContext, WorkflowKind
from workflows.models import Workflow, WorkflowEvent
from workflows.results import Done, Result


class FakeWorkflow(Workflow):
    # Declared for the type checker: the app label is not an installed app, so the Django
    # plugin does not add the manager and the reverse relation itself.
    objects: ClassVar[models.Manager[FakeWorkflow]] = models.Manager()
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    skip_second = models.BooleanField(default=False)

    class Meta:
        app_label = "workflow_tests"
        db_table = "workflow_tests_fake"
        constraints = [
            models.UniqueConstraint(
                fields=["site", "hostname"],
                condition=Q(state__in=OPEN_STATES),
                name="workflow_tests_one_open_per_host",
            )
        ]


class FakeEvent(WorkflowEvent):
    objects: ClassVar[models.Manager[FakeEvent]] = models.Manager()
    fake = models.ForeignKey(FakeWorkflow, on_delete=models.CASCADE, related_name="events")

    class Meta(WorkflowEvent.Meta):
        app_label = "workflow_tests"
        db_table = "workflow_tests_fake_events"


Step = Result | Exception | Callable[[StageContext[FakeWorkflow]], Result]


class Script:
    """What each stage of each fake workflow returns, in order (``Done`` when nothing is left),
    and every call the stages and hooks received."""

    def __init__(self) -> None:
        self.steps: dict[tuple[int, str], list[Step]] = defaultdict(list)
        self.calls: list[tuple[str, int]] = []

    def then(self, wf: FakeWorkflow, stage: str, *steps: Step) -> Script:
        self.steps[(wf.pk, stage)].extend(steps)
        return self

    def stage(self, name: str) -> Callable[[StageContext[FakeWorkflow]], Result]:
        def run(ctx: StageContext[FakeWorkflow]) -> Result:
            self.calls.append((name, ctx.wf.pk))
            queue = self.steps[(ctx.wf.pk, name)]
            step = queue.pop(0) if queue else Done(f"{name} done")
            if isinstance(step, Exception):
                raise step
            return step(ctx) if callable(step) else step

        return run

    def hook(self, name: str) -> Callable[[FakeWorkflow], None]:
        def hook(wf: FakeWorkflow) -> None:
            self.calls.append((name, wf.pk))

        return hook


def _policy(wf: FakeWorkflow) -> Policy:
    return resolve_policy(wf.site.policy)


def _adopt(wf: FakeWorkflow) -> tuple[str, dict[str, Any]]:
    return "third", {"maas_status": "Deployed", "adopted_stage": "third"}


def make_kind(script: Script) -> WorkflowKind[FakeWorkflow]:
    return WorkflowKind(
        name="fake",
        model=FakeWorkflow,
        event_model=FakeEvent,
        stages=[
            Stage("first", script.stage("first"), 300, (Call("get_machine"),)),
            Stage(
                "second",
                script.stage("second"),
                600,
                (Call("deploy"),),
                applies=lambda wf: not wf.skip_second,
            ),
            # a stage whose retries differ from the engine's (docs/architecture.md)
            Stage("third", script.stage("third"), 60, retry=RetryPolicy(1, max_backoff=5.0)),
        ],
        policy=_policy,
        on_success=script.hook("on_success"),
        on_failure=script.hook("on_failure"),
        on_cancelled=script.hook("on_cancelled"),
        on_hold=script.hook("on_hold"),
        on_reopen=script.hook("on_reopen"),
        reset=Stage("reset", script.stage("reset"), None, (Call("release"),)),
        cancel=Stage("cancel", script.stage("cancel"), None, (Call("abort"),)),
        adopt=_adopt,
        select_related=("site",),
    )

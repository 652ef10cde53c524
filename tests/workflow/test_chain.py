"""Stages that finish at once run one after another in one execution: one claim, one short
transaction per stage, no Celery hand-off between them; a stage that waits, retries or fails,
a spent time budget, or a change to the row made by someone else ends or restarts the chain."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from tests.workflow.conftest import Sent
from tests.workflow.fake import FakeEvent, FakeWorkflow, Script
from workflows import step
from workflows.kinds import StageContext
from workflows.results import Done, Wait

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def chained(settings: Any) -> None:
    settings.WORKFLOW_CHAIN_SECONDS = 60


def go(wf: FakeWorkflow, capture: Any) -> str:
    wf.refresh_from_db()
    with capture(execute=True):
        return step.run("fake", wf.pk, wf.dispatch)


def timeline(wf: FakeWorkflow) -> list[tuple[str, str]]:
    rows = FakeEvent.objects.filter(fake=wf).order_by("at", "id")
    return list(rows.values_list("kind", "stage"))


def test_one_execution_runs_every_stage_that_finishes_at_once(
    running: Any, sent: Sent, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    wf = running()
    dispatch = wf.dispatch
    sent.clear()
    assert go(wf, django_capture_on_commit_callbacks) == "done"
    wf.refresh_from_db()
    assert (wf.state, wf.checkpoint, wf.dispatch) == ("succeeded", "third", dispatch)
    assert sent.advances() == []  # no hand-off between the stages
    assert [c for c in script.calls if c[0] in ("first", "second", "third")] == [
        ("first", wf.pk),
        ("second", wf.pk),
        ("third", wf.pk),
    ]
    assert timeline(wf)[1:] == [
        ("stage.started", "first"),
        ("stage.completed", "first"),
        ("stage.started", "second"),
        ("stage.completed", "second"),
        ("stage.started", "third"),
        ("stage.completed", "third"),
        ("workflow.succeeded", "third"),
    ]


def test_the_chain_stops_at_a_wait_and_keeps_every_checkpoint(
    running: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    wf = running()
    script.then(wf, "second", Wait("deploying", "sid1", 9))
    assert go(wf, django_capture_on_commit_callbacks) == "wait"
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.checkpoint, wf.lease_owner) == (
        "waiting",
        "second",
        "first",
        "",
    )


def test_a_spent_budget_hands_the_next_stage_off(
    running: Any,
    sent: Sent,
    script: Script,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.WORKFLOW_CHAIN_SECONDS = 0
    wf = running()
    sent.clear()
    assert go(wf, django_capture_on_commit_callbacks) == "done"
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.lease_owner) == ("running", "second", "")
    assert sent.advances() == [("fake", wf.pk, wf.dispatch)]


def test_a_change_made_by_someone_else_runs_the_stage_again_on_the_fresh_row(
    running: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    """Like an enrollment arriving while the stage that waits for it runs: the stale answer is
    not recorded; the stage runs again and sees what changed."""
    wf = running()
    seen: list[str] = []

    def waits_for_a_system_id(ctx: StageContext[FakeWorkflow]) -> Any:
        seen.append(ctx.wf.maas_system_id)
        if not ctx.wf.maas_system_id:
            # someone else writes the row meanwhile (the way the enrollment endpoint does)
            row = FakeWorkflow.objects.get(pk=ctx.wf.pk)
            row.maas_system_id = "abc123"
            row.save(update_fields=["maas_system_id", "updated_at"])
            return Wait("waiting for a machine", check_in=600)
        return Done("machine known")

    script.then(wf, "first", waits_for_a_system_id, waits_for_a_system_id)
    assert go(wf, django_capture_on_commit_callbacks) == "done"
    assert seen == ["", "abc123"]
    wf.refresh_from_db()
    assert (wf.state, wf.maas_system_id) == ("succeeded", "abc123")
    assert ("stage.waiting", "first") not in timeline(wf)  # the stale Wait was never recorded


def test_a_rerun_keeps_the_entry_of_a_maas_call_already_sent_and_counts_the_stage_once(
    running: Any, script: Script, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    """The first run sent a mutation (its intent log says so) and then lost the race to an
    enrollment: the rerun does not send it again, so the entry describing it must survive;
    the stage's metrics are counted for the stored result only."""
    from maas_domain.observability import metrics

    counted: list[str] = []
    monkeypatch.setattr(
        metrics, "stage_recorded", lambda kind, stage, *a, **k: counted.append(stage)
    )
    wf = running()

    def sends_then_sees(ctx: StageContext[FakeWorkflow]) -> Any:
        if not ctx.wf.maas_system_id:
            ctx.event("maas.action", "deploy sent")
            ctx.event("maas.observed", "MAAS: Ready")
            row = FakeWorkflow.objects.get(pk=ctx.wf.pk)
            row.maas_system_id = "abc123"
            row.save(update_fields=["maas_system_id", "updated_at"])
            return Wait("waiting for a machine", check_in=600)
        ctx.event("maas.observed", "MAAS: Deploying")
        return Done("machine known")

    script.then(wf, "first", sends_then_sees, sends_then_sees)
    assert go(wf, django_capture_on_commit_callbacks) == "done"
    messages = [e.message for e in FakeEvent.objects.filter(fake=wf, stage="first")]
    assert messages.count("deploy sent") == 1
    assert "MAAS: Ready" not in messages  # what the stale run saw is not kept
    assert counted.count("first") == 1


def test_an_operator_acting_mid_stage_ends_the_execution_without_recording(
    running: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    wf = running()

    def frozen_meanwhile(ctx: StageContext[FakeWorkflow]) -> Done:
        FakeWorkflow.objects.filter(pk=ctx.wf.pk).update(
            state="manual_intervention",
            lease_owner="",
            dispatch=F("dispatch") + 1,
            updated_at=timezone.now(),
        )
        return Done("too late")

    script.then(wf, "first", frozen_meanwhile)
    assert go(wf, django_capture_on_commit_callbacks) == "lease-lost"
    wf.refresh_from_db()
    assert (wf.state, wf.checkpoint) == ("manual_intervention", "")
    assert ("stage.completed", "first") not in timeline(wf)


def test_each_finished_stage_is_stored_before_the_next_one_runs(
    running: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    """The row always shows the stage being run: an operator (or a crash) sees where the
    execution is, whatever it is waiting on."""
    wf = running()
    seen: dict[str, Any] = {}

    def looks(ctx: StageContext[FakeWorkflow]) -> Done:
        row = FakeWorkflow.objects.get(pk=ctx.wf.pk)
        seen["row"] = (row.stage, row.checkpoint, row.lease_owner == ctx.owner)
        seen["timeline"] = timeline(wf)
        return Done("looked")

    script.then(wf, "second", looks)
    assert go(wf, django_capture_on_commit_callbacks) == "done"
    assert seen["row"] == ("second", "first", True)
    assert seen["timeline"][-2:] == [("stage.completed", "first"), ("stage.started", "second")]


def test_a_chained_stage_starts_its_clock_and_holds_a_lease_that_expires(
    running: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    """A stage entered in the same execution is timed from then and its lease can be taken
    over if the execution dies: its timeout fires, its worker's death is noticed."""
    from datetime import timedelta

    from workflows.kinds import lease_seconds

    wf = running()
    seen: dict[str, Any] = {}

    def second(ctx: StageContext[FakeWorkflow]) -> Wait:
        row = FakeWorkflow.objects.get(pk=ctx.wf.pk)
        seen.update(started=row.stage_started_at, expires=row.lease_expires_at)
        return Wait("deploying", "sid1", 9, check_in=10_000)

    script.then(wf, "second", second)
    before = timezone.now()
    assert go(wf, django_capture_on_commit_callbacks) == "wait"
    assert seen["started"] is not None and seen["started"] >= before
    assert seen["expires"] == seen["started"] + timedelta(seconds=lease_seconds())
    wf.refresh_from_db()
    assert wf.stage_started_at == seen["started"]
    # the check-in is bounded by the second stage's timeout (600 s), counted from its start
    assert wf.next_check_at == seen["started"] + timedelta(seconds=601)

"""The seven recovery verbs on the fake kind, driven directly: which states each accepts, what
each changes, and that every move they make is one the transition table allows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from maas_domain.errors import Conflict, InvalidInput
from maas_domain.fsm import sources, target
from maas_domain.models import AuditLog, MaasSite, OutboxEvent
from maas_domain.work import WorkflowState
from tests.workflow.conftest import Sent
from tests.workflow.fake import FakeEvent, FakeWorkflow, Script
from workflows import step, verbs
from workflows.models import Workflow
from workflows.scheduling import admit
from workflows.verbs import VERBS

pytestmark = pytest.mark.django_db
W = WorkflowState


def test_every_verb_source_is_a_source_of_the_transitions_it_performs() -> None:
    """The verb table and the transition table cannot disagree (one source of truth)."""
    for verb in VERBS.values():
        allowed = set().union(*(sources(move) for move in verb.moves))
        assert set(verb.sources) <= allowed, verb.name


def test_the_transition_table_is_what_the_engine_uses() -> None:
    assert (sources(Workflow.admit), target(Workflow.admit)) == (["pending"], "running")
    assert (sources(Workflow.wake), target(Workflow.wake)) == (["waiting"], "running")
    assert target(Workflow.reopen) == "pending"


def put(wf: FakeWorkflow, state: str, **fields: Any) -> FakeWorkflow:
    FakeWorkflow.objects.filter(pk=wf.pk).update(state=state, **fields)
    wf.refresh_from_db()
    return wf


@pytest.fixture
def apply(kind: Any, admin_user: Any, django_capture_on_commit_callbacks: Any) -> Any:
    def apply(wf: FakeWorkflow, verb: str, **kw: Any) -> dict[str, Any]:
        with django_capture_on_commit_callbacks(execute=True):
            return verbs.apply(kind, wf.pk, verb, actor=admin_user, **kw)

    return apply


@pytest.mark.parametrize("state", list(W))
@pytest.mark.parametrize("verb", list(VERBS))
def test_each_verb_is_refused_outside_its_source_states_and_changes_nothing(
    start: Any, apply: Any, state: str, verb: str
) -> None:
    wf = put(start(), state, stage="second", attempt=2)
    spec = VERBS[verb]
    if state in spec.sources and not (verb == "resume" and state == W.RUNNING):
        return  # accepted: the other tests say what it does
    with pytest.raises(Conflict) as refused:
        apply(wf, verb, reason="try", confirm=True)
    assert refused.value.extra["current_state"] == state
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.attempt) == (state, "second", 2)
    assert not AuditLog.objects.filter(action=f"fake.{verb}").exists()


def test_dry_run_describes_and_changes_nothing(start: Any, apply: Any) -> None:
    wf = put(start(), W.FAILED, stage="second", checkpoint="first")
    plan = apply(wf, "rerun", dry_run=True)
    assert (plan["from_stage"], plan["attempt"]) == ("first", 2)
    assert plan["maas_calls"] == ["first: get_machine", "second: deploy"]
    wf.refresh_from_db()
    assert (wf.state, wf.stage) == (W.FAILED, "second")
    assert not AuditLog.objects.filter(action="fake.rerun").exists()


@pytest.mark.parametrize(
    ("verb", "stage", "attempt", "checkpoint"),
    [
        ("retry", "second", 2, "first"),
        ("resume", "second", 1, "first"),
        ("rerun", "first", 2, ""),
        ("restart-clean", "reset", 2, ""),
        ("adopt", "third", 1, "first"),
    ],
)
def test_reopening_verbs_put_the_workflow_back_in_the_queue_at_the_right_stage(
    start: Any,
    apply: Any,
    sent: Sent,
    verb: str,
    stage: str,
    attempt: int,
    checkpoint: str,
) -> None:
    wf = put(
        start(),
        W.FAILED,
        stage="second",
        checkpoint="first",
        failure_class="deploy_failed",
        reason="boom",
        stage_tries=3,
    )
    sent.clear()
    apply(wf, verb, reason="operator says so", confirm=True)
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.attempt, wf.checkpoint) == (
        W.PENDING,
        stage,
        attempt,
        checkpoint,
    )
    assert (wf.failure_class, wf.reason, wf.stage_tries) == ("", "", 0)
    assert "workflow.admit" in sent.names()  # admission applies the site's limit again
    audit = AuditLog.objects.get(action=f"fake.{verb}")
    assert (audit.before["state"], audit.after["state"], audit.reason) == (
        W.FAILED,
        W.PENDING,
        "operator says so",
    )
    assert FakeEvent.objects.filter(fake=wf).filter(kind=f"operator.{verb}").exists()


def test_every_reopening_verb_runs_the_kinds_reopen_hook_and_no_other_verb_does(
    start: Any, apply: Any, script: Script
) -> None:
    for i, verb in enumerate(VERBS):
        wf = put(start(f"ro{i}"), VERBS[verb].sources[0], stage="second")
        apply(wf, verb, confirm=True)
        reopened = ("on_reopen", wf.pk) in script.calls
        assert reopened == (VERBS[verb].moves == verbs.REOPEN), verb


def test_restart_clean_needs_confirmation(start: Any, apply: Any) -> None:
    wf = put(start(), W.FAILED)
    with pytest.raises(InvalidInput):
        apply(wf, "restart-clean")
    wf.refresh_from_db()
    assert wf.state == W.FAILED


def test_restart_clean_runs_the_reset_stage_then_the_first(
    start: Any, apply: Any, site: MaasSite, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    wf = put(start(), W.FAILED, stage="third")
    apply(wf, "restart-clean", confirm=True)
    with django_capture_on_commit_callbacks(execute=True):
        admit(site.pk)
    wf.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        step.run("fake", wf.pk, wf.dispatch)
    wf.refresh_from_db()
    assert script.calls == [("on_reopen", wf.pk), ("reset", wf.pk)]
    assert (wf.state, wf.stage) == (W.RUNNING, "first")


def test_resume_takes_over_a_running_workflow_only_when_its_worker_died(
    start: Any, apply: Any
) -> None:
    wf = put(
        start(),
        W.RUNNING,
        lease_owner="dead",
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    assert "resume" not in verbs.allowed_verbs(wf)
    with pytest.raises(Conflict):
        apply(wf, "resume")
    wf = put(wf, W.RUNNING, lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert "resume" in verbs.allowed_verbs(wf)
    apply(wf, "resume")
    wf.refresh_from_db()
    assert (wf.state, wf.lease_owner) == (W.PENDING, "")


def test_cancel_of_a_pending_workflow_ends_it_at_once(
    start: Any, apply: Any, script: Script
) -> None:
    wf = start()
    apply(wf, "cancel", reason="not needed")
    wf.refresh_from_db()
    assert (wf.state, wf.finished_at is not None) == (W.CANCELLED, True)
    assert script.calls == [("on_cancelled", wf.pk)]


def test_cancel_of_a_live_workflow_runs_the_cancel_stage(
    start: Any, apply: Any, script: Script, sent: Sent, django_capture_on_commit_callbacks: Any
) -> None:
    wf = put(start(), W.WAITING, stage="second", lease_owner="", wait_system_id="abc")
    sent.clear()
    apply(wf, "cancel")
    wf.refresh_from_db()
    assert wf.state == W.CANCELLING
    assert sent.advances() == [("fake", wf.pk, wf.dispatch)]
    with django_capture_on_commit_callbacks(execute=True):
        assert step.run("fake", wf.pk, wf.dispatch) == "done"
    wf.refresh_from_db()
    assert wf.state == W.CANCELLED
    assert script.calls == [("cancel", wf.pk), ("on_cancelled", wf.pk)]


def test_a_cancel_that_cannot_compensate_freezes_the_workflow(
    start: Any, apply: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    from workflows.results import Fail

    wf = put(start(), W.RUNNING, stage="second")
    script.then(wf, "cancel", Fail("maas_state_conflict", "MAAS refused the abort"))
    apply(wf, "cancel")
    wf.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        step.run("fake", wf.pk, wf.dispatch)
    wf.refresh_from_db()
    assert wf.state == W.MANUAL_INTERVENTION
    assert wf.reason == "cancel could not compensate: MAAS refused the abort"


def test_mark_manual_intervention_freezes_and_says_so(start: Any, apply: Any) -> None:
    wf = put(start(), W.WAITING, next_check_at=timezone.now())
    apply(wf, "mark-manual-intervention", reason="rack on fire")
    wf.refresh_from_db()
    assert (wf.state, wf.reason, wf.next_check_at) == (W.MANUAL_INTERVENTION, "rack on fire", None)
    assert OutboxEvent.objects.filter(type="node.fake.manual_intervention_required").exists()


def test_reopening_is_refused_while_another_workflow_holds_the_host(start: Any, apply: Any) -> None:
    old = put(start("h1"), W.FAILED)
    start("h1")  # a new one took the host meanwhile
    with pytest.raises(Conflict):
        apply(old, "retry")
    old.refresh_from_db()
    assert old.state == W.FAILED

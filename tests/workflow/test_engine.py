"""The engine driven directly with the fake kind: starting, admission, claiming, recording each
result, waking, the sweep. No broker and no worker: each test calls the engine's functions and
reads the rows and the Celery messages the engine would have sent after commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from maas_client.errors import MaasBadRequest, MaasTransient
from maas_domain.errors import InvalidInput
from maas_domain.models import AuditLog, MaasSite, OutboxEvent
from maas_domain.policy import resolve_policy, validate_policy
from maas_domain.secrets import SecretsUnavailable
from tests.workflow.conftest import Sent
from tests.workflow.fake import FakeEvent, FakeWorkflow, Script
from workflows import step
from workflows.kinds import KINDS, StageContext, WorkflowKind
from workflows.results import Done, Fail, Hold, Retry, StageFailed, Wait
from workflows.scheduling import admit, sweep, wake

pytestmark = pytest.mark.django_db


@pytest.fixture
def go(django_capture_on_commit_callbacks: Any, sent: Sent) -> Any:
    """Run the current step of a workflow as ``workflow.advance`` would, after-commit hand-offs
    included; returns what the step did ("done", "wait", "skipped", ...)."""

    def go(wf: FakeWorkflow, dispatch: int | None = None) -> str:
        wf.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):
            return step.run("fake", wf.pk, wf.dispatch if dispatch is None else dispatch)

    return go


def kinds_of(wf: FakeWorkflow) -> list[str]:
    return list(
        FakeEvent.objects.filter(fake=wf).order_by("at", "id").values_list("kind", flat=True)
    )


# -- starting and admission ------------------------------------------------------------------------


def test_start_writes_the_row_its_first_entry_the_audit_row_and_the_started_event(
    start: Any, sent: Sent, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        wf = start("h1")
    assert (wf.state, wf.stage, wf.dispatch) == ("pending", "first", 0)
    assert kinds_of(wf) == ["workflow.created"]
    assert AuditLog.objects.filter(action="fake.start", target_id=str(wf.pk)).count() == 1
    event = OutboxEvent.objects.get(type="node.fake.started")
    assert event.payload["workflow_id"] == wf.pk
    # admission decides when it runs (nothing is dispatched yet); the publisher is nudged
    assert sorted(sent.names()) == ["events.publish", "workflow.admit"]


def test_a_second_open_workflow_on_the_host_writes_nothing(start: Any) -> None:
    start("h1")
    with pytest.raises(IntegrityError), transaction.atomic():
        start("h1")
    assert FakeWorkflow.objects.count() == 1
    assert AuditLog.objects.filter(action="fake.start").count() == 1
    assert OutboxEvent.objects.filter(type="node.fake.started").count() == 1


def test_admission_starts_the_oldest_within_the_sites_limit(
    start: Any, site: MaasSite, sent: Sent, django_capture_on_commit_callbacks: Any
) -> None:
    first, second, third = start("a"), start("b"), start("c")
    with django_capture_on_commit_callbacks(execute=True):
        assert admit(site.pk) == 2  # max_concurrent_workflows: 2
    states = dict(FakeWorkflow.objects.values_list("hostname", "state"))
    assert states == {"a": "running", "b": "running", "c": "pending"}
    assert sent.advances() == [("fake", first.pk, 1), ("fake", second.pk, 1)]
    with django_capture_on_commit_callbacks(execute=True):
        assert admit(site.pk) == 0  # no free slot: the third waits, queued
    third.refresh_from_db()
    assert third.state == "pending"


def test_admission_asks_the_kind_which_pending_rows_must_keep_waiting(
    start: Any,
    kind: Any,
    site: MaasSite,
    sent: Sent,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    held, free = start("held-1"), start("free-1")
    monkeypatch.setattr(kind, "admission_filter", lambda: Q(hostname__startswith="held"))
    with django_capture_on_commit_callbacks(execute=True):
        assert admit(site.pk) == 1  # a slot is free, but the kind holds the older one back
    assert sent.advances() == [("fake", free.pk, 1)]
    held.refresh_from_db()
    assert held.state == "pending"
    monkeypatch.setattr(kind, "admission_filter", None)
    with django_capture_on_commit_callbacks(execute=True):
        assert admit(site.pk) == 1
    held.refresh_from_db()
    assert held.state == "running"


# -- claiming --------------------------------------------------------------------------------------


def test_a_stale_or_duplicate_message_does_nothing(running: Any, go: Any, script: Script) -> None:
    wf = running()
    assert go(wf, dispatch=wf.dispatch - 1) == "skipped"
    assert go(wf, dispatch=wf.dispatch + 5) == "skipped"
    assert script.calls == []


def test_a_held_lease_is_not_taken_until_it_expires(running: Any, script: Script) -> None:
    wf = running()
    claimed = step.claim(KINDS["fake"], wf.pk, wf.dispatch)
    assert claimed is not None
    assert step.claim(KINDS["fake"], wf.pk, wf.dispatch) is None  # held, not expired
    assert kinds_of(wf) == ["workflow.created", "stage.started"]  # a free lease: no loss
    FakeWorkflow.objects.filter(pk=wf.pk).update(lease_expires_at=timezone.now())
    again = step.claim(KINDS["fake"], wf.pk, wf.dispatch)
    assert again is not None
    assert again[0].lost_leases == 1  # the first execution died holding it
    assert kinds_of(wf) == ["workflow.created", "stage.started", "stage.lost"]  # started once


def test_a_lost_execution_says_on_the_timeline_which_stage_and_which_calls_it_sent(
    running: Any,
) -> None:
    wf = running()
    kind = KINDS["fake"]
    assert step.claim(kind, wf.pk, wf.dispatch) is not None
    FakeWorkflow.objects.filter(pk=wf.pk).update(
        lease_expires_at=timezone.now(), stage_data={"sent": {"deploy": 1, "set_storage_layout": 2}}
    )
    assert step.claim(kind, wf.pk, wf.dispatch) is not None
    lost = FakeEvent.objects.get(fake=wf, kind="stage.lost")
    assert (lost.stage, lost.data["sent"]) == ("first", {"deploy": 1, "set_storage_layout": 2})
    assert "an execution of first ended without recording its result" in lost.message
    assert "deploy once, set_storage_layout 2 times" in lost.message
    # the next loss of the same stage is said again; a claim of a free lease says nothing
    FakeWorkflow.objects.filter(pk=wf.pk).update(lease_expires_at=timezone.now(), stage_data={})
    assert step.claim(kind, wf.pk, wf.dispatch) is not None
    assert FakeEvent.objects.filter(fake=wf, kind="stage.lost").count() == 2
    assert "MAAS calls sent in this stage: none" in (
        FakeEvent.objects.filter(fake=wf, kind="stage.lost").latest("id").message
    )
    FakeWorkflow.objects.filter(pk=wf.pk).update(lease_owner="", lease_expires_at=None)
    assert step.claim(kind, wf.pk, wf.dispatch) is not None
    assert FakeEvent.objects.filter(fake=wf, kind="stage.lost").count() == 2
    wf.refresh_from_db()
    assert wf.lost_leases == 2


# -- recording each result -------------------------------------------------------------------------


def test_done_moves_to_the_next_stage_and_the_last_one_succeeds(
    running: Any, go: Any, sent: Sent, script: Script
) -> None:
    wf = running()
    sent.clear()
    assert go(wf) == "done"
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.checkpoint, wf.dispatch) == ("running", "second", "first", 2)
    assert sent.advances() == [("fake", wf.pk, 2)]
    assert go(wf) == "done" and go(wf) == "done"
    wf.refresh_from_db()
    assert (wf.state, wf.finished_at is not None) == ("succeeded", True)
    assert ("on_success", wf.pk) in script.calls
    assert "workflow.admit" in sent.names()  # a slot is free
    assert OutboxEvent.objects.filter(type="node.fake.completed").count() == 1
    assert kinds_of(wf)[-2:] == ["stage.completed", "workflow.succeeded"]


def test_a_stage_that_does_not_apply_is_skipped(running: Any, go: Any, script: Script) -> None:
    wf = running(skip_second=True)
    go(wf)
    wf.refresh_from_db()
    assert wf.stage == "third"


def test_stage_updates_are_stored_with_done(running: Any, go: Any, script: Script) -> None:
    wf = running()
    script.then(wf, "first", Done("found", {"maas_system_id": "abc123"}))
    go(wf)
    wf.refresh_from_db()
    assert wf.maas_system_id == "abc123"


def test_wait_parks_the_workflow_until_it_is_woken(
    running: Any, go: Any, sent: Sent, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    wf = running()
    script.then(wf, "first", Wait("commissioning", "abc123", 1, check_in=10_000))
    assert go(wf) == "wait"
    wf.refresh_from_db()
    assert (wf.state, wf.wait_system_id, wf.wait_status) == ("waiting", "abc123", 1)
    # the check-in is bounded by the stage's timeout (300 s), not the stage's 10,000 s
    assert wf.stage_started_at is not None and wf.next_check_at is not None
    assert wf.next_check_at <= wf.stage_started_at + timedelta(seconds=301)
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert wake(KINDS["fake"], wf.pk, "MAAS moved")
        assert not wake(KINDS["fake"], wf.pk, "again")  # only a waiting workflow wakes
    wf.refresh_from_db()
    assert (wf.state, wf.wait_system_id) == ("running", "")
    assert sent.advances() == [("fake", wf.pk, wf.dispatch)]
    assert go(wf) == "done"


def test_retry_sends_again_with_a_countdown_and_gives_up_after_the_limit(
    running: Any, go: Any, sent: Sent, script: Script, settings: Any
) -> None:
    settings.WORKFLOW_MAX_STAGE_TRIES = 2
    wf = running()
    script.then(wf, "first", *[Retry("maas_transient", "MAAS busy", after=7)] * 3)
    sent.clear()
    assert go(wf) == "retry"
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.stage_tries) == ("running", "first", 1)
    assert sent.messages == [("workflow.advance", ("fake", wf.pk, wf.dispatch), 7.0)]
    go(wf)
    go(wf)
    wf.refresh_from_db()
    assert (wf.state, wf.failure_class) == ("failed", "maas_transient")
    assert wf.reason.startswith("gave up after 3 tries")


def test_fail_ends_the_workflow_with_its_class_and_reason(
    running: Any, go: Any, script: Script
) -> None:
    wf = running()
    script.then(wf, "first", Fail("ambiguous", "two machines match", {"candidates": ["a", "b"]}))
    assert go(wf) == "fail"
    wf.refresh_from_db()
    assert (wf.state, wf.failure_class, wf.reason) == ("failed", "ambiguous", "two machines match")
    failed = FakeEvent.objects.filter(fake=wf).get(kind="stage.failed")
    assert failed.data == {"failure_class": "ambiguous", "candidates": ["a", "b"]}
    assert ("on_failure", wf.pk) in script.calls
    assert OutboxEvent.objects.get(type="node.fake.failed").payload["failure_class"] == "ambiguous"


def test_hold_freezes_in_manual_intervention_with_the_kinds_hook(
    running: Any, go: Any, script: Script
) -> None:
    wf = running()
    script.then(wf, "first", Hold("erase_failed", "disks not erased", {"maas_system_id": "x"}))
    go(wf)
    wf.refresh_from_db()
    assert (wf.state, wf.failure_class, wf.maas_system_id) == (
        "manual_intervention",
        "erase_failed",
        "x",
    )
    assert ("on_hold", wf.pk) in script.calls
    assert OutboxEvent.objects.filter(type="node.fake.manual_intervention_required").exists()


@pytest.mark.parametrize(
    ("raised", "outcome", "detail"),
    [
        (StageFailed("pxe", "no PXE subnet", interface="eth0"), "fail", "pxe"),
        (
            MaasTransient("503", operation="machine.read", retry_after=3.0),
            "retry",
            "maas_transient",
        ),
        (
            MaasBadRequest("bad distro", operation="machine.deploy", field_errors={}),
            "fail",
            f"maas_{MaasBadRequest.kind}",
        ),
        (SecretsUnavailable("sealed"), "retry", "secrets_unavailable"),
    ],
)
def test_exceptions_become_results(
    running: Any, go: Any, script: Script, raised: Exception, outcome: str, detail: str
) -> None:
    wf = running()
    script.then(wf, "first", raised)
    assert go(wf) == outcome
    wf.refresh_from_db()
    if outcome == "fail":
        assert wf.failure_class == detail
    else:
        assert (
            FakeEvent.objects.filter(fake=wf).get(kind="retry.decision").data["classification"]
            == detail
        )


def test_a_stage_past_its_timeout_fails_without_running(
    running: Any, go: Any, script: Script, site: MaasSite
) -> None:
    wf = running()
    FakeWorkflow.objects.filter(pk=wf.pk).update(
        stage_started_at=timezone.now() - timedelta(seconds=301)
    )
    assert go(wf) == "fail"
    wf.refresh_from_db()
    assert (wf.failure_class, wf.reason) == ("timeout", "stage first exceeded its timeout of 300s")
    assert script.calls == [("on_failure", wf.pk)]  # the stage itself never ran


def test_policy_overrides_one_kinds_stage_timeout(
    running: Any, go: Any, script: Script, site: MaasSite
) -> None:
    site.policy = validate_policy({"stage_timeouts": {"fake.first": 1000}})
    site.save()
    wf = running()
    FakeWorkflow.objects.filter(pk=wf.pk).update(
        stage_started_at=timezone.now() - timedelta(seconds=301)
    )
    assert go(wf) == "done"  # 301 s is within the kind's own 1,000 s
    kind = KINDS["fake"]
    assert kind.timeout("first", resolve_policy(site.policy)) == 1000
    assert kind.timeout("third", resolve_policy(site.policy)) == 60  # its declared default
    with pytest.raises(InvalidInput) as refused:
        validate_policy({"stage_timeouts": {"fake.nope": 100}})
    reason = refused.value.extra["fields"]["policy.stage_timeouts"][0]
    assert reason.startswith("Unknown stage 'fake.nope'")


def test_executions_that_keep_dying_end_in_worker_lost(
    running: Any, go: Any, script: Script, settings: Any
) -> None:
    settings.WORKFLOW_MAX_LOST_LEASES = 2
    wf = running()
    kind = KINDS["fake"]
    for _ in range(3):  # each execution claims, then dies holding the lease
        assert step.claim(kind, wf.pk, wf.dispatch) is not None
        FakeWorkflow.objects.filter(pk=wf.pk).update(lease_expires_at=timezone.now())
    assert go(wf) == "fail"
    wf.refresh_from_db()
    assert (wf.state, wf.failure_class) == ("failed", "worker_lost")
    assert script.calls == [("on_failure", wf.pk)]  # the poison stage is not run a fourth time


def test_a_stage_whose_lease_was_taken_records_nothing(
    running: Any, go: Any, script: Script
) -> None:
    wf = running()

    def taken_over(ctx: StageContext[FakeWorkflow]) -> Done:
        FakeWorkflow.objects.filter(pk=ctx.wf.pk).update(lease_owner="someone-else")
        ctx.heartbeat("machine.deploy")  # before a MAAS mutation: raises LeaseLost
        raise AssertionError("unreachable")

    script.then(wf, "first", taken_over)
    assert go(wf) == "lease-lost"
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.checkpoint) == ("running", "first", "")
    assert "stage.completed" not in kinds_of(wf)


def test_the_state_cannot_be_assigned_directly(running: Any) -> None:
    wf = running()
    with pytest.raises(AttributeError, match="Direct state modification is not allowed"):
        wf.state = "succeeded"


# -- the sweep -------------------------------------------------------------------------------------


def test_the_sweep_redispatches_lost_work_wakes_due_waits_and_admits(
    running: Any,
    start: Any,
    site: MaasSite,
    go: Any,
    script: Script,
    sent: Sent,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    lost, waiting = running("lost"), running("waiting")
    queued = start("queued")
    script.then(waiting, "first", Wait("deploying", "sid", 9, check_in=5))
    go(waiting)
    # the first's message was lost: dispatched long ago, never claimed
    old = timezone.now() - timedelta(seconds=settings.WORKFLOW_DISPATCH_GRACE_SECONDS + 1)
    FakeWorkflow.objects.filter(pk=lost.pk).update(updated_at=old)
    FakeWorkflow.objects.filter(pk=waiting.pk).update(next_check_at=timezone.now())
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep()
    assert (counts["redispatched"], counts["woken"]) == (1, 1)
    lost.refresh_from_db()
    assert ("fake", lost.pk, lost.dispatch) in sent.advances()
    waiting.refresh_from_db()
    assert waiting.state == "running"
    assert "workflow.poll_site" in sent.names()  # one poll per site with work
    queued.refresh_from_db()
    assert queued.state == "pending"  # both slots still taken


def test_registered_kinds_are_in_the_event_catalogue(kind: WorkflowKind[FakeWorkflow]) -> None:
    from maas_domain import events

    assert "node.fake.started" in events.types()
    assert "node.fake.manual_intervention_required" in events.types()


def test_a_burst_of_endings_asks_for_one_admission_now_and_one_at_the_window_end(
    site: MaasSite, sent: Sent, django_capture_on_commit_callbacks: Any
) -> None:
    from django.db import transaction

    from workflows.dispatch import ADMIT_WINDOW_SECONDS, admit_after_commit

    for _ in range(5):  # five workflows of one site end within the window
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            admit_after_commit(site.pk)
    admissions = [(args, countdown) for name, args, countdown in sent.messages]
    assert [args for args, _ in admissions] == [(site.pk,), (site.pk,)]
    assert admissions[0][1] == 0.0  # the first at once
    assert 0 < admissions[1][1] <= ADMIT_WINDOW_SECONDS  # the rest folded into one, later


# -- what an operator would notice if a rule of the engine went missing ---------------------------


def cancelling(wf: FakeWorkflow) -> FakeWorkflow:
    FakeWorkflow.objects.filter(pk=wf.pk).update(state="cancelling", lease_owner="")
    wf.refresh_from_db()
    return wf


def test_a_cancel_stage_that_compensated_ends_the_workflow_cancelled(
    running: Any, go: Any, script: Script
) -> None:
    wf = cancelling(running())
    script.then(wf, "cancel", Done("aborted the deploy"))
    assert go(wf) == "done"
    wf.refresh_from_db()
    assert (wf.state, wf.finished_at is not None) == ("cancelled", True)
    assert script.calls == [("cancel", wf.pk), ("on_cancelled", wf.pk)]
    event = FakeEvent.objects.get(fake=wf, kind="workflow.cancelled")
    assert event.message == "aborted the deploy"


@pytest.mark.parametrize(
    ("result", "countdown"),
    [
        (Wait("aborting", "sid", 9, check_in=600), 5.0),
        (Retry("maas_transient", "MAAS busy", after=7), 7.0),
    ],
)
def test_a_cancel_stage_still_at_work_comes_back(
    running: Any, go: Any, script: Script, sent: Sent, result: Any, countdown: float
) -> None:
    wf = cancelling(running())
    script.then(wf, "cancel", result)
    sent.clear()
    go(wf)
    wf.refresh_from_db()
    assert wf.state == "cancelling"
    assert sent.messages == [("workflow.advance", ("fake", wf.pk, wf.dispatch), countdown)]
    assert script.calls == [("cancel", wf.pk)]  # no hook: the workflow has not ended


def test_a_stage_event_is_kept_with_a_retry(running: Any, go: Any, script: Script) -> None:
    wf = running()

    def observes_then_retries(ctx: StageContext[FakeWorkflow]) -> Retry:
        ctx.event("maas.observed", "MAAS: Deploying")
        return Retry("maas_transient", "MAAS busy", after=7)

    script.then(wf, "first", observes_then_retries)
    go(wf)
    assert kinds_of(wf)[-2:] == ["maas.observed", "retry.decision"]
    decision = FakeEvent.objects.get(fake=wf, kind="retry.decision")
    assert decision.data == {
        "classification": "maas_transient",
        "after_seconds": 7.0,
        "try_number": 1,
    }


def test_backoff_doubles_up_to_a_minute_and_honours_retry_after(
    monkeypatch: pytest.MonkeyPatch, settings: Any, kind: WorkflowKind[FakeWorkflow]
) -> None:
    import random

    monkeypatch.setattr(random, "uniform", lambda low, high: (low, high))  # the jitter's range

    def backoff(stage: str, tries: int, retry_after: float | None = None) -> Any:
        return step._backoff(kind.stage(stage), FakeWorkflow(stage_tries=tries), retry_after)

    assert [backoff("first", tries) for tries in (0, 1, 3, 4, 5)] == [
        (1.0, 2.0),
        (2.0, 4.0),
        (8.0, 16.0),
        (16.0, 32.0),
        (30.0, 60.0),
    ]
    assert backoff("first", 3, 2.5) == 2.5
    assert backoff("first", 3, 10.0**9) == float(settings.MAX_TASK_COUNTDOWN)
    # a stage's own retry policy caps its backoff (``third``: 5 s); Retry-After still wins
    assert [backoff("third", tries) for tries in (0, 1, 5)] == [(1.0, 2.0), (2.0, 4.0), (2.5, 5.0)]
    assert backoff("third", 5, 20.0) == 20.0


def test_a_stage_retry_policy_gives_up_after_its_own_limit(
    running: Any, go: Any, script: Script, settings: Any
) -> None:
    settings.WORKFLOW_MAX_STAGE_TRIES = 8
    wf = running(stage="third")
    script.then(wf, "third", *[Retry("maas_transient", "MAAS busy", after=1)] * 3)
    assert go(wf) == "retry"
    go(wf)
    wf.refresh_from_db()
    assert (wf.state, wf.failure_class) == ("failed", "maas_transient")
    assert wf.reason.startswith("gave up after 2 tries")


def test_executions_may_die_up_to_the_limit(
    running: Any, go: Any, script: Script, settings: Any
) -> None:
    settings.WORKFLOW_MAX_LOST_LEASES = 2
    wf = running()
    for _ in range(2):
        assert step.claim(KINDS["fake"], wf.pk, wf.dispatch) is not None
        FakeWorkflow.objects.filter(pk=wf.pk).update(lease_expires_at=timezone.now())
    assert go(wf) == "done"  # the second loss is within the limit: the stage runs
    assert ("first", wf.pk) in script.calls


def test_a_failure_says_why_and_is_published(running: Any, go: Any, script: Script) -> None:
    from maas_domain.secrets.sites import CredentialNotConfirmed

    wf = running()
    script.then(wf, "first", CredentialNotConfirmed("the MAAS URL of site 's' changed"))
    assert go(wf) == "fail"
    wf.refresh_from_db()
    assert (wf.failure_class, wf.reason) == (
        "credentials_unconfirmed",
        "the MAAS URL of site 's' changed",
    )
    wf2 = running("h2")
    script.then(wf2, "first", Fail("ambiguous", "x" * 600))
    go(wf2)
    wf2.refresh_from_db()
    assert (wf2.reason, wf2.next_check_at, wf2.finished_at is not None) == ("x" * 500, None, True)


def test_a_hold_publishes_its_reason(running: Any, go: Any, script: Script) -> None:
    wf = running()
    script.then(wf, "first", Hold("erase_failed", "disks not erased"))
    go(wf)
    wf.refresh_from_db()
    assert (wf.reason, wf.next_check_at) == ("disks not erased", None)
    event = OutboxEvent.objects.get(type="node.fake.manual_intervention_required")
    assert event.payload["reason"] == "disks not erased"
    timeline = FakeEvent.objects.get(fake=wf, kind="workflow.manual_intervention")
    assert timeline.message == "disks not erased"


def test_a_row_that_keeps_changing_hands_the_step_back(
    running: Any, go: Any, script: Script, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger = logging.getLogger("tests.workflow.engine")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    monkeypatch.setattr(logger, "handlers", [Keep()])
    monkeypatch.setattr(step, "log", logger)
    wf = running()

    def changed_meanwhile(ctx: StageContext[FakeWorkflow]) -> Done:
        row = FakeWorkflow.objects.get(pk=ctx.wf.pk)
        row.maas_system_id = f"abc{len(script.calls)}"
        row.save(update_fields=["maas_system_id", "updated_at"])
        ctx.heartbeat("machine.deploy")  # before a MAAS mutation: raises RowChanged
        raise AssertionError("unreachable")

    script.then(wf, "first", *[changed_meanwhile] * 10)
    dispatch = wf.dispatch
    sent.clear()
    assert go(wf) == "handed-off"
    assert [c for c in script.calls if c[0] == "first"] == [("first", wf.pk)] * 6
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.lease_owner, wf.dispatch) == (
        "running",
        "first",
        "",
        dispatch + 1,
    )
    assert sent.advances() == [("fake", wf.pk, dispatch + 1)]
    assert f"fake {wf.pk} changed while first ran: running it again" in said


def test_a_wait_is_said_once_until_its_message_changes(
    running: Any, go: Any, script: Script, django_capture_on_commit_callbacks: Any
) -> None:
    wf = running()
    script.then(
        wf,
        "first",
        Wait("deploying", "sid", 9),
        Wait("deploying", "sid", 9),
        Wait("deploying: curtin", "sid", 9),
    )
    for _ in range(3):
        assert go(wf) == "wait"
        with django_capture_on_commit_callbacks(execute=True):
            assert wake(KINDS["fake"], wf.pk, "MAAS moved")
    waits = FakeEvent.objects.filter(fake=wf, kind="stage.waiting").order_by("id")
    assert [e.message for e in waits] == ["deploying", "deploying: curtin"]

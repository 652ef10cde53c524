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
    event = OutboxEvent.objects.get(type="node.fake.manual_intervention_required")
    assert event.payload["reason"] == "rack on fire"


def test_reopening_is_refused_while_another_workflow_holds_the_host(start: Any, apply: Any) -> None:
    old = put(start("h1"), W.FAILED)
    start("h1")  # a new one took the host meanwhile
    with pytest.raises(Conflict):
        apply(old, "retry")
    old.refresh_from_db()
    assert old.state == W.FAILED


# What an operator would notice if a rule of the verbs went missing.

ALL_STAGES = ["first: get_machine", "second: deploy"]
REOPENING = ["retry", "rerun", "restart-clean", "adopt", "resume"]


@pytest.mark.parametrize("verb", REOPENING)
def test_a_workflow_is_not_reopened_while_another_one_holds_its_node(
    start: Any, apply: Any, site: MaasSite, verb: str
) -> None:
    """One open workflow per node, whatever the host: the other one must close first."""
    from tests.factories import make_node

    n = make_node(site)
    old = put(start("h1", node=n), VERBS[verb].sources[0], stage="second")
    other = start("h2", node=n)
    with pytest.raises(Conflict) as refused:
        apply(old, verb, confirm=True)
    assert (
        refused.value.message == "node h1 has another open workflow; this one cannot be reopened."
    )
    assert [w["id"] for w in refused.value.extra["open_workflows"]] == [other.pk]
    assert refused.value.extra["current_state"] == VERBS[verb].sources[0]
    old.refresh_from_db()
    assert (old.state, old.stage) == (VERBS[verb].sources[0], "second")
    FakeWorkflow.objects.filter(pk=other.pk).update(state=W.SUCCEEDED)
    apply(old, verb, confirm=True)
    old.refresh_from_db()
    assert old.state == W.PENDING


def test_the_host_taken_meanwhile_is_named(start: Any, apply: Any) -> None:
    old = put(start("h1"), W.FAILED)
    start("h1")
    with pytest.raises(Conflict) as refused:
        apply(old, "rerun")
    assert refused.value.message == (
        "Another open workflow took this host meanwhile; this one cannot be reopened."
    )
    assert refused.value.extra["current_state"] == W.FAILED


def test_a_refusal_names_the_state_and_the_verbs_that_are_allowed(start: Any, apply: Any) -> None:
    wf = put(start(), W.SUCCEEDED)
    with pytest.raises(Conflict) as refused:
        apply(wf, "retry")
    assert refused.value.message == "retry is not allowed while the workflow is succeeded."
    assert refused.value.extra["allowed_verbs"] == ["rerun"]


@pytest.mark.parametrize(
    ("state", "names"),
    [
        (W.PENDING, ["cancel", "mark-manual-intervention"]),
        (W.RUNNING, ["cancel", "mark-manual-intervention"]),
        (W.WAITING, ["cancel", "adopt", "mark-manual-intervention"]),
        (W.CANCELLING, ["mark-manual-intervention"]),
        (W.FAILED, ["retry", "resume", "rerun", "restart-clean", "adopt"]),
        (W.SUCCEEDED, ["rerun"]),
        (W.CANCELLED, ["rerun", "restart-clean"]),
        (W.MANUAL_INTERVENTION, ["resume", "rerun", "restart-clean", "adopt"]),
    ],
)
def test_allowed_verbs(start: Any, state: str, names: list[str]) -> None:
    assert verbs.allowed_verbs(put(start(), state, lease_owner="w1")) == names


def test_a_running_workflow_without_a_lease_is_not_taken_over(start: Any) -> None:
    past = timezone.now() - timedelta(seconds=1)
    wf = put(start(), W.RUNNING, lease_owner="", lease_expires_at=past)
    assert "resume" not in verbs.allowed_verbs(wf)
    wf = put(wf, W.RUNNING, lease_owner="w1", lease_expires_at=None)
    assert "resume" not in verbs.allowed_verbs(wf)
    wf = put(wf, W.RUNNING, lease_owner="w1", lease_expires_at=past)
    assert "resume" in verbs.allowed_verbs(wf)


def test_access_classes() -> None:
    from maas_domain.access import Action

    assert verbs.access("retry") == Action.OPERATE
    assert verbs.access("restart-clean") == Action.ADMIN
    assert verbs.access("cancel") == Action.ADMIN
    assert verbs.access("decommission-now") == Action.ADMIN  # not a verb: a kind's own operation


def test_an_unknown_verb_lists_the_verbs(start: Any, apply: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        apply(start(), "reboot")
    assert refused.value.message == "Unknown verb 'reboot'."
    assert refused.value.extra["fields"] == {
        "verb": [
            "One of: retry, resume, rerun, restart-clean, cancel, adopt, mark-manual-intervention."
        ]
    }


@pytest.mark.parametrize(
    ("verb", "state", "from_stage", "attempt", "calls"),
    [
        ("retry", W.FAILED, "second", 2, ["second: deploy"]),
        ("resume", W.FAILED, "second", 1, ["second: deploy"]),
        ("adopt", W.FAILED, "third", 1, []),
        ("rerun", W.FAILED, "first", 2, ALL_STAGES),
        ("restart-clean", W.FAILED, "reset", 2, ["release", *ALL_STAGES]),
        ("cancel", W.RUNNING, "second", 1, ["abort"]),
        ("mark-manual-intervention", W.RUNNING, "second", 1, []),
    ],
)  # fmt: skip
def test_the_dry_run_says_what_each_verb_would_do(
    start: Any, apply: Any, verb: str, state: str, from_stage: str, attempt: int, calls: list[str]
) -> None:
    wf = put(start(), state, stage="second")
    answer = apply(wf, verb, dry_run=True)
    assert answer["dry_run"] is True and answer["allowed"] is True
    assert answer["current_state"] == state
    assert (answer["verb"], answer["from_stage"], answer["attempt"]) == (verb, from_stage, attempt)
    assert answer["maas_calls"] == calls
    sources = ", ".join(VERBS[verb].sources)
    checks = [f"state is {state}; {verb} is allowed from {sources}"]
    if VERBS[verb].moves == verbs.REOPEN:
        checks.append("no other open workflow holds the host (database constraint)")
    assert answer["preconditions"] == checks
    wf.refresh_from_db()
    assert (wf.state, wf.stage, wf.attempt) == (state, "second", 1)


def test_a_stage_that_does_not_apply_is_not_in_the_plan(start: Any, apply: Any) -> None:
    wf = put(start(skip_second=True), W.FAILED, stage="third")
    assert apply(wf, "rerun", dry_run=True)["maas_calls"] == ["first: get_machine"]


def test_a_current_stage_that_no_longer_applies_plans_from_the_top(start: Any, apply: Any) -> None:
    wf = put(start(skip_second=True), W.FAILED, stage="second")
    assert apply(wf, "retry", dry_run=True)["maas_calls"] == ["first: get_machine"]


def test_restart_clean_may_be_rehearsed_without_confirmation(start: Any, apply: Any) -> None:
    wf = put(start(), W.FAILED)
    assert apply(wf, "restart-clean", dry_run=True)["from_stage"] == "reset"
    with pytest.raises(InvalidInput) as refused:
        apply(wf, "restart-clean")
    assert refused.value.extra["fields"] == {"confirm": ["Must be true."]}


def test_reopening_forgets_the_last_run(start: Any, apply: Any) -> None:
    wf = put(
        start(),
        W.FAILED,
        stage="second",
        lease_owner="w1",
        lease_expires_at=timezone.now(),
        lost_leases=2,
        stage_started_at=timezone.now(),
        next_check_at=timezone.now(),
        finished_at=timezone.now(),
        wait_system_id="abc",
        wait_status=6,
        stage_data={"polls": 3},
    )
    dispatch = wf.dispatch
    apply(wf, "retry")
    wf.refresh_from_db()
    assert (wf.lease_owner, wf.lease_expires_at, wf.lost_leases) == ("", None, 0)
    assert (wf.stage_started_at, wf.next_check_at, wf.finished_at) == (None, None, None)
    assert (wf.wait_system_id, wf.wait_status, wf.stage_data) == ("", None, {})
    assert wf.dispatch == dispatch + 1  # a live execution's next step finds it is not its own


def test_the_timeline_and_the_audit_say_who_did_what(start: Any, apply: Any) -> None:
    wf = put(start(), W.FAILED, stage="second")
    apply(wf, "adopt", reason="MAAS shows it deployed")
    event = FakeEvent.objects.get(fake=wf, kind="operator.adopt")
    assert event.message == "adopt by ops-admin: MAAS shows it deployed"
    assert event.data["adopted_stage"] == "third"  # what adopt read from MAAS
    audit = AuditLog.objects.get(action="fake.adopt")
    assert audit.before == {"state": W.FAILED, "stage": "second", "attempt": 1}
    assert audit.after == {"state": W.PENDING, "stage": "third", "attempt": 1}
    wf2 = put(start("h2"), W.FAILED)
    apply(wf2, "retry")
    assert FakeEvent.objects.get(fake=wf2, kind="operator.retry").message == "retry by ops-admin"


def test_cancel_takes_the_workflow_from_its_execution(start: Any, apply: Any, sent: Sent) -> None:
    wf = put(start(), W.RUNNING, stage="second", lease_owner="w1", lease_expires_at=timezone.now())
    dispatch = wf.dispatch
    sent.clear()
    apply(wf, "cancel")
    wf.refresh_from_db()
    assert (wf.state, wf.lease_owner, wf.lease_expires_at) == (W.CANCELLING, "", None)
    assert wf.dispatch == dispatch + 1
    assert sent.advances() == [("fake", wf.pk, dispatch + 1)]


def test_mark_manual_intervention_without_a_reason(start: Any, apply: Any) -> None:
    wf = put(start(), W.RUNNING, lease_owner="w1", lease_expires_at=timezone.now())
    dispatch = wf.dispatch
    apply(wf, "mark-manual-intervention")
    wf.refresh_from_db()
    assert (wf.reason, wf.lease_owner, wf.dispatch) == (
        "marked for manual intervention",
        "",
        dispatch + 1,
    )
    wf2 = put(start("h2"), W.RUNNING)
    apply(wf2, "mark-manual-intervention", reason="x" * 600)
    wf2.refresh_from_db()
    assert wf2.reason == "x" * 500


@pytest.fixture
def held(start: Any, site: MaasSite) -> FakeWorkflow:
    from maas_domain.models import Allocation
    from tests.factories import make_node

    n = make_node(site, hostname="h1")
    Allocation.objects.create(node=n, holder="tenant-7")
    return put(start("h1", node=n), W.FAILED, stage="second")


def test_a_node_a_tenant_holds_is_not_worked_on_again(held: FakeWorkflow, apply: Any) -> None:
    from maas_domain.models import Allocation

    with pytest.raises(Conflict) as refused:
        apply(held, "retry")
    [allocation] = Allocation.objects.filter(node=held.node)
    assert refused.value.message == (
        f"retry would run MAAS work on h1, which a tenant holds (allocation {allocation.pk}, "
        "tenant-7); release it first, or an admin forces the verb with a reason."
    )
    assert refused.value.extra["allocations"] == [{"id": allocation.pk, "holder": "tenant-7"}]
    held.refresh_from_db()
    assert held.state == W.FAILED
    with pytest.raises(InvalidInput) as no_reason:
        apply(held, "retry", force=True, reason="  ")
    assert no_reason.value.message == "A forced verb needs a reason."
    assert no_reason.value.extra["fields"] == {"reason": ["Say why the tenant's node."]}
    apply(held, "retry", force=True, reason="tenant agreed")
    held.refresh_from_db()
    assert held.state == W.PENDING


def test_only_an_admin_forces_a_verb_on_a_tenants_node(
    held: FakeWorkflow, kind: Any, django_user_model: Any
) -> None:
    from maas_domain.errors import Forbidden

    operator = django_user_model.objects.create_user("op", password="not-used")
    with pytest.raises(Forbidden):
        verbs.apply(kind, held.pk, "retry", actor=operator, force=True, reason="because")
    held.refresh_from_db()
    assert held.state == W.FAILED


def test_a_released_allocation_does_not_hold_the_node(held: FakeWorkflow, apply: Any) -> None:
    from maas_domain.models import Allocation

    Allocation.objects.filter(node=held.node).update(state="released")
    apply(held, "retry")
    held.refresh_from_db()
    assert held.state == W.PENDING


def test_cancel_is_not_refused_for_a_tenants_node(held: FakeWorkflow, apply: Any) -> None:
    wf = put(held, W.RUNNING)
    apply(wf, "cancel")
    wf.refresh_from_db()
    assert wf.state == W.CANCELLING


def test_a_verb_answers_with_the_workflow_it_changed(start: Any, apply: Any) -> None:
    wf = put(start(), W.FAILED, stage="second")
    answer = apply(wf, "retry")
    assert set(answer) == {"dry_run", "verb", "workflow"}
    assert (answer["dry_run"], answer["verb"], answer["workflow"].pk) == (False, "retry", wf.pk)
    assert answer["workflow"].state == W.PENDING


def test_adopt_reads_maas_for_the_workflow_itself(
    start: Any, kind: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    import dataclasses

    seen: list[Any] = []

    def reads(wf: FakeWorkflow) -> tuple[str, dict[str, Any]]:
        seen.append((wf.pk, wf.hostname))
        return "third", {"maas_status": "Deployed"}

    reading = dataclasses.replace(kind, adopt=reads)
    wf = put(start("h7"), W.FAILED, stage="first")
    with django_capture_on_commit_callbacks(execute=True):
        verbs.apply(reading, wf.pk, "adopt", actor=admin_user)
    assert seen == [(wf.pk, "h7")]
    wf.refresh_from_db()
    assert (wf.state, wf.stage) == (W.PENDING, "third")

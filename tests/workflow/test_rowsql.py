"""The engine's hand-written statements (workflows/rowsql.py) say what the ORM's did: the claim
takes only a free lease of a runnable row of the dispatch, the compare-and-swap write changes
nothing (and adds no timeline row) once the row is not as this execution stored it, and the
compiled load returns what ``QuerySet.get`` returns, related rows included."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from maas_domain.models import MaasSite
from onboarding.models import Onboarding, OnboardingEvent
from tests.factories import make_node, make_onboarding
from tests.workflow.fake import FakeEvent, FakeWorkflow
from workflows import rowsql, step
from workflows.kinds import KINDS, StageContext, write_with_timeline
from workflows.models import RUNNABLE_STATES
from workflows.results import LeaseLost, RowChanged

pytestmark = pytest.mark.django_db


def take(wf: FakeWorkflow, *, dispatch: int | None = None, owner: str = "me") -> bool:
    now = timezone.now()
    with transaction.atomic():
        return rowsql.take_free_lease(
            FakeWorkflow,
            wf.pk,
            dispatch=wf.dispatch if dispatch is None else dispatch,
            states=RUNNABLE_STATES,
            owner=owner,
            now=now,
            expires=now + timedelta(seconds=90),
        )


def test_the_claim_takes_only_a_free_lease_of_a_runnable_row_of_its_dispatch(
    running: Any,
) -> None:
    wf = running()
    later = timezone.now() + timedelta(minutes=5)
    rows = FakeWorkflow.objects.filter(pk=wf.pk)
    rows.update(lease_owner="other", lease_expires_at=later)
    assert not take(wf)  # held and not expired
    rows.update(lease_owner="other", lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert not take(wf)  # expired but still held: the takeover (a lost lease) is the ORM's
    rows.update(lease_owner="", lease_expires_at=later)
    assert not take(wf)  # released by its owner but its time not yet passed
    rows.update(lease_owner="", lease_expires_at=None)
    assert not take(wf, dispatch=wf.dispatch - 1)  # a stale message
    assert not take(wf, dispatch=wf.dispatch + 1)  # one from the future
    for state in ("pending", "waiting", "succeeded", "failed", "manual_intervention"):
        rows.update(state=state)
        assert not take(wf), state
    rows.update(state="running")
    assert rows.get().lease_owner == ""
    assert take(wf)
    taken = rows.get()
    assert taken.lease_owner == "me"
    assert taken.lease_expires_at is not None and taken.lease_expires_at > timezone.now()
    assert not take(wf, owner="second")  # now held
    rows.update(lease_owner="", lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert take(wf, owner="third")  # released and expired: free
    rows.update(state="cancelling", lease_owner="", lease_expires_at=None)
    assert take(wf, owner="fourth")  # a cancelling row runs its cancel stage


def test_the_claim_keeps_the_time_its_stage_started(running: Any) -> None:
    wf = running()
    started = timezone.now() - timedelta(minutes=3)
    FakeWorkflow.objects.filter(pk=wf.pk).update(stage_started_at=started)
    assert take(wf)
    assert FakeWorkflow.objects.get(pk=wf.pk).stage_started_at == started
    FakeWorkflow.objects.filter(pk=wf.pk).update(
        stage_started_at=None, lease_owner="", lease_expires_at=None
    )
    before = timezone.now()
    assert take(wf)
    now_started = FakeWorkflow.objects.get(pk=wf.pk).stage_started_at
    assert now_started is not None and now_started >= before


def claimed_context(running: Any) -> tuple[FakeWorkflow, StageContext]:
    """A running fake workflow and the context of the execution that claimed it."""
    kind = KINDS["fake"]
    wf = running()
    claimed = step.claim(kind, wf.pk, wf.dispatch)
    assert claimed is not None
    return wf, StageContext(kind, claimed[0], claimed[1])


def test_the_compare_and_swap_writes_nothing_once_the_row_is_not_as_stored(
    running: Any,
) -> None:
    kind = KINDS["fake"]
    wf, ctx = claimed_context(running)
    events = [kind.event(ctx.wf, "stage.note", "one"), kind.event(ctx.wf, "stage.note", "two")]
    rows = FakeWorkflow.objects.filter(pk=wf.pk)
    stored = rows.get()

    def attempt(**where: Any) -> bool:
        values = {"stage_data": {"k": [1, "two", None]}, "stage_tries": 3, "next_check_at": None}
        base = {
            "pk": wf.pk,
            "lease_owner": ctx.owner,
            "state": stored.state,
            "updated_at": stored.updated_at,
        }
        with transaction.atomic():
            return write_with_timeline(kind, {**base, **where}, values, events)

    assert not attempt(lease_owner="someone-else")
    assert not attempt(state="waiting")
    assert not attempt(updated_at=stored.updated_at + timedelta(microseconds=1))
    assert not attempt(pk=wf.pk + 1000)
    assert rows.get().stage_tries == 0
    assert not FakeEvent.objects.filter(fake=wf, kind="stage.note").exists()
    assert attempt()
    row = rows.get()
    assert (row.stage_data, row.stage_tries, row.next_check_at) == (
        {"k": [1, "two", None]},
        3,
        None,
    )
    assert list(
        FakeEvent.objects.filter(fake=wf, kind="stage.note")
        .order_by("id")
        .values_list("message", "stage")
    ) == [("one", "first"), ("two", "first")]


def test_a_stage_context_write_stops_when_another_execution_or_a_verb_took_the_row(
    running: Any,
) -> None:
    wf, ctx = claimed_context(running)
    ctx.save_now(stage_tries=2)  # ours: written
    assert FakeWorkflow.objects.get(pk=wf.pk).stage_tries == 2
    FakeWorkflow.objects.filter(pk=wf.pk).update(updated_at=timezone.now())  # an enrollment
    with pytest.raises(RowChanged):
        ctx.save_now(stage_tries=5)
    ctx.save_now(stage_tries=5)  # the engine re-read the row: ours again
    FakeWorkflow.objects.filter(pk=wf.pk).update(lease_owner="an-operator-verb")
    with pytest.raises(LeaseLost):
        ctx.heartbeat("machine.deploy")
    assert FakeWorkflow.objects.get(pk=wf.pk).stage_tries == 5


def test_an_update_the_statement_cannot_carry_goes_through_the_orm(running: Any) -> None:
    wf = running()
    with pytest.raises(rowsql.NeedsOrm):
        rowsql.update(FakeWorkflow, {"stage_tries": F("stage_tries") + 1}, {"pk": wf.pk})
    kind = KINDS["fake"]
    with transaction.atomic():
        assert write_with_timeline(kind, {"pk": wf.pk}, {"stage_tries": F("stage_tries") + 1}, [])
    assert FakeWorkflow.objects.get(pk=wf.pk).stage_tries == 1


def test_the_compiled_load_is_what_the_orm_loads(
    site: MaasSite, django_assert_num_queries: Any
) -> None:
    kind = KINDS["onboarding"]
    node = make_node(site)
    wf = make_onboarding(
        site, node=node, stage="discover", stage_data={"sent": {"machine.deploy": 1}}
    )
    orm = Onboarding.objects.select_related(*kind.select_related).get(pk=wf.pk)
    for _ in range(2):  # compiled on the first load, reused on the second
        with django_assert_num_queries(1):
            loaded = kind.load(wf.pk)
            # the related rows came with it
            assert (loaded.site.name, loaded.profile.site.pk, loaded.sku.code) == (
                orm.site.name,
                orm.profile.site.pk,
                orm.sku.code,
            )
            assert loaded.node is not None and loaded.node.hostname == node.hostname
        fields = [f.attname for f in Onboarding._meta.concrete_fields]
        assert [getattr(loaded, f) for f in fields] == [getattr(orm, f) for f in fields]
        assert loaded._state.db == "default" and not loaded._state.adding
    other = make_onboarding(site, stage="payload")
    with django_assert_num_queries(1):
        assert kind.load(other.pk).node is None  # a left join: no node yet
    with pytest.raises(Onboarding.DoesNotExist):
        kind.load(other.pk + 1000)
    assert not OnboardingEvent.objects.exists()


def test_a_free_lease_is_taken_and_its_row_read_in_one_statement(site: MaasSite) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    kind = KINDS["onboarding"]
    wf = make_onboarding(site, node=make_node(site), stage="discover")
    started = timezone.now() - timedelta(minutes=2)
    rows = Onboarding.objects.filter(pk=wf.pk)
    rows.update(state="running", dispatch=4, stage_started_at=started)
    with CaptureQueriesContext(connection) as queries:
        assert step.claim(kind, wf.pk, 3) is None  # a stale message
    assert rows.get().lease_owner == ""
    with CaptureQueriesContext(connection) as queries:
        claimed = step.claim(kind, wf.pk, 4)
        assert claimed is not None
        loaded, owner = claimed
        # the related rows came with it
        assert (loaded.site.pk, loaded.profile.site.pk, loaded.sku.pk) == (
            site.pk,
            site.pk,
            wf.sku_id,
        )
        assert loaded.node is not None and loaded.node.pk == wf.node_id
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 1, statements
    # the row as the claim left it
    assert (loaded.lease_owner, loaded.stage_started_at) == (owner, started)
    orm = Onboarding.objects.select_related(*kind.select_related).get(pk=wf.pk)
    fields = [f.attname for f in Onboarding._meta.concrete_fields]
    assert [getattr(loaded, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert orm.lease_owner == owner
    assert step.claim(kind, wf.pk, 4) is None  # held now
    assert not OnboardingEvent.objects.filter(onboarding=wf, kind="stage.lost").exists()

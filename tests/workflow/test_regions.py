"""Region-pinned work, engine side: which queue each message names, what the router refuses,
what the sweep holds back for a region no live worker serves, and the region names that can
never become the central queue. The messages are recorded, not sent (tests/workflow/conftest.py);
tests/test_regions_workers.py runs real workers of two regions."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from config import celery_app
from maas_domain import heartbeat, regions
from maas_domain.models import MaasSite
from maas_domain.validators import REGION, region_error
from tests.factories import make_site
from tests.workflow.conftest import Sent
from tests.workflow.fake import FakeWorkflow, Script
from workflows import step
from workflows.results import Retry, Wait
from workflows.scheduling import admit, sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(db: None) -> MaasSite:
    """The fake kind's workflows run on a site of region east (overrides conftest's)."""
    return make_site(region="east", policy={"max_concurrent_workflows": 2})


@pytest.fixture
def heartbeats() -> Iterator[heartbeat.Store]:
    """The heartbeat store of the test broker, without any worker in it before or after."""
    store = heartbeat.store()

    def clear() -> None:
        for name in store.live():
            store.forget(name)

    clear()
    yield store
    clear()


@pytest.fixture
def go(django_capture_on_commit_callbacks: Any, sent: Sent) -> Any:
    def go(wf: FakeWorkflow) -> str:
        wf.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):
            return step.run("fake", wf.pk, wf.dispatch)

    return go


def test_admission_stays_central_and_every_step_goes_to_the_site_s_region_queue(
    start: Any,
    site: MaasSite,
    go: Any,
    script: Script,
    sent: Sent,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        wf = start("h1")
    # admission (and the outbox nudge) name no queue: the router sends them to the central queue
    assert ("workflow.admit", (site.pk,), None) in sent.routed()
    assert {q for _, _, q in sent.routed()} == {None}
    assert celery_app.amqp.router.route({}, "workflow.admit")["queue"].name == "celery"
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        admit(site.pk)
    wf.refresh_from_db()
    assert sent.routed() == [("workflow.advance", ("fake", wf.pk, wf.dispatch), "region-east")]
    sent.clear()
    script.then(wf, "second", Retry("maas_transient", "MAAS busy", after=3))
    go(wf)  # first: Done, the next stage handed off
    go(wf)  # second: a retry with a countdown
    assert [q for n, _, q in sent.routed() if n == "workflow.advance"] == ["region-east"] * 2


def test_a_default_region_site_runs_on_the_central_queue_plain_workers_consume(
    kind: Any, admin_user: Any, sent: Sent, django_capture_on_commit_callbacks: Any
) -> None:
    from workflows.scheduling import Start, start_workflow

    plain = make_site()  # no region given: today's sites
    assert plain.region == "default"
    with django_capture_on_commit_callbacks(execute=True):
        wf = start_workflow(
            kind,
            FakeWorkflow(site=plain, hostname="h1"),
            Start(actor=admin_user, message="requested", audit_action="fake.start"),
        )
    with django_capture_on_commit_callbacks(execute=True):
        admit(plain.pk)
    wf.refresh_from_db()
    assert ("workflow.advance", ("fake", wf.pk, wf.dispatch), "celery") in sent.routed()


def test_a_waiting_workflow_woken_by_the_sweep_goes_back_to_its_region(
    start: Any,
    site: MaasSite,
    go: Any,
    script: Script,
    sent: Sent,
    heartbeats: heartbeat.Store,
    django_capture_on_commit_callbacks: Any,
) -> None:
    heartbeats.beat("east-1", ["region-east"], 60)
    with django_capture_on_commit_callbacks(execute=True):
        wf, other = start("h1"), start("h2")
        admit(site.pk)
    script.then(wf, "first", Wait("deploying", "sid-1", 9, check_in=5))
    script.then(other, "first", Wait("deploying", "sid-2", 9, check_in=300))
    go(wf)
    go(other)  # still waiting after the sweep: the site is polled, on its region's queue
    FakeWorkflow.objects.filter(pk=wf.pk).update(next_check_at=timezone.now())
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep()
    assert counts["woken"] == 1
    wf.refresh_from_db()
    assert ("workflow.advance", ("fake", wf.pk, wf.dispatch), "region-east") in sent.routed()
    assert ("workflow.poll_site", (site.pk,), "region-east") in sent.routed()


def test_the_sweep_holds_back_re_sends_and_polls_for_a_region_no_live_worker_serves(
    start: Any,
    site: MaasSite,
    sent: Sent,
    settings: Any,
    heartbeats: heartbeat.Store,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        wf = start("h1")
        admit(site.pk)
    # dispatched long ago and never claimed: no worker consumes region-east
    old = timezone.now() - timedelta(seconds=settings.WORKFLOW_DISPATCH_GRACE_SECONDS + 1)
    FakeWorkflow.objects.filter(pk=wf.pk).update(updated_at=old)
    wf.refresh_from_db()
    dispatch = wf.dispatch
    heartbeats.beat("west-1", ["region-west"], 60)  # a live worker, of another region
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep()
    assert (counts["redispatched"], counts["unserved"], counts["sites_polled"]) == (0, 1, 0)
    assert [n for n, _, q in sent.routed() if q == "region-east"] == []
    wf.refresh_from_db()
    assert (wf.state, wf.dispatch, wf.lost_leases) == ("running", dispatch, 0)  # waits, unharmed
    # a worker of region east starts: the next sweep sends the step there again
    heartbeats.beat("east-1", ["celery", "region-east"], 60)
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep()
    assert (counts["redispatched"], counts["unserved"]) == (1, 0)
    assert ("workflow.advance", ("fake", wf.pk, dispatch + 1), "region-east") in sent.routed()


def test_the_sweep_always_re_sends_to_the_central_queue(
    kind: Any,
    admin_user: Any,
    sent: Sent,
    settings: Any,
    heartbeats: heartbeat.Store,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """No live worker at all: the default region's work is still re-sent (what a worker started
    without -Q serves; holding it back would strand today's deployments on a heartbeat)."""
    from workflows.scheduling import Start, start_workflow

    plain = make_site()
    with django_capture_on_commit_callbacks(execute=True):
        wf = start_workflow(
            kind,
            FakeWorkflow(site=plain, hostname="h1"),
            Start(actor=admin_user, message="requested", audit_action="fake.start"),
        )
        admit(plain.pk)
    old = timezone.now() - timedelta(seconds=settings.WORKFLOW_DISPATCH_GRACE_SECONDS + 1)
    FakeWorkflow.objects.filter(pk=wf.pk).update(updated_at=old)
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep()
    assert (counts["redispatched"], counts["unserved"]) == (1, 0)
    assert [q for n, _, q in sent.routed() if n == "workflow.advance"] == ["celery"]


# -- the router and the task table ---------------------------------------------------------------


def test_a_regional_task_sent_without_its_queue_is_refused_not_run_centrally() -> None:
    router = celery_app.amqp.router
    for name in regions.REGIONAL_TASKS:
        with pytest.raises(regions.RegionalTaskWithoutQueue):
            router.route({}, name, (1,), {})
        assert router.route({"queue": "region-east"}, name, (1,), {})["queue"].name == (
            "region-east"
        )


def test_every_task_is_either_regional_or_central() -> None:
    """A new task must say where it runs: a MAAS-calling task left to the default queue would
    run on a central worker that may not reach the site's MAAS."""
    celery_app.loader.import_default_modules()  # what a worker imports at start
    ours = {name for name in celery_app.tasks if not name.startswith("celery.")}
    assert ours == regions.REGIONAL_TASKS | regions.CENTRAL_TASKS
    assert not regions.REGIONAL_TASKS & regions.CENTRAL_TASKS
    for name in regions.CENTRAL_TASKS:
        assert celery_app.amqp.router.route({}, name)["queue"].name == "celery"


# -- names and queues ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["east\n", "East", " east", "east ", "-east", "east-", "ea_st", "ea.st", "", "x" * 41, 7, None],
)
def test_a_region_name_is_a_slug_and_nothing_else(name: Any) -> None:
    assert region_error(name)


@given(st.from_regex(REGION, fullmatch=True))
def test_no_region_name_turns_into_the_central_queue(name: str) -> None:
    """The only way onto the central queue is the default region: 'celery' is region-celery."""
    assert region_error(name) is None
    queue = regions.queue_for(name)
    if name == regions.DEFAULT_REGION:
        assert queue == "celery"
    else:
        assert queue == f"region-{name}" != regions.central_queue()


def test_the_embedded_filesystem_broker_runs_every_region_on_its_one_queue(settings: Any) -> None:
    settings.CELERY_BROKER_URL = "filesystem://"
    assert regions.queue_for("east") == regions.queue_for("default") == "celery"


def _plant(store: heartbeat.Store, name: str, value: Any) -> None:
    """A key written into the broker's Redis by anyone who can write there."""
    import time

    assert isinstance(store, heartbeat.RedisStore), "the test broker is Redis"
    store.redis.set(heartbeat.KEY_PREFIX + name, value, px=60_000)
    store.redis.zadd(heartbeat.INDEX, {name: time.time()})


def _unplant(store: heartbeat.Store, *names: str) -> None:
    assert isinstance(store, heartbeat.RedisStore)
    for name in names:
        store.redis.delete(heartbeat.KEY_PREFIX + name)
        store.redis.zrem(heartbeat.INDEX, name)


def test_a_heartbeat_written_without_the_key_serves_no_region(
    heartbeats: heartbeat.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One forged Redis key made an unserved region look served: a heartbeat now counts only
    when signed with the deployment's key, for the name it is stored under, and fresh."""
    import json
    import time

    from django.core import signing

    plain = json.dumps({"queues": ["region-east"], "pid": 1, "at": time.time()})
    _plant(heartbeats, "plain", plain)  # what a worker wrote before heartbeats were signed
    try:
        live = regions.live_queues()
        assert live is not None and "region-east" not in live, live
    finally:
        _unplant(heartbeats, "plain")
    forged = {
        "other-key": signing.dumps(
            {"name": "other-key", "queues": ["region-east"]}, key="x" * 50, salt=heartbeat.SALT
        ),
        "copied": heartbeat.signed("east-1", ["region-east"]),  # east-1's value, another name
    }
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)  # what signing stamps with
    forged["stale"] = heartbeat.signed("stale", ["region-east"])  # an hour old: replayed
    monkeypatch.undo()
    try:
        for name, value in forged.items():
            _plant(heartbeats, name, value)
        live = regions.live_queues()
        assert live is not None and "region-east" not in live, live
        assert not regions.served("east", live)
        heartbeats.beat("east-1", ["region-east"], 60)  # a worker's own
        assert regions.live_queues() == {"region-east": 1}
    finally:
        _unplant(heartbeats, *forged)


def test_a_malformed_heartbeat_hides_nothing(heartbeats: heartbeat.Store) -> None:
    """One malformed key made every heartbeat unreadable, and an unreadable store names no
    region unserved: each value is judged on its own now."""
    bad = {"garbage": b"not json at all", "binary": b"\xff\xfe", "list": b"[1, 2]", "empty": b""}
    heartbeats.beat("west-1", ["region-west"], 60)
    try:
        for name, value in bad.items():
            _plant(heartbeats, name, value)
        live = regions.live_queues()
        assert live == {"region-west": 1}
        assert not regions.served("east", live) and regions.served("west", live)
    finally:
        _unplant(heartbeats, *bad)


def test_the_embedded_store_judges_each_file_on_its_own(tmp_path: Any) -> None:
    store = heartbeat.FolderStore(tmp_path)
    store.beat("w1", ["celery"], 60)
    (tmp_path / "forged.json").write_text('{"name": "forged", "queues": ["region-east"], '
                                          '"expires": 9999999999}')  # fmt: skip
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "odd.json").write_text('{"name": "odd"}')
    assert store.live() == {"w1": ["celery"]}

"""Retention: the hourly beat task prunes expired idempotency answers, published outbox events
and old finished reconcile runs at the ages the settings say (0 keeps forever); history (the
timelines of closed workflows, old audit rows) is archived as JSON lines first, then pruned;
timelines also export per workflow on demand."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from maas_domain import retention
from maas_domain.models import IdempotencyRecord, OutboxEvent
from onboarding.models import OnboardingEvent
from reconciliation.models import ReconcileRun
from tests.factories import make_onboarding, make_site

pytestmark = pytest.mark.django_db
NOW = timezone.now().replace(microsecond=0)
SECOND = timedelta(seconds=1)


def idempotency(age: timedelta, *, answered: bool = True) -> int:
    record = IdempotencyRecord.objects.create(
        key=f"k-{age.total_seconds()}-{answered}",
        scope="1:POST:/api/v1/admin/onboardings",
        request_hash="0" * 64,
        status_code=201 if answered else None,
        body={"id": 1} if answered else None,
    )
    IdempotencyRecord.objects.filter(pk=record.pk).update(created_at=NOW - age)
    return record.pk


def outbox(published_age: timedelta | None, occurred_age: timedelta = timedelta(days=60)) -> Any:
    event = OutboxEvent.objects.create(type="node.onboarding.completed", payload={"x": 1})
    OutboxEvent.objects.filter(pk=event.pk).update(
        occurred_at=NOW - occurred_age,
        published_at=None if published_age is None else NOW - published_age,
    )
    return event.pk


def run(site: Any, state: str, finished_age: timedelta | None) -> int:
    row = ReconcileRun.objects.create(site=site, trigger="schedule", state=state)
    finished = None if finished_age is None else NOW - finished_age
    ReconcileRun.objects.filter(pk=row.pk).update(finished_at=finished)
    return row.pk


def test_each_kind_is_pruned_after_its_age_and_kept_up_to_it(settings: Any) -> None:
    settings.RETENTION_IDEMPOTENCY_HOURS = 24
    settings.RETENTION_OUTBOX_DAYS = 7
    settings.RETENTION_RECONCILE_RUN_DAYS = 30
    day = timedelta(days=1)
    expired = idempotency(24 * timedelta(hours=1) + SECOND)
    abandoned = idempotency(timedelta(days=3), answered=False)  # its request died mid-way
    at_the_age = idempotency(timedelta(hours=24))
    fresh = idempotency(timedelta(minutes=5))
    published_old = outbox(7 * day + SECOND)
    published_at_age = outbox(7 * day)
    owed = outbox(None, occurred_age=timedelta(days=90))  # never published: still owed
    site, quiet = make_site(), make_site()
    old_runs = [run(site, "succeeded", 31 * day), run(site, "failed", 30 * day + SECOND)]
    at_age = run(site, "succeeded", 30 * day)
    latest_of_site = run(site, "failed", 45 * day)  # the newest finished run: kept, however old
    stuck = run(site, "running", None)
    ReconcileRun.objects.filter(pk=stuck).update(queued_at=NOW - 90 * day)
    only_run_of_quiet_site = run(quiet, "succeeded", 400 * day)

    assert retention.prune(now=NOW) == {
        "idempotency_records": 2,
        "outbox_published": 1,
        "reconcile_runs": 2,
        "audit_log": 0,
        "workflow_timelines": 0,
    }
    assert set(IdempotencyRecord.objects.values_list("pk", flat=True)) == {at_the_age, fresh}
    assert expired not in IdempotencyRecord.objects.values_list("pk", flat=True)
    assert abandoned not in IdempotencyRecord.objects.values_list("pk", flat=True)
    assert set(OutboxEvent.objects.values_list("pk", flat=True)) == {published_at_age, owed}
    assert published_old not in OutboxEvent.objects.values_list("pk", flat=True)
    assert set(ReconcileRun.objects.values_list("pk", flat=True)) == {
        at_age,
        latest_of_site,
        stuck,
        only_run_of_quiet_site,
    }
    assert not ReconcileRun.objects.filter(pk__in=old_runs).exists()
    # a second pass finds nothing more
    assert retention.prune(now=NOW) == dict.fromkeys(
        ("idempotency_records", "outbox_published", "reconcile_runs", "audit_log",
         "workflow_timelines"), 0
    )  # fmt: skip


def test_an_age_of_zero_keeps_that_kind_forever(settings: Any) -> None:
    settings.RETENTION_OUTBOX_DAYS = 0
    settings.RETENTION_IDEMPOTENCY_HOURS = 1
    settings.RETENTION_RECONCILE_RUN_DAYS = 0
    settings.RETENTION_AUDIT_DAYS = settings.RETENTION_TIMELINE_DAYS = 0
    ancient = outbox(timedelta(days=3650))
    site = make_site()
    runs = [run(site, "succeeded", timedelta(days=3650)) for _ in range(3)]
    idempotency(timedelta(hours=2))
    assert retention.prune(now=NOW) == {"idempotency_records": 1}
    assert OutboxEvent.objects.filter(pk=ancient).exists()
    assert ReconcileRun.objects.filter(pk__in=runs).count() == 3


def test_a_backlog_larger_than_a_batch_is_pruned_whole(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "BATCH", 7)
    settings.RETENTION_IDEMPOTENCY_HOURS = 1
    for n in range(23):
        idempotency(timedelta(hours=2, seconds=n))
    keep = idempotency(timedelta(minutes=1))
    assert retention.prune(now=NOW)["idempotency_records"] == 23
    assert list(IdempotencyRecord.objects.values_list("pk", flat=True)) == [keep]


def test_the_beat_task_is_scheduled_hourly_and_registered_with_the_worker() -> None:
    from config import celery_app

    assert django_settings.CELERY_BEAT_SCHEDULE["retention-prune"] == {
        "task": "retention.prune",
        "schedule": 3600.0,
    }
    celery_app.loader.import_default_modules()
    assert "retention.prune" in celery_app.tasks
    assert retention.prune_task.name == "retention.prune"


def test_retention_ages_are_read_from_the_environment(tmp_path: Path) -> None:
    """The settings module reads MAASCP_RETENTION_*; a negative age is refused at start-up."""
    from tests.test_settings_env import run_check

    bad = run_check({"MAASCP_RETENTION_OUTBOX_DAYS": "-1"}, tmp_path)
    assert bad.returncode != 0
    assert "MAASCP_RETENTION_OUTBOX_DAYS=-1 must be at least 0" in bad.stderr
    assert {
        "MAASCP_RETENTION_IDEMPOTENCY_HOURS",
        "MAASCP_RETENTION_OUTBOX_DAYS",
        "MAASCP_RETENTION_RECONCILE_RUN_DAYS",
        "MAASCP_RETENTION_TIMELINE_DAYS",
        "MAASCP_RETENTION_AUDIT_DAYS",
        "MAASCP_ARCHIVE_DIR",
    } <= django_settings.KNOWN_ENV_VARS
    # history is pruned by default too, after it is archived (docs/settings.md)
    assert (django_settings.RETENTION_TIMELINE_DAYS, django_settings.RETENTION_AUDIT_DAYS) == (
        180,
        400,
    )


# -- timelines: kept, exported per workflow -------------------------------------------------------


def _events(wf: Any, *messages: str) -> None:
    for i, message in enumerate(messages):
        OnboardingEvent.objects.create(
            onboarding=wf, kind="stage.completed", stage=f"s{i}", message=message, data={"i": i}
        )


def test_export_writes_the_workflow_then_its_timeline_one_json_line_each(tmp_path: Path) -> None:
    site = make_site(name="rack-7")
    wf = make_onboarding(site, hostname="c07u31", state="succeeded", finished_at=NOW)
    hostile = 'line one\nline two "quoted" \\ back\u2028slash ünïcode {"json": 1}'
    _events(wf, "preflight checks passed", hostile, "")
    call_command("export_timelines", "--kind", "onboarding", "--out-dir", str(tmp_path))
    lines = (tmp_path / f"onboarding-{wf.pk}.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""  # ends with a newline
    records = [json.loads(line) for line in lines[:-1]]
    head, *events = records
    assert head["record"] == "workflow" and head["format"] == "maascp.timeline/1"
    assert (head["kind"], head["id"], head["site"], head["hostname"], head["state"]) == (
        "onboarding",
        wf.pk,
        "rack-7",
        "c07u31",
        "succeeded",
    )
    assert [e["message"] for e in events] == ["preflight checks passed", hostile, ""]
    assert [e["data"] for e in events] == [{"i": 0}, {"i": 1}, {"i": 2}]
    # the timeline is still in the database: exporting is not pruning
    assert wf.events.count() == 3


def test_export_selects_finished_workflows_by_default_and_by_date(tmp_path: Path) -> None:
    site = make_site()
    old = make_onboarding(site, state="failed", finished_at=NOW - timedelta(days=40))
    recent = make_onboarding(site, state="succeeded", finished_at=NOW)
    running = make_onboarding(site, state="running")
    for wf in (old, recent, running):
        _events(wf, "x")
    cutoff = (NOW - timedelta(days=10)).date().isoformat()
    call_command(
        "export_timelines", "--kind", "onboarding", "--out-dir", str(tmp_path / "a"),
        "--finished-before", cutoff,
    )  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [f"onboarding-{old.pk}.jsonl"]
    call_command("export_timelines", "--kind", "onboarding", "--out-dir", str(tmp_path / "b"))
    assert {p.name for p in (tmp_path / "b").iterdir()} == {
        f"onboarding-{old.pk}.jsonl",
        f"onboarding-{recent.pk}.jsonl",
    }
    # an open workflow only when asked by id (a snapshot of its timeline so far)
    call_command(
        "export_timelines", "--kind", "onboarding", "--out-dir", str(tmp_path / "c"),
        "--id", str(running.pk),
    )  # fmt: skip
    assert [p.name for p in (tmp_path / "c").iterdir()] == [f"onboarding-{running.pk}.jsonl"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "nope"], "unknown kind 'nope'"),
        (["--kind", "onboarding", "--id", "424242"], "no onboarding with id [424242]"),
        (["--kind", "onboarding", "--finished-before", "2026-13-01"], "is not a date"),
    ],
)
def test_export_refuses_bad_arguments_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    with pytest.raises(CommandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call_command("export_timelines", *args, "--out-dir", str(out))
    assert not out.exists() or not any(out.iterdir())


# -- history: archived, then pruned -----------------------------------------------------------


def _archive(root: Path, *parts: str) -> list[dict[str, Any]]:
    [path] = sorted((root.joinpath(*parts)).glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_closed_workflows_timelines_are_archived_then_pruned(settings: Any, tmp_path: Path) -> None:
    settings.ARCHIVE_DIR = tmp_path
    settings.RETENTION_TIMELINE_DAYS = 180
    day = timedelta(days=1)
    site = make_site(name="rack-9")
    old = make_onboarding(site, hostname="c07u31", state="succeeded", finished_at=NOW - 181 * day)
    at_age = make_onboarding(site, state="failed", finished_at=NOW - 180 * day)
    open_long = make_onboarding(site, state="running")  # open: its timeline stays, however old
    for wf in (old, at_age, open_long):
        _events(wf, "preflight checks passed", "deployed")
    OnboardingEvent.objects.filter(onboarding=open_long).update(at=NOW - 400 * day)

    assert retention.prune(now=NOW)["workflow_timelines"] == 2
    assert not old.events.exists() and at_age.events.count() == open_long.events.count() == 2
    head, *events = _archive(tmp_path, "timelines", "onboarding")
    assert (head["record"], head["id"], head["site"], head["hostname"]) == (
        "workflow", old.pk, "rack-9", "c07u31",
    )  # fmt: skip
    assert [e["message"] for e in events] == ["preflight checks passed", "deployed"]
    assert type(old).objects.filter(pk=old.pk).exists()  # the workflow row stays

    # reopened, then closed again long ago: a second file, the first one kept
    _events(old, "retried")
    retention.prune(now=NOW)
    files = sorted(p.name for p in (tmp_path / "timelines" / "onboarding").iterdir())
    assert len(files) == 2 and all(f.startswith(f"onboarding-{old.pk}.") for f in files)


def test_old_audit_rows_are_archived_then_pruned(settings: Any, tmp_path: Path) -> None:
    from maas_domain.models import AuditLog

    settings.ARCHIVE_DIR = tmp_path
    settings.RETENTION_AUDIT_DAYS = 400
    rows = [
        AuditLog.objects.create(
            actor_name="ops", action="maas_site.update", target_type="maas_domain.maassite",
            target_id="1", before={"a": 1}, after={"a": 2}, reason=f"r{i}", correlation_id="c",
        )
        for i in range(3)
    ]  # fmt: skip
    AuditLog.objects.filter(pk__in=[rows[0].pk, rows[1].pk]).update(
        created_at=NOW - timedelta(days=401)
    )
    assert retention.prune(now=NOW)["audit_log"] == 2
    assert list(AuditLog.objects.values_list("pk", flat=True)) == [rows[2].pk]
    day = (NOW - timedelta(days=401)).date().isoformat()
    archived = _archive(tmp_path, "audit", day)
    assert [(r["id"], r["reason"], r["after"]) for r in archived] == [
        (rows[0].pk, "r0", {"a": 2}),
        (rows[1].pk, "r1", {"a": 2}),
    ]
    assert {r["format"] for r in archived} == {"maascp.audit/1"}


def test_history_is_never_pruned_when_its_archive_cannot_be_written(
    settings: Any, tmp_path: Path
) -> None:
    from maas_domain.models import AuditLog

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the archive folder should be")
    settings.ARCHIVE_DIR = blocked
    settings.RETENTION_IDEMPOTENCY_HOURS = 1
    wf = make_onboarding(make_site(), state="succeeded", finished_at=NOW - timedelta(days=999))
    _events(wf, "x")
    row = AuditLog.objects.create(actor_name="ops", action="a", target_type="t", target_id="1")
    AuditLog.objects.filter(pk=row.pk).update(created_at=NOW - timedelta(days=999))
    expired = idempotency(timedelta(hours=2))
    pruned = retention.prune(now=NOW)
    assert (pruned["audit_log"], pruned["workflow_timelines"]) == (0, 0)
    assert wf.events.count() == 1 and AuditLog.objects.filter(pk=row.pk).exists()
    # the other kinds were still pruned
    assert pruned["idempotency_records"] == 1
    assert not IdempotencyRecord.objects.filter(pk=expired).exists()

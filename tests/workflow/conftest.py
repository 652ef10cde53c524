"""Fixtures for driving the engine with the fake kind: its tables (created inside the test's
transaction), its registration, a site, and a record of what would be sent to Celery."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection

from config import celery_app
from maas_domain import events, work
from maas_domain.coalesce import Coalescer
from maas_domain.models import MaasSite
from tests.factories import make_site
from tests.workflow.fake import FakeEvent, FakeWorkflow, Script, make_kind
from workflows import dispatch
from workflows.kinds import KINDS, WorkflowKind
from workflows.scheduling import Start, admit, start_workflow


@dataclass
class Sent:
    """Celery messages the code under test sent (after commit): (task name, args, countdown)."""

    messages: list[tuple[str, tuple[Any, ...], float]] = field(default_factory=list)
    # the queue each message named (None: Celery's router decides), in the same order
    queues: list[str | None] = field(default_factory=list)

    def send_task(self, name: str, args: Any = (), kwargs: Any = None, **options: Any) -> None:
        self.messages.append((name, tuple(args or ()), float(options.get("countdown") or 0)))
        self.queues.append(options.get("queue"))

    def routed(self) -> list[tuple[str, tuple[Any, ...], str | None]]:
        """(task name, args, queue) of every message."""
        return [(n, a, q) for (n, a, _), q in zip(self.messages, self.queues, strict=True)]

    def names(self) -> list[str]:
        return [name for name, _, _ in self.messages]

    def advances(self) -> list[tuple[Any, ...]]:
        return [args for name, args, _ in self.messages if name == "workflow.advance"]

    def clear(self) -> None:
        self.messages.clear()
        self.queues.clear()


@pytest.fixture(autouse=True)
def one_stage_per_execution(settings: Any) -> None:
    """Most engine tests look at one step at a time; tests/workflow/test_chain.py turns the
    chaining of stages that finish at once back on."""
    settings.WORKFLOW_CHAIN_SECONDS = 0


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    recorder = Sent()
    monkeypatch.setattr(celery_app, "send_task", recorder.send_task)
    # each test starts with no follow-up on its way (maas_domain/coalesce.py)
    monkeypatch.setattr(dispatch, "_admissions", Coalescer(dispatch.ADMIT_WINDOW_SECONDS))
    monkeypatch.setattr(events, "_nudges", Coalescer(events._nudges.window))
    return recorder


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def kind(db: None, script: Script, monkeypatch: pytest.MonkeyPatch) -> WorkflowKind[FakeWorkflow]:
    if connection.vendor != "postgresql":
        pytest.skip("the fake kind's tables are created inside the test transaction (PostgreSQL)")
    with connection.schema_editor() as editor:
        editor.create_model(FakeWorkflow)
        editor.create_model(FakeEvent)
    fake = make_kind(script)
    monkeypatch.setitem(KINDS, "fake", fake)
    monkeypatch.setitem(work.KINDS, "fake", fake)  # the core's view of the registry
    monkeypatch.setattr(events, "_KINDS", {*events._KINDS, "fake"})
    return fake


@pytest.fixture
def site(db: None) -> MaasSite:
    return make_site(policy={"max_concurrent_workflows": 2})


@pytest.fixture
def start(kind: WorkflowKind[FakeWorkflow], site: MaasSite, admin_user: Any, sent: Sent) -> Any:
    """Start a fake workflow the one way every workflow starts; returns the row."""

    def start(hostname: str = "h1", **fields: Any) -> FakeWorkflow:
        return start_workflow(
            kind,
            FakeWorkflow(site=site, hostname=hostname, **fields),
            Start(actor=admin_user, message="requested", audit_action="fake.start"),
        )

    return start


@pytest.fixture
def running(start: Any, site: MaasSite, django_capture_on_commit_callbacks: Any) -> Any:
    """Start and admit a fake workflow; returns the row, running."""

    def running(hostname: str = "h1", **fields: Any) -> FakeWorkflow:
        wf = start(hostname, **fields)
        with django_capture_on_commit_callbacks(execute=True):
            admit(site.pk)
        wf.refresh_from_db()
        assert wf.state == "running"
        return wf

    return running

"""Abstract workflow and timeline-event models shared by onboarding and decommission."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django_fsm import FSMField, transition


class WorkflowState:
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    MANUAL_INTERVENTION = "manual_intervention"

    ALL = (
        PENDING,
        RUNNING,
        WAITING,
        SUCCEEDED,
        FAILED,
        CANCELLING,
        CANCELLED,
        MANUAL_INTERVENTION,
    )
    # A workflow in one of these states owns its host: nothing else may start on it.
    # ``failed`` is closed so a host is not stuck behind a failure nobody can cancel; a
    # recovery verb that reopens a failed workflow goes through the same unique constraint.
    OPEN = (PENDING, RUNNING, WAITING, CANCELLING, MANUAL_INTERVENTION)
    CHOICES = [(s, s) for s in ALL]


class Workflow(models.Model):
    """A durable workflow row: the database, not the broker, says where it stands.

    ``stage`` is the stage to run (or running, or waited on); ``checkpoint`` the last completed
    one. ``dispatch`` counts hand-offs to Celery: a task carries the dispatch it was sent for,
    so stale and duplicate messages find a mismatch and do nothing. ``lease_owner`` /
    ``lease_expires_at`` say which execution may act right now (claimed by compare-and-swap,
    renewed before every MAAS mutation, released when the stage result is recorded); a lease
    that expires still held means the worker died (``lost_leases``). The FSM on ``state`` is a
    guard only: the engine performs moves with compare-and-swap updates.
    """

    state = FSMField(default=WorkflowState.PENDING, choices=WorkflowState.CHOICES)
    stage = models.CharField(max_length=32, blank=True, default="")
    checkpoint = models.CharField(
        max_length=32, blank=True, default="", help_text="Last completed stage."
    )
    attempt = models.PositiveIntegerField(default=1)
    correlation_id = models.CharField(max_length=64, db_index=True)
    reason = models.CharField(max_length=500, blank=True, default="")
    failure_class = models.CharField(max_length=32, blank=True, default="")
    dispatch = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lost_leases = models.PositiveSmallIntegerField(default=0)
    stage_started_at = models.DateTimeField(null=True, blank=True)
    stage_tries = models.PositiveSmallIntegerField(default=0)
    stage_data = models.JSONField(default=dict, blank=True)
    wait_system_id = models.CharField(max_length=32, blank=True, default="")
    wait_status = models.SmallIntegerField(null=True, blank=True)
    next_check_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    @classmethod
    def open_filter(cls) -> Q:
        return Q(state__in=WorkflowState.OPEN)

    @property
    def is_open(self) -> bool:
        return self.state in WorkflowState.OPEN

    # Legal moves (guards only; no side effects). The engine and the recovery verbs check a
    # move here before their compare-and-swap update.
    @transition(field=state, source=WorkflowState.PENDING, target=WorkflowState.RUNNING)
    def start(self) -> None: ...

    @transition(field=state, source=WorkflowState.RUNNING, target=WorkflowState.WAITING)
    def wait(self) -> None: ...

    @transition(field=state, source=WorkflowState.WAITING, target=WorkflowState.RUNNING)
    def wake(self) -> None: ...

    @transition(field=state, source=WorkflowState.RUNNING, target=WorkflowState.SUCCEEDED)
    def succeed(self) -> None: ...

    @transition(
        field=state,
        source=[WorkflowState.PENDING, WorkflowState.RUNNING, WorkflowState.WAITING],
        target=WorkflowState.FAILED,
    )
    def fail(self) -> None: ...


class WorkflowEvent(models.Model):
    """One timeline entry: stage start/end, MAAS observation, retry decision, operator action."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=48)
    stage = models.CharField(max_length=32, blank=True, default="")
    attempt = models.PositiveIntegerField(default=1)
    message = models.CharField(max_length=1000, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    actor_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        abstract = True
        ordering = ["at", "id"]

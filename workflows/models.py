"""The abstract workflow row, its timeline event, and the one table of state moves.

Every state move of every workflow kind is a django-fsm transition below. The field is
protected: code cannot assign ``state`` directly. In-memory moves call the transition (under the
row lock the engine and the verbs hold); compare-and-swap updates that move many rows at once
(admission, waking) read their sources and target from the same transition with
:func:`sources` and :func:`target`. docs/architecture.md ("Workflows") explains the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import Q
from django_fsm import FSMField

if TYPE_CHECKING:
    from django.db.models.fields.related_descriptors import RelatedManager

from maas_domain.fsm import Lifecycle, move
from maas_domain.work import OPEN_STATES, WorkflowState

W = WorkflowState
# What every workflow shows, whatever its kind, in this order: its API answer, its admin page's
# summary and its timeline export start with these (a kind adds its own after them).
COMMON_FIELDS = (
    "hostname",
    "state",
    "stage",
    "checkpoint",
    "attempt",
    "failure_class",
    "reason",
    "maas_system_id",
    "correlation_id",
    "created_at",
    "started_at",
    "finished_at",
)
# States an execution may claim (run a stage, or the kind's cancel stage).
RUNNABLE_STATES = (W.RUNNING, W.CANCELLING)


class Workflow(Lifecycle):
    """A durable workflow row: the database, not the broker, says where it stands.

    ``stage`` is the stage to run (or running, or waited on); ``checkpoint`` the last completed
    one. ``dispatch`` counts hand-offs to Celery: a task carries the dispatch it was sent for,
    so stale and duplicate messages find a mismatch and do nothing. ``lease_owner`` /
    ``lease_expires_at`` say which execution may act right now (claimed by compare-and-swap,
    renewed before every MAAS mutation, released when the stage result is recorded); a lease
    that expires still held means the worker died (``lost_leases``).
    """

    state = FSMField(default=W.PENDING, choices=W.choices, protected=True)
    if TYPE_CHECKING:  # each kind's timeline model points back with related_name="events"
        events: RelatedManager[Any]
    site = models.ForeignKey(
        "maas_domain.MaasSite", on_delete=models.PROTECT, related_name="%(class)ss"
    )
    hostname = models.CharField(max_length=63)
    maas_system_id = models.CharField(max_length=32, blank=True, default="")
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
    # Set when another workflow runs this one on its behalf (a reimage's redeploy): the one
    # link between the two, with the parent's attempt that started it (workflows/family.py).
    parent_kind = models.CharField(max_length=32, blank=True, default="")
    parent_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    parent_attempt = models.PositiveIntegerField(null=True, blank=True)

    # The node a kind provisions or retires (a concrete kind declares the foreign key).
    node_id: int | None

    class Meta:
        abstract = True

    @classmethod
    def open_filter(cls) -> Q:
        return Q(state__in=OPEN_STATES)

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    # -- the transition table (guards only: no side effects) ----------------------------------

    @move(state, W.PENDING, W.RUNNING)
    def admit(self) -> None:
        """Admission gave the workflow a slot on its site."""

    @move(state, W.RUNNING, W.WAITING)
    def wait(self) -> None:
        """A stage waits for MAAS or an external signal."""

    @move(state, W.WAITING, W.RUNNING)
    def wake(self) -> None:
        """The awaited change came (or the check-in time)."""

    @move(state, W.RUNNING, W.SUCCEEDED)
    def succeed(self) -> None:
        """The last stage is done."""

    @move(state, [W.PENDING, W.RUNNING, W.WAITING], W.FAILED)
    def fail(self) -> None:
        """A stage cannot succeed without an operator."""

    @move(state, [W.PENDING, W.RUNNING, W.WAITING, W.CANCELLING], W.MANUAL_INTERVENTION)
    def freeze(self) -> None:
        """Nothing automatic touches the workflow until an operator acts."""

    @move(state, [W.RUNNING, W.WAITING], W.CANCELLING)
    def begin_cancel(self) -> None:
        """An operator cancelled a live workflow: its kind's cancel stage compensates."""

    @move(state, [W.PENDING, W.CANCELLING], W.CANCELLED)
    def end_cancelled(self) -> None:
        """Cancelled before it started, or the cancel stage compensated."""

    @move(
        state,
        [W.FAILED, W.SUCCEEDED, W.CANCELLED, W.MANUAL_INTERVENTION, W.RUNNING, W.WAITING],
        W.PENDING,
    )
    def reopen(self) -> None:
        """A recovery verb puts the workflow back in the admission queue."""


Move = Callable[[Any], None]


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

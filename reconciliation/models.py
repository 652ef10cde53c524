"""Reconciliation rows: the last MAAS state of each node, reconcile runs, and the drift ledger."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django_fsm import FSMField

from maas_domain.fsm import Lifecycle, move
from maas_domain.models import MaasSite, Node


class NodeMaasState(models.Model):
    """What MAAS last showed for one of our nodes (written by reconcile runs only).

    ``system_id`` is the machine the node was matched to (its own ``maas_system_id``, its open
    workflow's, or a unique hostname match). ``accepted_status`` / ``accepted_power_state`` are
    MAAS values an operator adopted through a drift resolution: while MAAS shows exactly that
    value, it is not reported as drift again.
    """

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="maas_state")
    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="+")
    system_id = models.CharField(max_length=32, blank=True, default="")
    hostname = models.CharField(max_length=255, blank=True, default="")
    status = models.SmallIntegerField(null=True, blank=True)
    status_name = models.CharField(max_length=40, blank=True, default="")
    power_state = models.CharField(max_length=16, blank=True, default="")
    power_address = models.CharField(max_length=255, blank=True, default="")
    owner = models.CharField(max_length=150, blank=True, default="")
    last_seen_at = models.DateTimeField(null=True, blank=True)
    missing_since = models.DateTimeField(null=True, blank=True)
    accepted_status = models.SmallIntegerField(null=True, blank=True)
    accepted_power_state = models.CharField(max_length=16, blank=True, default="")
    # The last judgement of the machine's synced hardware against the node's SKU
    # (reconciliation/hardware.py): at which MAAS last_sync, when, and what failed.
    hw_judged_sync = models.CharField(max_length=40, blank=True, default="")
    hw_conformant = models.BooleanField(null=True, blank=True)
    hw_failed = models.JSONField(default=list, blank=True)
    hw_checked_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "node_maas_state"
        verbose_name = "node MAAS state"
        indexes = [models.Index(fields=["site", "system_id"])]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.status_name or '?'}"


class RunState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


ACTIVE_RUN = (RunState.QUEUED, RunState.RUNNING)


class ReconcileRun(Lifecycle):
    """One reconcile of one site. At most one queued-or-running run per site (a partial unique
    index): a second request gets the run in progress; a run is claimed queued → running by
    compare-and-swap, so a duplicate task message does nothing."""

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="+")
    trigger = models.CharField(max_length=16)  # schedule | api | command
    requested_by = models.CharField(max_length=150, blank=True, default="")
    state = FSMField(
        max_length=16, choices=RunState.choices, default=RunState.QUEUED, protected=True
    )
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    machines_seen = models.PositiveIntegerField(default=0)
    nodes_checked = models.PositiveIntegerField(default=0)
    drift_opened = models.PositiveIntegerField(default=0)
    drift_cleared = models.PositiveIntegerField(default=0)
    drift_open = models.PositiveIntegerField(default=0)
    leaks_swept = models.PositiveIntegerField(
        default=0, help_text="Leaks the run swept by itself (policy leak_auto_sweep)."
    )
    maas_requests = models.PositiveSmallIntegerField(default=0)
    maas_errors = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=500, blank=True, default="")
    correlation_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        db_table = "reconcile_runs"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["site"],
                condition=Q(state__in=ACTIVE_RUN),
                name="uniq_active_reconcile_per_site",
            )
        ]
        indexes = [models.Index(fields=["site", "-id"])]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.state})"

    @move(state, RunState.QUEUED, RunState.RUNNING)
    def start(self) -> None:
        """A worker claimed the run (compare-and-swap: a duplicate message finds nothing)."""

    @move(state, RunState.RUNNING, RunState.SUCCEEDED)
    def succeed(self) -> None:
        """MAAS was read, compared and the ledger written."""

    @move(state, [RunState.QUEUED, RunState.RUNNING], RunState.FAILED)
    def fail(self) -> None:
        """MAAS or the credentials were unavailable, the run crashed, or it went stale."""


class DriftKind(models.TextChoices):
    MISSING_IN_MAAS = "missing_in_maas"
    STATUS_MISMATCH = "status_mismatch"
    POWER_STATE_UNEXPECTED = "power_state_unexpected"
    HOSTNAME_MISMATCH = "hostname_mismatch"
    POWER_ADDRESS_MISMATCH = "power_address_mismatch"
    UNKNOWN_MACHINE = "unknown_machine"
    WORKFLOW_STUCK = "workflow_stuck"
    LEAK = "leak"
    # hardware sync of a deployed node's machine (reconciliation/hardware.py)
    HARDWARE_NONCONFORMANT = "hardware_nonconformant"
    HARDWARE_SYNC_STALE = "hardware_sync_stale"


class Severity(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class DriftState(models.TextChoices):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    MANUAL_INTERVENTION = "manual_intervention"
    CLEARED = "cleared"  # the condition went away by itself
    RESOLVED = "resolved"  # an operator adopted MAAS's value


# A record in one of these states is "the" record of its (subject, kind): runs update it.
ACTIVE_DRIFT = (DriftState.OPEN, DriftState.ACKNOWLEDGED, DriftState.MANUAL_INTERVENTION)


class DriftRecord(Lifecycle):
    """One difference between MAAS and our records, as a ledger entry.

    Invariant: at most one active (open, acknowledged, manual_intervention) record per
    (site, subject, kind). ``subject`` is ``node:<id>`` when the difference concerns one of our
    nodes, ``machine:<system_id>`` for a machine we have no live node for, or
    ``workflow:<kind>:<id>``. Records are never deleted: a condition that goes away is
    ``cleared``; an operator's resolution is kept with who, when and why (and audited).
    """

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=32, choices=DriftKind.choices)
    subject = models.CharField(max_length=96)
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.PROTECT, related_name="drift_records"
    )
    system_id = models.CharField(max_length=32, blank=True, default="")
    hostname = models.CharField(max_length=255, blank=True, default="")
    severity = models.CharField(max_length=16, choices=Severity.choices)
    state = FSMField(
        max_length=24, choices=DriftState.choices, default=DriftState.OPEN, protected=True
    )
    message = models.CharField(max_length=500)
    detail = models.JSONField(default=dict, blank=True)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    occurrences = models.PositiveIntegerField(default=1)
    cleared_at = models.DateTimeField(null=True, blank=True)
    acknowledged_until = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=32, blank=True, default="")
    resolved_by = models.CharField(max_length=150, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        db_table = "drift_records"
        ordering = ["-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "subject", "kind"],
                condition=Q(state__in=ACTIVE_DRIFT),
                name="uniq_active_drift_per_subject_kind",
            )
        ]
        indexes = [
            models.Index(fields=["site", "state"]),
            models.Index(fields=["kind", "severity"]),
            models.Index(fields=["system_id"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} on {self.subject} ({self.state})"

    @move(state, ACTIVE_DRIFT, DriftState.ACKNOWLEDGED)
    def acknowledge(self) -> None:
        """An operator knows (until ``acknowledged_until``, if set)."""

    @move(state, DriftState.ACKNOWLEDGED, DriftState.OPEN)
    def reopen(self) -> None:
        """The acknowledgement expired and the difference is still there."""

    @move(state, ACTIVE_DRIFT, DriftState.MANUAL_INTERVENTION)
    def hold(self) -> None:
        """An operator marked it for manual intervention."""

    @move(state, ACTIVE_DRIFT, DriftState.RESOLVED)
    def resolve(self) -> None:
        """An operator adopted MAAS's value into our records."""

    @move(state, ACTIVE_DRIFT, DriftState.CLEARED)
    def clear(self) -> None:
        """The difference went away by itself."""

"""Decommission workflow rows (node_decommissions) and their timeline."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from maas_domain.models import Node, SiteProfile
from maas_domain.work import OPEN_STATES
from workflows.models import Workflow, WorkflowEvent


class Mode(models.TextChoices):
    REIMAGE = "reimage", "reimage"
    FULL = "full", "full"
    STORAGE_CLEANUP = "storage_cleanup", "storage_cleanup"


class Decommission(Workflow):
    """Take a node out of service: release (with the policy's disk erase) and then, by mode,
    redeploy it (reimage), remove it (full) or return it to its pool (storage cleanup).

    Invariants: at most one open decommission per node (database-enforced) and no open
    onboarding beside it (checked under the node's row lock); ``erased`` is true only when MAAS
    finished an erase this workflow asked for; a node whose disks were not erased after an
    erase was required is quarantined, never returned to a pool.
    """

    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="decommissions")
    profile = models.ForeignKey(
        SiteProfile,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decommissions",
        help_text="Policy (erase mode, fallback) and, for reimage, the deploy target.",
    )
    mode = models.CharField(max_length=16, choices=Mode.choices)
    force_release = models.BooleanField(default=False)
    prior_node_state = models.CharField(max_length=16, blank=True, default="")
    erase_mode = models.CharField(max_length=8, blank=True, default="")
    release_requested = models.BooleanField(
        default=False, help_text="A release was sent to MAAS (cancel then quarantines the node)."
    )
    erased = models.BooleanField(
        null=True, blank=True, help_text="MAAS finished the disk erase this workflow asked for."
    )
    # Each disk MAAS listed before the release and what the erase's output shows of it
    # (decommission/erase.py, docs/hardware.md "Erase evidence"); {} until an erase is sent.
    erase_evidence = models.JSONField(default=dict, blank=True)
    fallback_used = models.BooleanField(default=False)
    machine_deleted = models.BooleanField(default=False)
    requested_by = models.CharField(max_length=150, blank=True, default="")
    request_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        db_table = "node_decommissions"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"],
                condition=Q(state__in=OPEN_STATES),
                name="uniq_open_decommission_per_node",
            )
        ]
        indexes = [
            models.Index(fields=["state", "stage"]),
            models.Index(fields=["site", "state"]),
            models.Index(fields=["hostname"]),
        ]

    def __str__(self) -> str:
        return f"decommission {self.pk} {self.hostname} ({self.mode})"


class DecommissionEvent(WorkflowEvent):
    decommission = models.ForeignKey(Decommission, on_delete=models.CASCADE, related_name="events")

    class Meta(WorkflowEvent.Meta):
        db_table = "node_decommission_events"

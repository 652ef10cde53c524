"""A repair: one node out of service for a vendor's fix, and its way back (docs/repair.md)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from maas_domain.models import Node, SiteProfile
from maas_domain.work import OPEN_STATES
from workflows.models import Workflow, WorkflowEvent


class Repair(Workflow):
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="repairs")
    profile = models.ForeignKey(
        SiteProfile,
        on_delete=models.PROTECT,
        related_name="repairs",
        help_text="Policy and, when the node returns through the onboarding stages, its target.",
    )
    ticket = models.CharField(max_length=200, blank=True, default="", help_text="The RMA ticket.")
    fault_class = models.CharField(max_length=64, blank=True, default="")
    prior_node_state = models.CharField(max_length=16, blank=True, default="")
    # What the vendor needs, frozen once when the node is handed over (repair/packet.py).
    packet = models.JSONField(default=dict, blank=True)
    handed_over_at = models.DateTimeField(null=True, blank=True)
    # The repair reported done (the requalify operation): who, when, what was done.
    repaired_at = models.DateTimeField(null=True, blank=True)
    repaired_by = models.CharField(max_length=150, blank=True, default="")
    repair_note = models.CharField(max_length=500, blank=True, default="")
    requested_by = models.CharField(max_length=150, blank=True, default="")
    request_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        db_table = "node_repairs"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"],
                condition=Q(state__in=OPEN_STATES),
                name="uniq_open_repair_per_node",
            )
        ]
        indexes = [
            models.Index(fields=["state", "stage"]),
            models.Index(fields=["site", "state"]),
            models.Index(fields=["hostname"]),
        ]

    def __str__(self) -> str:
        return f"repair {self.pk} {self.hostname}"


class RepairEvent(WorkflowEvent):
    repair = models.ForeignKey(Repair, on_delete=models.CASCADE, related_name="events")

    class Meta(WorkflowEvent.Meta):
        db_table = "node_repair_events"

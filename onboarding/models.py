"""Onboarding workflow rows and their timeline."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from maas_domain.models import MaasSite, Node, SiteProfile, Sku
from maas_domain.workflow.models import Workflow, WorkflowEvent, WorkflowState


class OnboardingBatch(models.Model):
    """A batch request: rows share site, profile and SKU; counts come from its onboardings."""

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="onboarding_batches")
    profile = models.ForeignKey(SiteProfile, on_delete=models.PROTECT, related_name="+")
    sku = models.ForeignKey(Sku, on_delete=models.PROTECT, related_name="+")
    size = models.PositiveIntegerField()
    created_by = models.CharField(max_length=150)
    correlation_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "node_onboarding_batches"
        ordering = ["-id"]
        verbose_name_plural = "onboarding batches"

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.size})"


class Onboarding(Workflow):
    """Take one machine from (hostname, IPMI address) to an enrolled, active node.

    Invariants: at most one open onboarding per (site, hostname) (database-enforced); the
    enrollment token accepted is the one minted for the current ``attempt`` (``token_attempt``),
    once; completion requires every gate of seed 001 §8.2 for the current attempt.
    """

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="onboardings")
    profile = models.ForeignKey(SiteProfile, on_delete=models.PROTECT, related_name="onboardings")
    sku = models.ForeignKey(Sku, on_delete=models.PROTECT, related_name="onboardings")
    hostname = models.CharField(max_length=63)
    ipmi_ip = models.GenericIPAddressField(protocol="IPv4")
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.PROTECT, related_name="onboardings"
    )
    maas_system_id = models.CharField(max_length=32, blank=True, default="")
    created_machine = models.BooleanField(
        default=False,
        help_text="This workflow created the MAAS machine (restart-clean deletes it).",
    )
    pxe_mac = models.CharField(
        max_length=17, blank=True, default="", help_text="Observed PXE MAC (internal)."
    )
    batch = models.ForeignKey(
        OnboardingBatch, null=True, blank=True, on_delete=models.PROTECT, related_name="onboardings"
    )
    confirmed_host = models.CharField(max_length=63, blank=True, default="")
    token_attempt = models.PositiveIntegerField(null=True, blank=True)
    bootstrap_token_hash = models.CharField(max_length=64, blank=True, default="")
    enrollment_token_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    site_bundle_version = models.CharField(max_length=64, blank=True, default="")
    agent_bootstrap_version = models.CharField(max_length=64, blank=True, default="")
    agent_started_at = models.DateTimeField(null=True, blank=True)
    enrolled_at = models.DateTimeField(null=True, blank=True)
    enrolled_attempt = models.PositiveIntegerField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # Set when another workflow runs this onboarding on its behalf (a reimage decommission
    # redeploys through the onboarding stages): it is woken when this one finishes.
    parent_kind = models.CharField(max_length=32, blank=True, default="")
    parent_id = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "node_onboardings"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "hostname"],
                condition=Q(state__in=WorkflowState.OPEN),
                name="uniq_open_onboarding_per_host",
            )
        ]
        indexes = [
            models.Index(fields=["state", "stage"]),
            models.Index(fields=["site", "state"]),
            models.Index(fields=["hostname"]),
        ]

    def __str__(self) -> str:
        return f"onboarding {self.pk} {self.hostname}"


class OnboardingEvent(WorkflowEvent):
    onboarding = models.ForeignKey(Onboarding, on_delete=models.CASCADE, related_name="events")

    class Meta(WorkflowEvent.Meta):
        db_table = "node_onboarding_events"

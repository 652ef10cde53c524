"""Onboarding workflow rows and their timeline."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from maas_domain.models import MaasSite, Node, SiteProfile, Sku
from maas_domain.workflow.models import Workflow, WorkflowEvent, WorkflowState


class Onboarding(Workflow):
    """Take one machine from (hostname, IPMI address) to an enrolled, active node.

    Invariant (database-enforced): at most one open onboarding per (site, hostname).
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
        indexes = [models.Index(fields=["state", "stage"])]

    def __str__(self) -> str:
        return f"onboarding {self.pk} {self.hostname}"


class OnboardingEvent(WorkflowEvent):
    onboarding = models.ForeignKey(Onboarding, on_delete=models.CASCADE, related_name="events")

    class Meta(WorkflowEvent.Meta):
        db_table = "node_onboarding_events"

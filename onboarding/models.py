"""Onboarding workflow rows and their timeline."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django_fsm import FSMField

from maas_domain.fsm import Lifecycle, move
from maas_domain.models import MaasSite, Node, SiteProfile, Sku
from maas_domain.work import OPEN_STATES
from workflows.models import Workflow, WorkflowEvent


class BatchState(models.TextChoices):
    RUNNING = "running", "running"
    PAUSED = "paused", "paused"
    CANCELLED = "cancelled", "cancelled"


class OnboardingBatch(Lifecycle):
    """A batch request: rows share site, profile and SKU; counts come from its onboardings.

    Admission of its pending rows (docs/onboarding.md, "Batches: canary and failure budget"):
    while ``canary_size`` > 0 and ``canary_passed_at`` is unset only its canary rows start;
    ``paused`` or ``cancelled`` holds every pending row. The budget (frozen from policy at
    creation) pauses it when failures since the last resume reach a count or a share.
    """

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="onboarding_batches")
    profile = models.ForeignKey(SiteProfile, on_delete=models.PROTECT, related_name="+")
    sku = models.ForeignKey(Sku, on_delete=models.PROTECT, related_name="+")
    size = models.PositiveIntegerField()
    created_by = models.CharField(max_length=150)
    correlation_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    state = FSMField(
        max_length=16, choices=BatchState.choices, default=BatchState.RUNNING, protected=True
    )
    paused_reason = models.CharField(max_length=500, blank=True, default="")
    paused_at = models.DateTimeField(null=True, blank=True)
    canary_size = models.PositiveIntegerField(default=0)
    canary_passed_at = models.DateTimeField(null=True, blank=True)
    pause_after_failures = models.PositiveIntegerField(default=0)
    pause_failure_percent = models.PositiveSmallIntegerField(default=0)
    failures_before_resume = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "node_onboarding_batches"
        ordering = ["-id"]
        verbose_name_plural = "onboarding batches"

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.size})"

    @move(state, BatchState.RUNNING, BatchState.PAUSED)
    def pause(self) -> None:
        """The failure budget ran out: pending rows wait for an operator."""

    @move(state, BatchState.PAUSED, BatchState.RUNNING)
    def resume(self) -> None:
        """An operator looked and lets the batch go on."""

    @move(state, [BatchState.RUNNING, BatchState.PAUSED], BatchState.CANCELLED)
    def cancel(self) -> None:
        """An operator cancelled what is still open."""


class Onboarding(Workflow):
    """Take one machine from (hostname, IPMI address) to an enrolled, active node.

    Invariants: at most one open onboarding per (site, hostname) (database-enforced); the
    enrollment token accepted is the one minted for the current ``attempt`` (``token_attempt``),
    once; completion requires every completion gate (docs/architecture.md, "Onboarding
    stages") for the current attempt.
    """

    profile = models.ForeignKey(SiteProfile, on_delete=models.PROTECT, related_name="onboardings")
    sku = models.ForeignKey(Sku, on_delete=models.PROTECT, related_name="onboardings")
    ipmi_ip = models.GenericIPAddressField(protocol="IPv4")
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.PROTECT, related_name="onboardings"
    )
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
    batch_canary = models.BooleanField(
        default=False, help_text="One of its batch's canary rows (they start first)."
    )
    confirmed_host = models.CharField(max_length=63, blank=True, default="")
    token_attempt = models.PositiveIntegerField(null=True, blank=True)
    # Whose tokens the machine's node holds: the attempt of the payload MAAS last deployed, or
    # the attempt whose tokens a check-in handed over (docs/onboarding.md, "Tokens").
    node_token_attempt = models.PositiveIntegerField(null=True, blank=True)
    # The attempt whose payload MAAS last deployed (deploy sends it): a run whose attempt is not
    # this one redeployed nothing, so only a check-in can give the node its tokens and its wait
    # at enrollment is bounded by policy rerun_enrollment_window (docs/onboarding.md, "Reruns").
    deployed_attempt = models.PositiveIntegerField(null=True, blank=True)
    # The node agent's latest accepted check-in and whose tokens it held then (recorded at most
    # once a minute per attempt); and when a run that redeployed nothing adopted the node's
    # standing enrollment because its agent checked in with this attempt's tokens.
    agent_checkin_at = models.DateTimeField(null=True, blank=True)
    agent_checkin_attempt = models.PositiveIntegerField(null=True, blank=True)
    enrollment_adopted_at = models.DateTimeField(null=True, blank=True)
    bootstrap_token_hash = models.CharField(max_length=64, blank=True, default="")
    enrollment_token_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    site_bundle_version = models.CharField(max_length=64, blank=True, default="")
    agent_bootstrap_version = models.CharField(max_length=64, blank=True, default="")
    # What the node reported this run (docs/onboarding.md, "Completion gates"): the site
    # bundle ran, the node agent started, or which of the two failed and why.
    site_bundle_done_at = models.DateTimeField(null=True, blank=True)
    agent_started_at = models.DateTimeField(null=True, blank=True)
    node_failure = models.CharField(max_length=32, blank=True, default="")
    node_failure_detail = models.CharField(max_length=500, blank=True, default="")
    enrolled_at = models.DateTimeField(null=True, blank=True)
    enrolled_attempt = models.PositiveIntegerField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # The judgement of the machine against its SKU's hardware profile, and the acceptance
    # tests' results (docs/hardware.md): each requirement or script with what was expected,
    # what MAAS showed and whether it held; {} until the stage ran.
    hardware_report = models.JSONField(default=dict, blank=True)
    acceptance_report = models.JSONField(default=dict, blank=True)
    # MAAS kept the storage layout and PXE link an earlier onboarding of this node set (a
    # reimage's redeploy starts past commissioning): storage_pxe and reachability do not run.
    # A commissioning this run sends clears it.
    layout_kept = models.BooleanField(default=False)
    # Commission even a Ready machine: its inventory may have changed (a repair, a rerun of an
    # onboarding its hardware failed). Cleared once this run's commissioning ends.
    recommission = models.BooleanField(default=False)
    # The attempt whose commissioning this run sent and saw finish: the machine's facts are
    # newer than anything before it (a requalification lifts the node's cordons on success).
    commissioned_attempt = models.PositiveIntegerField(null=True, blank=True)
    # Deploy once judged (and tested): false for a requalification that returns the node to
    # the pool with its machine Ready in MAAS (policy requalify_redeploys).
    deploys = models.BooleanField(default=True)

    class Meta:
        db_table = "node_onboardings"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "hostname"],
                condition=Q(state__in=OPEN_STATES),
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

"""Shapes of the onboarding API's requests and answers (docs/api.md, "Onboardings")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema_field,
)
from rest_framework import serializers

from maas_domain.api.reports import AcceptanceReportSerializer, HardwareReportSerializer
from maas_domain.api.serializers import IPv4Field, StrictMixin, hostname_field
from maas_domain.validators import hostname_error, ipv4_error
from maas_domain.work import WorkflowState
from onboarding import budget as batch_rules
from onboarding import selectors
from onboarding.models import Onboarding, OnboardingBatch
from workflows import api as workflows
from workflows.models import COMMON_FIELDS


def _check(fn: Any) -> Any:
    def run(value: Any) -> Any:
        if reason := fn(value):
            raise serializers.ValidationError(reason)
        return value

    return run


class OnboardingStartSerializer(StrictMixin, serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    profile_id = serializers.IntegerField()
    sku_id = serializers.IntegerField()
    # Identifiers are not trimmed: "c07u40\n" is refused, never silently made "c07u40".
    hostname = serializers.CharField(
        max_length=63, trim_whitespace=False, validators=[_check(hostname_error)]
    )
    ipmi_ip = serializers.CharField(
        max_length=15, trim_whitespace=False, validators=[_check(ipv4_error)]
    )
    confirm_host = serializers.CharField(
        required=False, max_length=63, trim_whitespace=False, validators=[_check(hostname_error)]
    )


class BatchRowSerializer(serializers.Serializer[Any]):
    hostname = hostname_field()
    ipmi_ip = IPv4Field()


@extend_schema_field(BatchRowSerializer(many=True))
class RowsField(serializers.JSONField):
    """Rows are checked by the service, all at once, each error with its row index."""


class BatchStartSerializer(StrictMixin, serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    profile_id = serializers.IntegerField()
    sku_id = serializers.IntegerField()
    rows = RowsField(help_text="1 to 5000 hosts; all are started or none.")


class OnboardingSerializer(workflows.WorkflowSerializer):
    hardware_report = HardwareReportSerializer(
        read_only=True, help_text="The machine judged against its SKU (docs/hardware.md)."
    )
    acceptance_report = AcceptanceReportSerializer(
        read_only=True, help_text="The acceptance tests' results per script and device."
    )

    class Meta:
        model = Onboarding
        fields = [
            "id",
            "site_id",
            "profile_id",
            "sku_id",
            "node_id",
            "batch_id",
            "queued",
            *COMMON_FIELDS,
            "ipmi_ip",
            "created_machine",
            "site_bundle_version",
            "agent_bootstrap_version",
            "token_attempt",
            "node_token_attempt",
            "deployed_attempt",
            "agent_checkin_at",
            "agent_checkin_attempt",
            "pxe_mac",
            "batch_canary",
            "site_bundle_done_at",
            "agent_started_at",
            "node_failure",
            "node_failure_detail",
            "enrolled_at",
            "enrolled_attempt",
            "enrollment_adopted_at",
            "completed_at",
            "hardware_report",
            "acceptance_report",
            "updated_at",
        ]
        read_only_fields = fields


class GuardrailCheckSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()


class MaasMachineSeenSerializer(serializers.Serializer[Any]):
    system_id = serializers.CharField()
    hostname = serializers.CharField()
    status = serializers.CharField()


class MaasPreviewSerializer(serializers.Serializer[Any]):
    by_hostname = MaasMachineSeenSerializer(many=True, required=False)
    by_ipmi_address = MaasMachineSeenSerializer(many=True, required=False)
    error = serializers.CharField(required=False, help_text="Set when MAAS could not be read.")


class PreflightStageSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    timeout = serializers.IntegerField(help_text="Seconds, under the effective policy.")
    maas_calls = serializers.ListField(child=serializers.CharField())


class PreflightReportSerializer(serializers.Serializer[Any]):
    """An onboarding's dry run (docs/onboarding.md, "The preflight report"): nothing written."""

    dry_run = serializers.BooleanField()
    allowed = serializers.BooleanField(help_text="Every guardrail passes.")
    guardrails = GuardrailCheckSerializer(many=True)
    maas = MaasPreviewSerializer(help_text="What MAAS shows for the host (read only).")
    stages = PreflightStageSerializer(many=True)
    maas_calls = serializers.ListField(child=serializers.CharField())
    policy = serializers.DictField(help_text="The effective policy of the profile.")


class StateCountsSerializer(serializers.Serializer[Any]):
    """Onboardings of a batch per state (every state present, zeros included)."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {state: serializers.IntegerField() for state in WorkflowState.values}


class FailedRowSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    stage = serializers.CharField()
    failure_class = serializers.CharField()
    reason = serializers.CharField()


class BatchSerializer(serializers.ModelSerializer[OnboardingBatch]):
    counts = serializers.SerializerMethodField()
    open = serializers.SerializerMethodField(help_text="Onboardings not ended yet.")
    queued = serializers.SerializerMethodField(help_text="Pending: waiting for a site slot.")
    finished = serializers.SerializerMethodField(
        help_text="Every onboarding of the batch has ended (none open): nothing is left to "
        "admit, resume or cancel; `state` is then the admission state it ended in."
    )
    phase = serializers.SerializerMethodField(
        help_text="What the batch is doing, as the admin pages and maasctl say it: `finished` "
        "once none of its onboardings is open, else its admission `state` (`running`, "
        "`paused`, `cancelled`)."
    )

    class Meta:
        model = OnboardingBatch
        fields = ["id", "site_id", "profile_id", "sku_id", "size", "created_by", "created_at",
                  "counts", "open", "queued", "finished", "phase", "state", "paused_reason",
                  "paused_at"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(StateCountsSerializer)
    def get_counts(self, batch: Any) -> dict[str, int]:
        return {state: getattr(batch, f"n_{state}") for state in WorkflowState.values}

    def get_open(self, batch: Any) -> int:
        return selectors.open_count(batch)

    def get_queued(self, batch: Any) -> int:
        return int(batch.n_pending)

    def get_finished(self, batch: Any) -> bool:
        return self.get_open(batch) == 0

    def get_phase(self, batch: Any) -> str:
        return selectors.phase(batch)


class CanarySerializer(serializers.Serializer[Any]):
    size = serializers.IntegerField(help_text="Onboardings admitted first (0: no canary).")
    passed_at = serializers.DateTimeField(allow_null=True)


class FailureBudgetSerializer(serializers.Serializer[Any]):
    pause_after_failures = serializers.IntegerField(allow_null=True)
    pause_failure_percent = serializers.IntegerField(allow_null=True)
    failures_since_resume = serializers.IntegerField()


class BatchDetailSerializer(BatchSerializer):
    failed = serializers.SerializerMethodField(help_text="Failed hosts with reasons (200 first).")
    canary = serializers.SerializerMethodField()
    failure_budget = serializers.SerializerMethodField()

    class Meta(BatchSerializer.Meta):
        fields = [*BatchSerializer.Meta.fields, "failed", "canary", "failure_budget"]
        read_only_fields = fields

    @extend_schema_field(CanarySerializer)
    def get_canary(self, batch: OnboardingBatch) -> dict[str, Any]:
        passed = batch.canary_passed_at
        return {"size": batch.canary_size, "passed_at": passed.isoformat() if passed else None}

    @extend_schema_field(FailureBudgetSerializer)
    def get_failure_budget(self, batch: OnboardingBatch) -> dict[str, Any]:
        return {
            "pause_after_failures": batch.pause_after_failures,
            "pause_failure_percent": batch.pause_failure_percent,
            "failures_since_resume": batch_rules.failures(batch),
        }

    @extend_schema_field(FailedRowSerializer(many=True))
    def get_failed(self, batch: OnboardingBatch) -> list[dict[str, Any]]:
        return [
            dict(row)
            for row in Onboarding.objects.filter(batch=batch, state=WorkflowState.FAILED)
            .order_by("id")
            .values("id", "hostname", "stage", "failure_class", "reason")[:200]
        ]


class BatchVerbSerializer(StrictMixin, serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)


class BatchCancelSerializer(BatchDetailSerializer):
    cancelled = serializers.ListField(child=serializers.IntegerField())
    left_for_operator = serializers.ListField(child=serializers.IntegerField())

    class Meta(BatchDetailSerializer.Meta):
        fields = [*BatchDetailSerializer.Meta.fields, "cancelled", "left_for_operator"]
        read_only_fields = fields


VerbAnswer, Detail = workflows.detail_serializers(OnboardingSerializer)


START_EXAMPLE = OpenApiExample(
    "one host",
    {"site_id": 1, "profile_id": 1, "sku_id": 1, "hostname": "c07u31", "ipmi_ip": "10.10.7.31"},
    request_only=True,
)


BATCH_EXAMPLE = OpenApiExample(
    "two hosts",
    {"site_id": 1, "profile_id": 1, "sku_id": 1, "rows": [
        {"hostname": "c07u31", "ipmi_ip": "10.10.7.31"},
        {"hostname": "c07u32", "ipmi_ip": "10.10.7.32"},
    ]},
    request_only=True,
)  # fmt: skip

"""Shapes of the reconciliation API's requests and answers (docs/reconciliation.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from maas_domain.api.serializers import StrictMixin
from reconciliation import services
from reconciliation.models import DriftKind, DriftRecord

MAX_ACK = timedelta(days=90)


class DriftSerializer(serializers.ModelSerializer[DriftRecord]):
    class Meta:
        model = DriftRecord
        fields = [
            "id",
            "site_id",
            "kind",
            "severity",
            "state",
            "subject",
            "node_id",
            "system_id",
            "hostname",
            "message",
            "detail",
            "first_seen_at",
            "last_seen_at",
            "occurrences",
            "cleared_at",
            "acknowledged_until",
            "resolution",
            "resolved_by",
            "resolved_at",
            "resolution_reason",
        ]
        read_only_fields = fields


class RunSerializer(StrictMixin, serializers.Serializer[Any]):
    site_id = serializers.IntegerField(required=False, min_value=1)


class ResolveSerializer(StrictMixin, serializers.Serializer[Any]):
    action = serializers.ChoiceField(choices=services.ACTIONS)
    kind = serializers.ChoiceField(choices=DriftKind.choices, required=False)
    drift_id = serializers.IntegerField(required=False, min_value=1)
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)
    expires_at = serializers.DateTimeField(required=False)
    expires_in = serializers.IntegerField(
        required=False, min_value=1, max_value=int(MAX_ACK.total_seconds())
    )
    site_id = serializers.IntegerField(required=False, min_value=1)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, list[str]] = {}
        if "expires_at" in data and "expires_in" in data:
            errors["expires_in"] = ["Give expires_at or expires_in, not both."]
        if "expires_in" in data:
            data["expires_at"] = timezone.now() + timedelta(seconds=data.pop("expires_in"))
        if data.get("expires_at") is not None:
            if data["action"] != "acknowledge":
                errors["expires_at"] = ["Only an acknowledgement can expire."]
            elif data["expires_at"] <= timezone.now():
                errors["expires_at"] = ["Must be in the future."]
            elif data["expires_at"] > timezone.now() + MAX_ACK:
                errors["expires_at"] = ["At most 90 days ahead."]
        if errors:
            raise serializers.ValidationError(errors)
        return data


class RunSummarySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    site_id = serializers.IntegerField()
    state = serializers.CharField()
    trigger = serializers.CharField()
    requested_by = serializers.CharField()
    queued_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    machines_seen = serializers.IntegerField()
    nodes_checked = serializers.IntegerField()
    drift_opened = serializers.IntegerField()
    drift_cleared = serializers.IntegerField()
    drift_open = serializers.IntegerField()
    leaks_swept = serializers.IntegerField(
        help_text="Leaks the run swept by itself (policy leak_auto_sweep)."
    )
    maas_requests = serializers.IntegerField()
    maas_errors = serializers.JSONField()
    reason = serializers.CharField()


class RunRequestedSerializer(RunSummarySerializer):
    reused = serializers.BooleanField(help_text="A run already in progress answered.")


class RunsSerializer(serializers.Serializer[Any]):
    runs = RunRequestedSerializer(many=True)


class CountsSerializer(serializers.Serializer[Any]):
    total = serializers.IntegerField()
    by_kind = serializers.DictField(child=serializers.IntegerField())
    by_severity = serializers.DictField(child=serializers.IntegerField())
    by_state = serializers.DictField(child=serializers.IntegerField())


class SiteReconciliationSerializer(serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    site_name = serializers.CharField()
    site_status = serializers.CharField()
    last_run = RunSummarySerializer(allow_null=True)
    in_progress = RunSummarySerializer(allow_null=True)
    open_drift = CountsSerializer()
    next_run_at = serializers.DateTimeField(allow_null=True)


class ScheduleSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    enabled = serializers.BooleanField()
    schedule = serializers.CharField(required=False)
    last_run_at = serializers.DateTimeField(required=False, allow_null=True)
    next_run_at = serializers.DateTimeField(allow_null=True)


class StatusSerializer(serializers.Serializer[Any]):
    schedule = ScheduleSerializer()
    sites = SiteReconciliationSerializer(many=True)


class ResolvedSerializer(serializers.Serializer[Any]):
    resolved = DriftSerializer(many=True)


class SweepSerializer(StrictMixin, serializers.Serializer[Any]):
    """Sweep one leaked machine of a site (``system_id``), or every leak of the site."""

    site_id = serializers.IntegerField(min_value=1)
    system_id = serializers.RegexField(
        r"^[0-9A-Za-z_-]{1,32}$", required=False, help_text="One machine; without it, the site."
    )
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)


class SweepPlanSerializer(serializers.Serializer[Any]):
    """What the sweep did (or would do) to one machine, and why (docs/reconciliation.md,
    "Leaks")."""

    system_id = serializers.CharField()
    hostname = serializers.CharField()
    status = serializers.CharField(help_text="MAAS's status when the sweep read it.")
    action = serializers.ChoiceField(choices=["release", "mark_broken"])
    erase = serializers.ChoiceField(
        choices=["none", "quick", "secure"], help_text="The erase the release asks MAAS for."
    )
    erase_owed = serializers.CharField(
        help_text="Marked Broken (MAAS cannot release it) although it may hold a tenant's "
        "data: the erase its policy asks for, owed by its way back into service."
    )
    tenant_data = serializers.BooleanField(help_text="A tenant may have written to it.")
    why = serializers.CharField(help_text="What in our records decided tenant_data.")
    policy_from = serializers.CharField(help_text="Whose policy gave the erase mode.")
    left_by = serializers.JSONField(
        allow_null=True, help_text="The latest workflow of any kind on the machine."
    )
    node_id = serializers.IntegerField(allow_null=True)
    node_state = serializers.CharField()
    auto_sweep = serializers.BooleanField(
        help_text="Its policy (leak_auto_sweep) lets reconciliation sweep it by itself."
    )
    outcome = serializers.ChoiceField(choices=["planned", "swept", "failed"])
    maas_status = serializers.CharField(help_text="What MAAS answered the call with.")
    error = serializers.CharField()


class SweepSkippedSerializer(serializers.Serializer[Any]):
    system_id = serializers.CharField()
    hostname = serializers.CharField()
    reason = serializers.CharField()


class SweptSerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField(help_text="True: the plans; nothing was sent to MAAS.")
    site_id = serializers.IntegerField()
    swept = SweepPlanSerializer(many=True)
    failed = SweepPlanSerializer(many=True, help_text="MAAS refused these; nothing recorded.")
    skipped = SweepSkippedSerializer(
        many=True, help_text="Held by us failed, but claimed (an open workflow, a node in service)."
    )

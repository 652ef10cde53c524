"""Shapes of the decommission API's requests and answers (docs/api.md, "Decommissions")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers

from decommission.models import Decommission, Mode
from maas_domain.api.serializers import StrictMixin
from workflows import api as workflows


class DecommissionStartSerializer(StrictMixin, serializers.Serializer[Any]):
    """POST /nodes/{id}/decommission (``mode``) and /nodes/{id}/storage-cleanup (no mode)."""

    mode = serializers.ChoiceField(choices=[Mode.REIMAGE, Mode.FULL])
    force_release = serializers.BooleanField(required=False, default=False)
    profile_id = serializers.IntegerField(required=False)
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    confirm = serializers.BooleanField(required=False, default=False)
    confirm_host = serializers.CharField(max_length=63, required=False, trim_whitespace=False)


class StorageCleanupSerializer(DecommissionStartSerializer):
    mode = None  # type: ignore[assignment]


class DecommissionSerializer(workflows.WorkflowSerializer):
    class Meta:
        model = Decommission
        fields = [
            "id",
            "site_id",
            "node_id",
            "profile_id",
            "hostname",
            "mode",
            "state",
            "queued",
            "stage",
            "checkpoint",
            "attempt",
            "failure_class",
            "reason",
            "maas_system_id",
            "force_release",
            "prior_node_state",
            "erase_mode",
            "erased",
            "fallback_used",
            "machine_deleted",
            "reimage_onboarding_id",
            "requested_by",
            "request_reason",
            "correlation_id",
            "created_at",
            "started_at",
            "finished_at",
            "updated_at",
        ]
        read_only_fields = fields


VerbAnswer, Detail = workflows.detail_serializers(DecommissionSerializer)


START_EXAMPLES = [
    OpenApiExample("reimage", {"mode": "reimage", "reason": "new driver stack"}, request_only=True),
    OpenApiExample(
        "full, taking the node from its tenant",
        {"mode": "full", "confirm": True, "force_release": True, "reason": "RMA"},
        request_only=True,
    ),
]

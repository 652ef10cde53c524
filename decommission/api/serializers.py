"""Shapes of the decommission API's requests and answers (docs/api.md, "Decommissions")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema_field
from rest_framework import serializers

from decommission.models import Decommission, Mode
from maas_domain.api.reports import EraseEvidenceSerializer
from maas_domain.api.serializers import StrictMixin
from workflows import api as workflows
from workflows import family
from workflows.models import COMMON_FIELDS


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
    erase_evidence = EraseEvidenceSerializer(
        read_only=True,
        help_text="Each disk MAAS listed before the release and what the erase shows of it.",
    )
    reimage_onboarding_id = serializers.SerializerMethodField()

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_reimage_onboarding_id(self, wf: Decommission) -> int | None:
        if hasattr(wf, "latest_child_id"):  # annotated by the list (``with_latest_child``)
            return wf.latest_child_id  # type: ignore[no-any-return]
        child = family.latest_child(wf)
        return child.pk if child is not None else None

    class Meta:
        model = Decommission
        fields = [
            "id",
            "site_id",
            "node_id",
            "profile_id",
            "queued",
            *COMMON_FIELDS,
            "mode",
            "force_release",
            "prior_node_state",
            "erase_mode",
            "erased",
            "fallback_used",
            "erase_evidence",
            "machine_deleted",
            "reimage_onboarding_id",
            "requested_by",
            "request_reason",
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

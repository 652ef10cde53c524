"""Shapes of the repair API's requests and answers (docs/api.md, "Repairs")."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from maas_domain.api.serializers import StrictMixin
from workflows import api as workflows
from workflows.models import COMMON_FIELDS

from ..models import Repair


class RepairStartSerializer(StrictMixin, serializers.Serializer[Any]):
    """POST /nodes/{id}/repair."""

    ticket = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="",
        help_text="The vendor's or your RMA ticket (kept with the packet).",
    )  # fmt: skip
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    profile_id = serializers.IntegerField(
        required=False,
        help_text="Policy and requalification target; default: the node's last onboarding's.",
    )


class RequalifySerializer(StrictMixin, serializers.Serializer[Any]):
    """POST /repairs/{id}/requalify: the repair is done."""

    note = serializers.CharField(
        max_length=500, required=False, allow_blank=True, default="",
        help_text="What was repaired (parts replaced, the vendor's report).",
    )  # fmt: skip


class RepairSerializer(workflows.WorkflowSerializer):
    class Meta:
        model = Repair
        fields = [
            "id",
            "site_id",
            "node_id",
            "profile_id",
            "queued",
            *COMMON_FIELDS,
            "ticket",
            "fault_class",
            "prior_node_state",
            "packet",
            "handed_over_at",
            "repaired_at",
            "repaired_by",
            "repair_note",
            "requested_by",
            "request_reason",
            "updated_at",
        ]
        read_only_fields = fields


VerbAnswer, Detail = workflows.detail_serializers(RepairSerializer)

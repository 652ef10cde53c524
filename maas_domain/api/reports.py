"""Shapes of the hardware reports (docs/hardware.md): a machine judged against its SKU, the
acceptance tests' results, the disks a release erased, and the quarantine evidence that freezes
them. Built by the stages and services; declared here for the API and its OpenAPI document."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from maas_domain.models import EvidenceKind, QuarantineEvidence


class HardwareCheckSerializer(serializers.Serializer[Any]):
    requirement = serializers.CharField(help_text="e.g. gpu.count, nics.fabric, disks.0.")
    expected = serializers.CharField()
    observed = serializers.CharField(help_text="What MAAS showed.")
    passed = serializers.BooleanField()


class KeptMaasEventSerializer(serializers.Serializer[Any]):
    """A MAAS event kept with a report (as MAAS stamped it)."""

    created = serializers.CharField()
    level = serializers.CharField()
    message = serializers.CharField()


class _Report(serializers.Serializer[Any]):
    """A report a stage stores: ``{}`` until the stage ran, shown as it is."""

    def to_representation(self, instance: Any) -> Any:
        return super().to_representation(instance) if instance else {}


class HardwareReportSerializer(_Report):
    """The machine judged against its SKU's hardware profile; {} until the stage ran."""

    sku = serializers.CharField(required=False)
    sku_revision = serializers.IntegerField(required=False)
    mode = serializers.ChoiceField(choices=["enforce", "warn"], required=False)
    maas_system_id = serializers.CharField(required=False)
    attempt = serializers.IntegerField(required=False)
    checked_at = serializers.CharField(required=False)
    conformant = serializers.BooleanField(required=False)
    missing = serializers.CharField(
        required=False, help_text="What MAAS had no data for (never judged conformant)."
    )
    checks = HardwareCheckSerializer(many=True, required=False)
    maas_events = KeptMaasEventSerializer(many=True, required=False)


class AcceptanceResultSerializer(serializers.Serializer[Any]):
    script = serializers.CharField()
    device = serializers.CharField(help_text="The disk or interface of a per-device result.")
    device_serial = serializers.CharField()
    status = serializers.CharField(help_text="MAAS's result status (Passed, Failed, Timed out…).")
    exit_status = serializers.IntegerField(allow_null=True)
    runtime = serializers.CharField()
    passed = serializers.BooleanField()
    output_excerpt = serializers.CharField(
        required=False, help_text="A failing result's last lines, secrets blanked."
    )


class AcceptanceReportSerializer(_Report):
    """The acceptance tests' results per script and device; {} until the stage ran."""

    scripts = serializers.ListField(child=serializers.CharField(), required=False)
    attempt = serializers.IntegerField(required=False)
    run_id = serializers.IntegerField(allow_null=True, required=False)
    checked_at = serializers.CharField(required=False)
    passed = serializers.BooleanField(required=False)
    results = AcceptanceResultSerializer(many=True, required=False)
    maas_events = KeptMaasEventSerializer(many=True, required=False)


class ErasedDiskSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(help_text="The block device's MAAS id.")
    name = serializers.CharField(help_text="Kernel name when MAAS listed it (e.g. nvme1n1).")
    serial = serializers.CharField()
    model = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes.")
    # the four below once the wipe was read (absent while the erase is only requested)
    mode = serializers.CharField(
        required=False, help_text="How it was erased (secure, quick, zeroed) or asked."
    )
    outcome = serializers.ChoiceField(choices=["erased", "failed", "no_evidence"], required=False)
    line = serializers.CharField(
        required=False, help_text="The wipe's output line that shows it (or empty)."
    )
    time = serializers.CharField(allow_null=True, required=False, help_text="When the wipe ended.")


class EraseEvidenceSerializer(_Report):
    """What a release with erase did to each disk (docs/hardware.md, "Erase evidence")."""

    mode = serializers.CharField(required=False, help_text="The erase mode asked for.")
    outcome = serializers.CharField(required=False, help_text="requested: the wipe not read yet.")
    erased = serializers.BooleanField(required=False, help_text="Every disk has its own line.")
    run_id = serializers.IntegerField(allow_null=True, required=False)
    result_status = serializers.CharField(
        required=False, help_text="MAAS's one wipe-disks result (Passed even if a disk failed)."
    )
    ended = serializers.CharField(allow_null=True, required=False)
    disks = ErasedDiskSerializer(many=True, required=False)
    unaccounted = serializers.ListField(child=serializers.CharField(), required=False)


class EvidenceSummarySerializer(serializers.ModelSerializer[QuarantineEvidence]):
    node_id = serializers.IntegerField(read_only=True)
    kind = serializers.ChoiceField(choices=EvidenceKind.choices, read_only=True)

    class Meta:
        model = QuarantineEvidence
        fields = ["id", "node_id", "kind", "workflow_kind", "workflow_id", "maas_system_id",
                  "reason", "created_at"]  # fmt: skip
        read_only_fields = fields


class EvidenceEntrySerializer(serializers.Serializer[Any]):
    at = serializers.CharField()
    kind = serializers.CharField()
    stage = serializers.CharField()
    message = serializers.CharField()


class EvidenceSerializer(EvidenceSummarySerializer):
    report = serializers.JSONField(
        read_only=True,
        help_text="The conformance report, the acceptance results or the disks' erase "
        "evidence, as the workflow stored it when the node was quarantined.",
    )
    maas_events = KeptMaasEventSerializer(many=True, read_only=True)
    timeline = EvidenceEntrySerializer(many=True, read_only=True)

    class Meta(EvidenceSummarySerializer.Meta):
        fields = [*EvidenceSummarySerializer.Meta.fields, "report", "maas_events", "timeline"]
        read_only_fields = fields

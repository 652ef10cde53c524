"""Admin API for reconciliation (docs/reconciliation.md): status, drift list, run now, resolve
drift."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import django_filters
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain.access import Action
from maas_domain.api.filters import IdFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.schema import IDEMPOTENCY_KEY, path_id
from maas_domain.api.serializers import StrictMixin
from maas_domain.errors import InvalidInput
from maas_domain.models import MaasSite
from maas_domain.models.sites import SiteStatus
from reconciliation import selectors, services
from reconciliation.models import DriftKind, DriftRecord, DriftState, Severity

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


class DriftFilter(django_filters.FilterSet):
    site = IdFilter(field_name="site_id")
    node = IdFilter(field_name="node_id")
    kind = django_filters.MultipleChoiceFilter(distinct=False, choices=DriftKind.choices)
    severity = django_filters.MultipleChoiceFilter(distinct=False, choices=Severity.choices)
    state = django_filters.MultipleChoiceFilter(distinct=False, choices=DriftState.choices)

    class Meta:
        model = DriftRecord
        fields = ["site", "kind", "severity", "state", "node", "system_id"]


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


@extend_schema_view(list=extend_schema(operation_id="drift_list"))
@extend_schema(tags=["reconciliation"])
class ReconciliationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[DriftRecord]):
    """``/reconciliation/...``: status, drift (list), run, drift resolution."""

    serializer_class = DriftSerializer
    filterset_class = DriftFilter
    action_classes = {
        "run": Action.OPERATE,
        "resolve_node": Action.OPERATE,
        "resolve_machine": Action.OPERATE,
    }
    queryset = DriftRecord.objects.order_by("-last_seen_at", "-id")

    @extend_schema(operation_id="reconciliation_status", responses={200: StatusSerializer})
    def summary(self, request: Request) -> Response:
        return Response(selectors.reconciliation_status())

    @extend_schema(
        operation_id="reconciliation_run",
        request=RunSerializer,
        responses={202: RunsSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    def run(self, request: Request) -> Response:
        def go() -> Response:
            body = RunSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            site_id = body.validated_data.get("site_id")
            if site_id is not None:
                site = MaasSite.objects.filter(pk=site_id).first()
                if site is None:
                    raise InvalidInput("Invalid input.", fields={"site_id": ["Site not found."]})
                sites = [site]
            else:
                sites = list(MaasSite.objects.filter(status=SiteStatus.ACTIVE).order_by("id"))
            runs = []
            for site in sites:
                run, created = services.reconcile_request(
                    site=site, trigger="api", actor=request.user
                )
                runs.append({**(selectors.run_summary(run) or {}), "reused": not created})
            return Response({"runs": runs}, status=status.HTTP_202_ACCEPTED)

        return idempotent(request, go)

    @extend_schema(
        operation_id="drift_resolve_node",
        request=ResolveSerializer,
        responses={200: ResolvedSerializer},
        parameters=[IDEMPOTENCY_KEY, path_id("node_id", "The node.")],
    )
    def resolve_node(self, request: Request, node_id: str) -> Response:
        return self.resolve(request, node_id=node_id)

    @extend_schema(
        operation_id="drift_resolve_machine",
        request=ResolveSerializer,
        responses={200: ResolvedSerializer},
        parameters=[IDEMPOTENCY_KEY],
        description="Drift on a MAAS machine we have no node for (unknown machine, leak).",
    )
    def resolve_machine(self, request: Request, system_id: str) -> Response:
        return self.resolve(request, system_id=system_id)

    def resolve(
        self, request: Request, node_id: str | None = None, system_id: str = ""
    ) -> Response:
        def go() -> Response:
            body = ResolveSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            data = dict(body.validated_data)
            if node_id is not None and "site_id" in data:
                raise InvalidInput(
                    "Invalid input.", fields={"site_id": ["Only for a machine's drift."]}
                )
            records = services.drift_resolve(
                actor=request.user,
                node_id=int(node_id) if node_id is not None else None,
                system_id=system_id,
                **data,
            )
            return Response({"resolved": DriftSerializer(records, many=True).data})

        return idempotent(request, go)

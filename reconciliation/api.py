"""Admin API for reconciliation (seed 000 §4.4): status, drift list, run now, resolve drift."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import django_filters
from django.utils import timezone
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain.api.idempotency import idempotent
from maas_domain.api.serializers import StrictMixin
from maas_domain.errors import InvalidInput
from maas_domain.models import MaasSite
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
    site = django_filters.NumberFilter(field_name="site_id")
    node = django_filters.NumberFilter(field_name="node_id")
    kind = django_filters.MultipleChoiceFilter(choices=DriftKind.choices)
    severity = django_filters.MultipleChoiceFilter(choices=Severity.choices)
    state = django_filters.MultipleChoiceFilter(choices=DriftState.choices)

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


class ReconciliationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[DriftRecord]):
    """``/reconciliation/...``: status, drift (list), run, drift resolution."""

    serializer_class = DriftSerializer
    filterset_class = DriftFilter
    queryset = DriftRecord.objects.order_by("-last_seen_at", "-id")

    def summary(self, request: Request) -> Response:
        return Response(selectors.reconciliation_status())

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
                sites = list(MaasSite.objects.filter(status="active").order_by("id"))
            runs = []
            for site in sites:
                run, created = services.reconcile_request(
                    site=site, trigger="api", actor=request.user
                )
                runs.append({**(selectors.run_summary(run) or {}), "reused": not created})
            return Response({"runs": runs}, status=status.HTTP_202_ACCEPTED)

        return idempotent(request, go)

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

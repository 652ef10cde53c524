"""What every workflow API shares: the detail body (allowed verbs, timeline, live MAAS
diagnostics) and the recovery-verb endpoint, generic over a workflow kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_filters
from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain.api.idempotency import idempotent
from maas_domain.api.serializers import StrictMixin
from maas_domain.maas.diagnostics import machine_diagnostics
from maas_domain.workflow import verbs
from maas_domain.workflow.engine import WorkflowKind
from maas_domain.workflow.models import WorkflowState

EVENT_FIELDS = ["id", "at", "kind", "stage", "attempt", "message", "data", "actor_name"]


class VerbSerializer(StrictMixin, serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)
    confirm = serializers.BooleanField(required=False, default=False)


class WorkflowSerializer(serializers.ModelSerializer[Any]):
    """Base of a kind's read serializer: ``queued`` is a workflow waiting for a site slot."""

    queued = serializers.SerializerMethodField()

    def get_queued(self, wf: Any) -> bool:
        return bool(wf.state == WorkflowState.PENDING)


class WorkflowFilter(django_filters.FilterSet):
    """The list filters every workflow kind has; a kind adds its own and sets ``Meta.model``."""

    site = django_filters.NumberFilter(field_name="site_id")
    state = django_filters.MultipleChoiceFilter(choices=WorkflowState.CHOICES)
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    search = django_filters.CharFilter(field_name="hostname", lookup_expr="icontains")


def timeline(wf: Any) -> list[dict[str, Any]]:
    return [
        {**row, "at": row["at"].isoformat()}
        for row in wf.events.order_by("at", "id").values(*EVENT_FIELDS)
    ]


def detail(wf: Any, serializer: type[serializers.Serializer[Any]], request: Request) -> Response:
    """GET /{kind}s/{id}: the row, allowed verbs, timeline and (unless ?diagnostics=false)
    what MAAS says about the machine now."""
    data = dict(serializer(wf).data)
    data["allowed_verbs"] = verbs.allowed_verbs(wf)
    data["timeline"] = timeline(wf)
    if request.query_params.get("diagnostics", "true").lower() != "false":
        data["diagnostics"] = machine_diagnostics(wf.site, wf.maas_system_id)
    return Response(data)


def verb(
    request: Request,
    kind: WorkflowKind,
    pk: str,
    name: str,
    serializer: type[serializers.Serializer[Any]],
    adopt: Callable[[Any], tuple[str, dict[str, Any]]],
) -> Response:
    """POST /{kind}s/{id}/{verb}[?dry_run=true] with optional {reason, confirm}."""
    get_object_or_404(kind.model, pk=pk)
    dry_run = request.query_params.get("dry_run", "").lower() in ("1", "true", "yes")

    def run() -> Response:
        body = VerbSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = verbs.apply(
            kind,
            int(pk),
            name,
            actor=request.user,
            dry_run=dry_run,
            adopt=adopt if name == "adopt" else None,
            **body.validated_data,
        )
        if result["dry_run"]:
            return Response(result)
        wf = result["workflow"]
        data = dict(serializer(wf).data)
        data["allowed_verbs"] = verbs.allowed_verbs(wf)
        return Response(data, status=status.HTTP_202_ACCEPTED)

    return run() if dry_run else idempotent(request, run)

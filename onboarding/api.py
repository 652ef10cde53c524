"""Admin API for onboardings (seed 000 §4.3) and the node-facing enrollment endpoints."""

from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain.api import workflows
from maas_domain.api.idempotency import idempotent
from maas_domain.api.serializers import StrictMixin
from maas_domain.validators import hostname_error, ipv4_error
from onboarding import services
from onboarding.models import Onboarding, OnboardingBatch
from onboarding.stages import adopt_stage
from onboarding.workflow import KIND


def _check(fn: Any) -> Any:
    def run(value: Any) -> Any:
        if reason := fn(value):
            raise serializers.ValidationError(reason)
        return value

    return run


class StartSerializer(StrictMixin, serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    profile_id = serializers.IntegerField()
    sku_id = serializers.IntegerField()
    hostname = serializers.CharField(validators=[_check(hostname_error)])
    ipmi_ip = serializers.CharField(validators=[_check(ipv4_error)])
    confirm_host = serializers.CharField(required=False)


class BatchSerializer(StrictMixin, serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    profile_id = serializers.IntegerField()
    sku_id = serializers.IntegerField()
    rows = serializers.JSONField()


class OnboardingSerializer(workflows.WorkflowSerializer):
    class Meta:
        model = Onboarding
        fields = [
            "id",
            "site_id",
            "profile_id",
            "sku_id",
            "node_id",
            "batch_id",
            "hostname",
            "ipmi_ip",
            "state",
            "queued",
            "stage",
            "checkpoint",
            "attempt",
            "failure_class",
            "reason",
            "maas_system_id",
            "created_machine",
            "correlation_id",
            "site_bundle_version",
            "agent_bootstrap_version",
            "token_attempt",
            "enrolled_at",
            "enrolled_attempt",
            "created_at",
            "started_at",
            "finished_at",
            "completed_at",
            "updated_at",
        ]
        read_only_fields = fields


class OnboardingFilter(workflows.WorkflowFilter):
    profile = django_filters.NumberFilter(field_name="profile_id")
    batch = django_filters.NumberFilter(field_name="batch_id")

    class Meta:
        model = Onboarding
        fields = ["site", "profile", "state", "stage", "hostname", "batch"]


class OnboardingViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[Onboarding]):
    serializer_class = OnboardingSerializer
    filterset_class = OnboardingFilter
    queryset = Onboarding.objects.order_by("-id")

    def create(self, request: Request) -> Response:
        def run() -> Response:
            body = StartSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            wf = services.onboarding_start(actor=request.user, **body.validated_data)
            return Response(OnboardingSerializer(wf).data, status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

    def retrieve(self, request: Request, pk: str) -> Response:
        wf = get_object_or_404(Onboarding.objects.select_related("site"), pk=pk)
        return workflows.detail(wf, OnboardingSerializer, request)

    @action(detail=False, methods=["post"])
    def batch(self, request: Request) -> Response:
        def run() -> Response:
            body = BatchSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            batch = services.onboarding_start_batch(actor=request.user, **body.validated_data)
            return Response(batch_summary(batch), status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

    def verb(self, request: Request, pk: str, verb: str) -> Response:
        return workflows.verb(request, KIND, pk, verb, OnboardingSerializer, adopt_stage)

    def batch_detail(self, request: Request, pk: str) -> Response:
        return Response(batch_summary(get_object_or_404(OnboardingBatch, pk=pk)))


def batch_summary(batch: OnboardingBatch) -> dict[str, Any]:
    counts = dict(
        Onboarding.objects.filter(batch=batch)
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    failed = list(
        Onboarding.objects.filter(batch=batch, state="failed")
        .order_by("id")
        .values("id", "hostname", "stage", "failure_class", "reason")[:200]
    )
    return {
        "id": batch.pk,
        "site_id": batch.site_id,
        "profile_id": batch.profile_id,
        "sku_id": batch.sku_id,
        "size": batch.size,
        "created_by": batch.created_by,
        "created_at": batch.created_at.isoformat(),
        "counts": counts,
        "queued": counts.get("pending", 0),
        "failed": failed,
    }


# -- node-facing endpoints (no admin auth: the node proves itself with its enrollment token)


class EnrollSerializer(StrictMixin, serializers.Serializer[Any]):
    onboarding_id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    hostname = serializers.CharField(max_length=63)
    enrollment_token = serializers.CharField(max_length=200)
    agent_version = serializers.CharField(max_length=64)
    system_id = serializers.CharField(max_length=32, required=False)


@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
def enroll(request: Request) -> Response:
    body = EnrollSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    wf = services.onboarding_enroll(
        onboarding_id=data["onboarding_id"],
        attempt=data["attempt"],
        token=data["enrollment_token"],
        hostname=data["hostname"],
        agent_version=data["agent_version"],
    )
    return Response({"enrolled": True, "onboarding_id": wf.pk, "node_id": wf.node_id})


@api_view(["GET", "HEAD"])
@authentication_classes([])
@permission_classes([AllowAny])
def node_health(request: Request) -> Response:
    return Response({"ok": True})


def agent_script(request: HttpRequest, version: str) -> HttpResponse:
    if version != settings.NODE_AGENT_VERSION:
        return HttpResponse("unknown agent version\n", status=404, content_type="text/plain")
    body = render_to_string("firstboot/agent-bootstrap.sh", {"agent_version": version})
    return HttpResponse(body, content_type="text/x-shellscript")

"""Admin API for onboardings (docs/api.md) and the node-facing enrollment endpoints."""

from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain import dryrun, throttling
from maas_domain.access import Action
from maas_domain.api.filters import IdFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.schema import IDEMPOTENCY_KEY
from maas_domain.api.serializers import IPv4Field, StrictMixin, hostname_field
from maas_domain.observability import metrics
from maas_domain.validators import hostname_error, ipv4_error
from maas_domain.work import OPEN_STATES, WorkflowState
from onboarding import batches as batch_rules
from onboarding import services
from onboarding.models import Onboarding, OnboardingBatch
from onboarding.workflow import KIND
from workflows import api as workflows


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
            "node_token_attempt",
            "pxe_mac",
            "batch_canary",
            "site_bundle_done_at",
            "agent_started_at",
            "node_failure",
            "node_failure_detail",
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
    profile = IdFilter(field_name="profile_id")
    batch = IdFilter(field_name="batch_id")

    class Meta:
        model = Onboarding
        fields = ["site", "profile", "state", "stage", "hostname", "batch"]


class BatchFilter(django_filters.FilterSet):
    site = IdFilter(field_name="site_id")

    class Meta:
        model = OnboardingBatch
        fields = ["site"]


STATE_COUNTS = {
    state: Count("onboardings", filter=Q(onboardings__state=state))
    for state in WorkflowState.values
}


def batches() -> QuerySet[OnboardingBatch]:
    """Batches with their onboardings counted per state: one query for any page size."""
    return OnboardingBatch.objects.annotate(
        **{f"n_{state}": expr for state, expr in STATE_COUNTS.items()}
    ).order_by("-id")


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

    class Meta:
        model = OnboardingBatch
        fields = ["id", "site_id", "profile_id", "sku_id", "size", "created_by", "created_at",
                  "counts", "open", "queued", "state", "paused_reason", "paused_at"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(StateCountsSerializer)
    def get_counts(self, batch: Any) -> dict[str, int]:
        return {state: getattr(batch, f"n_{state}") for state in WorkflowState.values}

    def get_open(self, batch: Any) -> int:
        return sum(getattr(batch, f"n_{state}") for state in OPEN_STATES)

    def get_queued(self, batch: Any) -> int:
        return int(batch.n_pending)


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


def batch_summary(batch: OnboardingBatch) -> dict[str, Any]:
    """A batch's counts per state, open and queued counts, its failed hosts, and its canary
    and failure budget."""
    return dict(BatchDetailSerializer(batches().get(pk=batch.pk)).data)


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


@extend_schema_view(list=extend_schema(operation_id="onboardings_list"))
@extend_schema(tags=["onboardings"])
class OnboardingViewSet(
    workflows.WorkflowActions, mixins.ListModelMixin, viewsets.GenericViewSet[Onboarding]
):
    serializer_class = OnboardingSerializer
    filterset_class = OnboardingFilter
    action_classes = {
        "create": Action.OPERATE,
        "batch": Action.OPERATE,
        "batch_resume": Action.OPERATE,  # continues work, like resume
        "batch_cancel": Action.ADMIN,  # a cancel of every open onboarding of the batch
    }
    queryset = Onboarding.objects.order_by("-id")
    dry_run_plans = frozenset({"create", "verb"})  # the preflight report, a verb's plan

    @extend_schema(
        operation_id="onboardings_start",
        request=OnboardingStartSerializer,
        responses={
            202: OnboardingSerializer,
            200: OpenApiResponse(
                PreflightReportSerializer,
                description="dry_run=true: the preflight report (guardrails, what MAAS shows, "
                "the stages and MAAS calls); nothing is written.",
            ),
        },
        parameters=[IDEMPOTENCY_KEY],
        examples=[START_EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        if dryrun.active():
            body = OnboardingStartSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            return Response(services.onboarding_preflight(**body.validated_data))

        def run() -> Response:
            body = OnboardingStartSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            wf = services.onboarding_start(actor=request.user, **body.validated_data)
            return Response(OnboardingSerializer(wf).data, status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

    @workflows.detail_schema("onboarding", Detail)
    def retrieve(self, request: Request, pk: str) -> Response:
        wf = get_object_or_404(Onboarding.objects.select_related("site"), pk=pk)
        return workflows.detail(wf, OnboardingSerializer, request)

    @workflows.timeline_schema("onboarding")
    def timeline(self, request: Request, pk: str) -> Response:
        return workflows.timeline_page(get_object_or_404(Onboarding, pk=pk), request)

    @extend_schema(
        operation_id="onboardings_start_batch",
        request=BatchStartSerializer,
        responses={202: BatchDetailSerializer},
        parameters=[IDEMPOTENCY_KEY],
        examples=[BATCH_EXAMPLE],
    )
    @action(detail=False, methods=["post"])
    def batch(self, request: Request) -> Response:
        def run() -> Response:
            body = BatchStartSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            batch = services.onboarding_start_batch(actor=request.user, **body.validated_data)
            return Response(batch_summary(batch), status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

    @workflows.verb_schema("onboarding", VerbAnswer)
    def verb(self, request: Request, pk: str, verb: str) -> Response:
        return workflows.verb(request, KIND, pk, verb, OnboardingSerializer)

    @extend_schema(operation_id="onboarding_batches_read", responses={200: BatchDetailSerializer})
    def batch_detail(self, request: Request, pk: str) -> Response:
        return Response(batch_summary(get_object_or_404(OnboardingBatch, pk=pk)))

    @extend_schema(
        operation_id="onboarding_batches_list",
        responses={200: BatchSerializer(many=True)},
        filters=False,
        parameters=[OpenApiParameter("site", int, description="Only this site's batches.")],
    )
    def batch_list(self, request: Request) -> Response:
        found = BatchFilter(request.query_params, batches())
        if not found.is_valid():
            raise serializers.ValidationError(found.errors)
        page = self.paginate_queryset(found.qs)
        return self.get_paginated_response(BatchSerializer(page, many=True).data)

    @extend_schema(
        operation_id="onboarding_batches_resume",
        request=BatchVerbSerializer,
        responses={200: BatchDetailSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    def batch_resume(self, request: Request, pk: str) -> Response:
        def run() -> Response:
            body = BatchVerbSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            batch = services.batch_resume(actor=request.user, batch_id=pk, **body.validated_data)
            return Response(batch_summary(batch))

        return idempotent(request, run)

    @extend_schema(
        operation_id="onboarding_batches_cancel",
        request=BatchVerbSerializer,
        responses={202: BatchCancelSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    def batch_cancel(self, request: Request, pk: str) -> Response:
        def run() -> Response:
            body = BatchVerbSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            done = services.batch_cancel(actor=request.user, batch_id=pk, **body.validated_data)
            return Response(
                {
                    **batch_summary(done["batch"]),
                    "cancelled": done["cancelled"],
                    "left_for_operator": done["left_for_operator"],
                },
                status=status.HTTP_202_ACCEPTED,
            )

        return idempotent(request, run)


# -- node-facing endpoints (no admin auth: the node proves itself with its enrollment token)


class EnrollSerializer(StrictMixin, serializers.Serializer[Any]):
    onboarding_id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    hostname = serializers.CharField(max_length=63, trim_whitespace=False)
    enrollment_token = serializers.CharField(max_length=200, trim_whitespace=False)
    agent_version = serializers.CharField(max_length=64)
    system_id = serializers.CharField(max_length=32, required=False)


class EnrollAnswerSerializer(serializers.Serializer[Any]):
    enrolled = serializers.BooleanField()
    onboarding_id = serializers.IntegerField()
    node_id = serializers.IntegerField(allow_null=True)


class NodeHealthSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()


def _throttled(request: HttpRequest, endpoint: str) -> HttpResponse | None:
    """The node routes' per-address limit (docs/security.md): a 429 with Retry-After, or None."""
    wait = throttling.over(
        "node_address",
        throttling.client_address(request),
        allowed=settings.NODE_REQUESTS_PER_MINUTE,
    )
    if wait is None:
        return None
    metrics.node_refused(endpoint, "throttled")
    return JsonResponse(
        {"error": "throttled", "detail": "Too many requests."},
        status=429,
        headers={"Retry-After": str(wait)},
    )


@extend_schema(
    operation_id="node_enroll",
    tags=["node-facing"],
    request=EnrollSerializer,
    responses={200: EnrollAnswerSerializer},
    description="Called by a node agent during first boot with its one-time enrollment token.",
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
def enroll(request: Request) -> Response | HttpResponse:
    if busy := _throttled(request, "enroll"):
        return busy
    body = EnrollSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    wait = throttling.over(
        "node_onboarding",
        str(data["onboarding_id"]),
        allowed=settings.NODE_ENROLLS_PER_ONBOARDING,
    )
    if wait is not None:
        metrics.node_refused("enroll", "throttled")
        return Response(
            {"error": "throttled", "detail": "Too many requests."},
            status=429,
            headers={"Retry-After": str(wait)},
        )
    wf = services.onboarding_enroll(
        onboarding_id=data["onboarding_id"],
        attempt=data["attempt"],
        token=data["enrollment_token"],
        hostname=data["hostname"],
        agent_version=data["agent_version"],
    )
    return Response({"enrolled": True, "onboarding_id": wf.pk, "node_id": wf.node_id})


def _throttled_onboarding(endpoint: str, onboarding_id: int) -> Response | None:
    """Node requests per onboarding id (the enrollment's allowance, its own bucket)."""
    wait = throttling.over(
        f"node_{endpoint}", str(onboarding_id), allowed=settings.NODE_ENROLLS_PER_ONBOARDING
    )
    if wait is None:
        return None
    metrics.node_refused(endpoint, "throttled")
    return Response(
        {"error": "throttled", "detail": "Too many requests."},
        status=429,
        headers={"Retry-After": str(wait)},
    )


NODE_REPORT_STATUSES = ["ok", "failed"]


class ReportSerializer(StrictMixin, serializers.Serializer[Any]):
    onboarding_id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    hostname = serializers.CharField(max_length=63, trim_whitespace=False)
    bootstrap_token = serializers.CharField(max_length=200, trim_whitespace=False)
    phase = serializers.ChoiceField(choices=sorted(services.NODE_PHASES))
    status = serializers.ChoiceField(choices=NODE_REPORT_STATUSES)
    detail = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    version = serializers.CharField(max_length=64, required=False, allow_blank=True)


class RecordedAnswerSerializer(serializers.Serializer[Any]):
    recorded = serializers.BooleanField()
    onboarding_id = serializers.IntegerField()


@extend_schema(
    operation_id="node_report",
    tags=["node-facing"],
    auth=[],
    request=ReportSerializer,
    responses={200: RecordedAnswerSerializer},
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
def report(request: Request) -> Response | HttpResponse:
    """The node reports its site bundle's outcome or its agent's start (docs/api.md)."""
    if busy := _throttled(request, "report"):
        return busy
    body = ReportSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    if limited := _throttled_onboarding("report", data["onboarding_id"]):
        return limited
    wf = services.onboarding_node_report(
        onboarding_id=data["onboarding_id"],
        attempt=data["attempt"],
        token=data["bootstrap_token"],
        hostname=data["hostname"],
        phase=data["phase"],
        ok=data["status"] == "ok",
        detail=data.get("detail", ""),
        version=data.get("version", ""),
    )
    return Response({"recorded": True, "onboarding_id": wf.pk})


class CheckinAnswerSerializer(serializers.Serializer[Any]):
    """What a check-in hands back: nothing to do, or the onboarding's newer tokens."""

    action = serializers.ChoiceField(choices=["none", "reenroll"])
    onboarding_id = serializers.IntegerField()
    attempt = serializers.IntegerField(required=False, help_text="Set with action=reenroll.")
    bootstrap_token = serializers.CharField(required=False, help_text="Set with action=reenroll.")
    enrollment_token = serializers.CharField(required=False, help_text="Set with action=reenroll.")


class CheckinSerializer(StrictMixin, serializers.Serializer[Any]):
    onboarding_id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    hostname = serializers.CharField(max_length=63, trim_whitespace=False)
    bootstrap_token = serializers.CharField(max_length=200, trim_whitespace=False)


@extend_schema(
    operation_id="node_checkin",
    tags=["node-facing"],
    auth=[],
    request=CheckinSerializer,
    responses={200: CheckinAnswerSerializer},
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
def checkin(request: Request) -> Response | HttpResponse:
    """A running node agent checks in; it may be handed its onboarding's newer tokens."""
    if busy := _throttled(request, "checkin"):
        return busy
    body = CheckinSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    if limited := _throttled_onboarding("checkin", data["onboarding_id"]):
        return limited
    answer = services.onboarding_checkin(
        onboarding_id=data["onboarding_id"],
        attempt=data["attempt"],
        token=data["bootstrap_token"],
        hostname=data["hostname"],
    )
    return Response(answer, headers={"Cache-Control": "no-store"})


@extend_schema(
    operation_id="node_health", tags=["node-facing"], responses={200: NodeHealthSerializer}
)
@api_view(["GET", "HEAD"])
@authentication_classes([])
@permission_classes([AllowAny])
def node_health(request: Request) -> Response | HttpResponse:
    return _throttled(request, "health") or Response({"ok": True})


def agent_script(request: HttpRequest, version: str) -> HttpResponse:
    if busy := _throttled(request, "agent_script"):
        return busy
    if version != settings.NODE_AGENT_VERSION:
        return HttpResponse("unknown agent version\n", status=404, content_type="text/plain")
    body = render_to_string("firstboot/agent-bootstrap.sh", {"agent_version": version})
    return HttpResponse(body, content_type="text/x-shellscript")

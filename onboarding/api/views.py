"""The operators' onboarding API (docs/api.md, "Onboardings"): list, start (or its preflight
report), detail, timeline, the recovery verbs, batches.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain import dryrun
from maas_domain.access import Action
from maas_domain.api.filters import IdFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.schema import IDEMPOTENCY_KEY
from onboarding import batches as batch_services
from onboarding import preflight, services
from onboarding.api.serializers import (
    BATCH_EXAMPLE,
    START_EXAMPLE,
    BatchCancelSerializer,
    BatchDetailSerializer,
    BatchSerializer,
    BatchStartSerializer,
    BatchVerbSerializer,
    Detail,
    OnboardingSerializer,
    OnboardingStartSerializer,
    PreflightReportSerializer,
    VerbAnswer,
)
from onboarding.models import Onboarding, OnboardingBatch
from onboarding.selectors import batches
from onboarding.workflow import KIND
from workflows import api as workflows


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


def batch_summary(batch: OnboardingBatch) -> dict[str, Any]:
    """A batch's counts per state, open and queued counts, its failed hosts, and its canary
    and failure budget."""
    return dict(BatchDetailSerializer(batches().get(pk=batch.pk)).data)


@extend_schema_view(
    list=extend_schema(
        operation_id="onboardings_list",
        summary="List onboardings",
        description=(
            "Onboarding workflows, newest first, with state, stage and attempt. Filter by "
            "site, state, stage, failure class, batch or a hostname substring."
        ),
    )
)
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
        summary="Onboard a machine",
        description=(
            "Start onboarding one machine (hostname and IPMI address) on a site with a "
            "profile and a SKU: 202 with the workflow, which runs discovery, commissioning, "
            "deploy, enrollment and completion. With `dry_run=true`: the preflight report "
            "(every guardrail, what MAAS shows for the host, the stages and MAAS calls), "
            "nothing written. `Idempotency-Key` makes a retried request safe."
        ),
        request=OnboardingStartSerializer,
        responses={
            202: OnboardingSerializer,
            200: OpenApiResponse(
                PreflightReportSerializer,
            ),
        },
        parameters=[IDEMPOTENCY_KEY],
        examples=[START_EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        if dryrun.active():
            body = OnboardingStartSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            return Response(preflight.onboarding_preflight(**body.validated_data))

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
        summary="Onboard a batch of machines",
        description=(
            "Start onboarding many machines of one site, profile and SKU: every row is "
            "checked first (each bad row named), then all start together, admitted as the "
            "site's concurrency allows, with an optional canary and failure budget."
        ),
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
            batch = batch_services.onboarding_start_batch(actor=request.user, **body.validated_data)
            return Response(batch_summary(batch), status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

    @workflows.verb_schema("onboarding", VerbAnswer)
    def verb(self, request: Request, pk: str, verb: str) -> Response:
        return workflows.verb(request, KIND, pk, verb, OnboardingSerializer)

    @extend_schema(
        operation_id="onboarding_batches_read",
        summary="Read an onboarding batch",
        description=(
            "One batch: counts per state, whether it finished, the failed hosts with reasons, "
            "its canary and failure budget."
        ),
        responses={200: BatchDetailSerializer},
    )
    def batch_detail(self, request: Request, pk: str) -> Response:
        return Response(batch_summary(get_object_or_404(OnboardingBatch, pk=pk)))

    @extend_schema(
        operation_id="onboarding_batches_list",
        summary="List onboarding batches",
        description=(
            "Batches with their counts per state, open and queued counts, whether they "
            "finished, and their admission state."
        ),
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
        summary="Resume a paused batch",
        description=(
            "Lift a batch's pause (canary failed, failure budget reached): its pending "
            "onboardings are admitted again and the budget counts from here."
        ),
        request=BatchVerbSerializer,
        responses={200: BatchDetailSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    def batch_resume(self, request: Request, pk: str) -> Response:
        def run() -> Response:
            body = BatchVerbSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            batch = batch_services.batch_resume(
                actor=request.user, batch_id=int(pk), **body.validated_data
            )
            return Response(batch_summary(batch))

        return idempotent(request, run)

    @extend_schema(
        operation_id="onboarding_batches_cancel",
        summary="Cancel a batch",
        description=(
            "Stop admitting the batch and cancel each of its open onboardings (through their "
            "cancel stage); those waiting for an operator are listed, not touched. A finished "
            "batch is a 409."
        ),
        request=BatchVerbSerializer,
        responses={202: BatchCancelSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    def batch_cancel(self, request: Request, pk: str) -> Response:
        def run() -> Response:
            body = BatchVerbSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            done = batch_services.batch_cancel(
                actor=request.user, batch_id=int(pk), **body.validated_data
            )
            return Response(
                {
                    **batch_summary(done["batch"]),
                    "cancelled": done["cancelled"],
                    "left_for_operator": done["left_for_operator"],
                },
                status=status.HTTP_202_ACCEPTED,
            )

        return idempotent(request, run)

"""The decommission API (docs/api.md, "Decommissions"): start by node (reimage, full, storage
cleanup), list and filter, detail, timeline, the recovery verbs.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from decommission import services
from decommission.api.serializers import (
    START_EXAMPLES,
    DecommissionSerializer,
    DecommissionStartSerializer,
    Detail,
    StorageCleanupSerializer,
    VerbAnswer,
)
from decommission.models import Decommission, Mode
from decommission.workflow import KIND
from maas_domain.api.filters import IdFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.schema import IDEMPOTENCY_KEY, path_id
from onboarding.workflow import KIND as ONBOARDING
from workflows import api as workflows
from workflows import family


class DecommissionFilter(workflows.WorkflowFilter):
    node = IdFilter(field_name="node_id")
    mode = django_filters.MultipleChoiceFilter(distinct=False, choices=Mode.choices)

    class Meta:
        model = Decommission
        fields = ["site", "node", "mode", "state", "stage", "hostname"]


@extend_schema_view(
    list=extend_schema(
        operation_id="decommissions_list",
        summary="List decommissions",
        description=(
            "Decommission workflows (reimage, full, storage cleanup), newest first. Filter by "
            "site, state, stage, mode or a hostname substring."
        ),
    )
)
@extend_schema(tags=["decommissions"])
class DecommissionViewSet(
    workflows.WorkflowActions, mixins.ListModelMixin, viewsets.GenericViewSet[Decommission]
):
    """Every decommission start (reimage included: it erases the disks) is ``admin``, the
    default for a POST; verbs take their own class (maas_domain/access.py)."""

    serializer_class = DecommissionSerializer
    filterset_class = DecommissionFilter
    queryset = Decommission.objects.order_by("-id")

    def get_queryset(self) -> QuerySet[Decommission]:
        return family.with_latest_child(super().get_queryset(), ONBOARDING)

    dry_run_plans = frozenset({"verb"})  # a verb's plan; starts are rehearsed

    @workflows.detail_schema("decommission", Detail)
    def retrieve(self, request: Request, pk: str) -> Response:
        wf = get_object_or_404(Decommission.objects.select_related("site"), pk=pk)
        return workflows.detail(wf, DecommissionSerializer, request)

    @workflows.timeline_schema("decommission")
    def timeline(self, request: Request, pk: str) -> Response:
        return workflows.timeline_page(get_object_or_404(Decommission, pk=pk), request)

    @workflows.verb_schema("decommission", VerbAnswer)
    def verb(self, request: Request, pk: str, verb: str) -> Response:
        return workflows.verb(request, KIND, pk, verb, DecommissionSerializer)

    @extend_schema(
        operation_id="nodes_decommission",
        summary="Decommission a node",
        description=(
            "Take a node out of service: `reimage` (erase and redeploy through the onboarding "
            "stages) or `full` (erase and delete from MAAS; needs `confirm: true`). Refused "
            "(409) while allocations are active unless `force_release` (audited). With "
            "`dry_run=true`: what it would change, nothing changed."
        ),
        tags=["nodes"],
        request=DecommissionStartSerializer,
        responses={202: DecommissionSerializer},
        parameters=[path_id("node_pk", "The node."), IDEMPOTENCY_KEY],
        examples=START_EXAMPLES,
    )
    def start(self, request: Request, node_pk: str) -> Response:
        return self._start(request, node_pk, DecommissionStartSerializer)

    @extend_schema(
        operation_id="nodes_storage_cleanup",
        summary="Clean a node's storage",
        description=(
            "Erase the node's disks and return the machine to Ready in MAAS, keeping it (the "
            "`storage_cleanup` decommission mode)."
        ),
        tags=["nodes"],
        request=StorageCleanupSerializer,
        responses={202: DecommissionSerializer},
        parameters=[path_id("node_pk", "The node."), IDEMPOTENCY_KEY],
    )
    def storage_cleanup(self, request: Request, node_pk: str) -> Response:
        return self._start(request, node_pk, StorageCleanupSerializer, mode=Mode.STORAGE_CLEANUP)

    def _start(
        self,
        request: Request,
        node_pk: str,
        serializer: type[serializers.Serializer[Any]],
        **fixed: Any,
    ) -> Response:
        def run() -> Response:
            body = serializer(data=request.data)
            body.is_valid(raise_exception=True)
            wf = services.decommission_start(
                actor=request.user, node_id=int(node_pk), **body.validated_data, **fixed
            )
            return Response(DecommissionSerializer(wf).data, status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

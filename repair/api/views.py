"""The repair API (docs/api.md, "Repairs"): start by node, list and filter, detail, timeline,
the recovery verbs, and the requalify operation."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain.access import Action
from maas_domain.api.filters import IdFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.schema import IDEMPOTENCY_KEY, path_id
from workflows import api as workflows

from .. import services
from ..models import Repair
from ..workflow import KIND
from .serializers import (
    Detail,
    RepairSerializer,
    RepairStartSerializer,
    RequalifySerializer,
    VerbAnswer,
)


class RepairFilter(workflows.WorkflowFilter):
    node = IdFilter(field_name="node_id")

    class Meta:
        model = Repair
        fields = ["site", "node", "state", "stage", "hostname"]


@extend_schema_view(
    list=extend_schema(
        operation_id="repairs_list",
        summary="List repairs",
        description="Repairs, newest first. Filter by site, node, state, stage or a hostname.",
    )
)
@extend_schema(tags=["repairs"])
class RepairViewSet(
    workflows.WorkflowActions, mixins.ListModelMixin, viewsets.GenericViewSet[Repair]
):
    """A repair start marks a machine Broken in MAAS: ``admin``; reporting it done continues
    the work: ``operate``; verbs take their own class (maas_domain/access.py)."""

    serializer_class = RepairSerializer
    filterset_class = RepairFilter
    queryset = Repair.objects.order_by("-id")
    dry_run_plans = frozenset({"verb"})
    action_classes = {"requalify": Action.OPERATE}

    @workflows.detail_schema("repair", Detail)
    def retrieve(self, request: Request, pk: str) -> Response:
        wf = get_object_or_404(Repair.objects.select_related("site"), pk=pk)
        return workflows.detail(wf, RepairSerializer, request)

    @workflows.timeline_schema("repair")
    def timeline(self, request: Request, pk: str) -> Response:
        return workflows.timeline_page(get_object_or_404(Repair, pk=pk), request)

    @workflows.verb_schema("repair", VerbAnswer)
    def verb(self, request: Request, pk: str, verb: str) -> Response:
        return workflows.verb(request, KIND, pk, verb, RepairSerializer)

    @extend_schema(
        operation_id="nodes_repair",
        summary="Hand a node to repair",
        description=(
            "Take a quarantined node, or an active cordoned one, out of service for a vendor's "
            "repair: its RMA packet is frozen (the failing parts with serials, slots, PCI "
            "addresses and firmware, the evidence, MAAS's events), its machine marked Broken "
            "in MAAS with the reason, the node `in_repair`. 409 naming the state if the node "
            "is anything else, has an open workflow or an active allocation. A machine MAAS "
            "shows allocated or deployed fails preflight: erase it first (storage cleanup)."
        ),
        tags=["nodes"],
        request=RepairStartSerializer,
        responses={202: RepairSerializer},
        parameters=[path_id("node_pk", "The node."), IDEMPOTENCY_KEY],
    )
    def start(self, request: Request, node_pk: str) -> Response:
        def run() -> Response:
            body = RepairStartSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            wf = services.repair_start(
                actor=request.user, node_id=int(node_pk), **body.validated_data
            )
            return Response(RepairSerializer(wf).data, status=status.HTTP_202_ACCEPTED)

        return idempotent(request, run)

    @extend_schema(
        operation_id="repairs_requalify",
        summary="Report a repair done and requalify the node",
        description=(
            "The repair is done: the machine is marked fixed in MAAS, commissioned again "
            "(fresh inventory), judged against its SKU, tested per the profile's acceptance "
            "policy and, per policy `requalify_redeploys`, deployed through the onboarding "
            "stages; only then is the node back in service, its cordons lifted. 409 unless "
            "the repair waits in_repair."
        ),
        request=RequalifySerializer,
        responses={202: RepairSerializer},
        parameters=[path_id("id", "The repair.")],
    )
    def requalify(self, request: Request, pk: str) -> Response:
        get_object_or_404(Repair, pk=pk)  # 404 before 400
        body = RequalifySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        wf = services.repair_requalify(actor=request.user, repair_id=int(pk), **body.validated_data)
        return Response(RepairSerializer(wf).data, status=status.HTTP_202_ACCEPTED)

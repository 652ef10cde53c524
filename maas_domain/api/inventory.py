"""Admin API views of the inventory: SKUs, nodes (with their timelines and quarantine evidence)
and allocations. Thin as every view: parse and check the request, call one service or
selector, render the answer."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain import selectors as node_reads
from maas_domain.access import Action
from maas_domain.api.filters import AllocationFilter, NodeFilter, SkuFilter
from maas_domain.api.pagination import Pagination
from maas_domain.api.params import flag
from maas_domain.api.reports import EvidenceSerializer, EvidenceSummarySerializer
from maas_domain.api.schema import IF_MATCH, path_id
from maas_domain.api.serializers import (
    AllocationCreateSerializer,
    AllocationSerializer,
    CordonRequestSerializer,
    NodeDetailSerializer,
    NodeSerializer,
    NodeTimelineSerializer,
    ReleaseSerializer,
    SkuSerializer,
    TimelineEntrySerializer,
)
from maas_domain.api.views import RevisionedMixin
from maas_domain.models import Allocation, Cordon, Node, QuarantineEvidence, Sku
from maas_domain.services import allocations as allocation_services
from maas_domain.services import cordons as cordon_services
from maas_domain.services import skus as sku_services


@extend_schema_view(
    list=extend_schema(
        operation_id="skus_list",
        summary="List SKUs",
        description=("The hardware classes nodes are bound to, with how many nodes each has."),
    ),
    retrieve=extend_schema(
        operation_id="skus_read",
        summary="Read a SKU",
        description=("One SKU with its node count. The `ETag` is its revision."),
    ),
    create=extend_schema(
        operation_id="skus_create",
        summary="Create a SKU",
        description=(
            "A hardware class (code, name, GPU model and count) that onboardings bind their "
            "nodes to."
        ),
    ),
    partial_update=extend_schema(
        operation_id="skus_update",
        summary="Change a SKU",
        description=(
            "Change a SKU's name, GPU model or count, or deactivate it. `If-Match` makes the "
            "change conditional on the revision you read."
        ),
        parameters=[IF_MATCH],
    ),
    destroy=extend_schema(
        operation_id="skus_delete",
        summary="Delete or disable a SKU",
        description=(
            "Delete a SKU no node uses (204); a SKU in use is deactivated instead and "
            "returned (200, `active: false`)."
        ),
        parameters=[IF_MATCH],
        responses={
            204: OpenApiResponse(description="Deleted: nothing referred to it."),
            200: OpenApiResponse(SkuSerializer, description="Referenced: disabled instead."),
        },
    ),
)
@extend_schema(tags=["skus"])
class SkuViewSet(RevisionedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[Sku]):
    """``/skus``: create, list, read, patch; DELETE removes an unreferenced SKU (204) and
    disables a referenced one (200, ``active: false``)."""

    serializer_class = SkuSerializer
    filterset_class = SkuFilter
    create_with = staticmethod(sku_services.sku_create)
    update_with = staticmethod(sku_services.sku_update)
    remove_with = staticmethod(sku_services.sku_delete)  # disables a SKU in use instead
    row_id = "sku_id"

    def get_queryset(self) -> QuerySet[Sku]:
        return Sku.objects.annotate(node_count=Count("nodes")).order_by("code")


@extend_schema_view(
    list=extend_schema(
        operation_id="nodes_list",
        summary="List nodes",
        description=(
            "The machines we coordinate, with site, SKU, lifecycle state and MAAS machine. "
            "Filter by site, state, SKU or a hostname substring."
        ),
    ),
    retrieve=extend_schema(
        operation_id="nodes_read",
        summary="Read a node",
        description=(
            "One node with its open and recent workflows of every kind, its active "
            "allocations and what MAAS last showed for it."
        ),
        responses={200: NodeDetailSerializer},
    ),
)
@extend_schema(tags=["nodes"])
class NodeViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[Node]):
    """``/nodes``: list (filters), one node with its workflows and allocations, its timeline."""

    serializer_class = NodeSerializer
    filterset_class = NodeFilter
    # taking a node out of scheduling protects; returning it to tenants is an admin's call
    action_classes = {"cordon": Action.OPERATE}
    queryset = (
        Node.objects.select_related("site", "sku")
        .prefetch_related(
            Prefetch(
                "cordons",
                queryset=Cordon.objects.filter(lifted_at__isnull=True).order_by("id"),
                to_attr="active_cordons",
            )
        )
        .order_by("hostname", "id")
    )

    def retrieve(self, request: Request, pk: str) -> Response:
        node = self.get_object()
        open_now, recent = node_reads.node_workflows(node)
        node.open_workflows = open_now  # type: ignore[attr-defined]
        node.recent_workflows = recent  # type: ignore[attr-defined]
        node.active_allocations = node_reads.active_allocations(node)  # type: ignore[attr-defined]
        node.maas_observation = node_reads.last_observation(node)  # type: ignore[attr-defined]
        return Response(NodeDetailSerializer(node).data)

    @extend_schema(
        operation_id="nodes_cordon",
        summary="Cordon a node",
        description=(
            "Take a node out of scheduling with a reason (audited): new allocations on it are "
            "refused (409 naming every cordon); a tenant's allocation is not touched, and a "
            "`node.cordoned` event asks the allocation domain to drain it. 409 if the node is "
            "registered or retired, or already cordoned by an operator."
        ),
        request=CordonRequestSerializer,
        responses={200: NodeSerializer},
    )
    def cordon(self, request: Request, pk: str) -> Response:
        target = self.get_object()  # 404 before 400
        body = CordonRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node = cordon_services.operator_cordon(
            actor=request.user, node_id=target.pk, **body.validated_data
        )
        return Response(NodeSerializer(self.get_queryset().get(pk=node.pk)).data)

    @extend_schema(
        operation_id="nodes_uncordon",
        summary="Uncordon a node",
        description=(
            "Return a node to scheduling, every cordon lifted, with a reason (audited; a "
            "`node.uncordoned` event). A requalification does the same by itself. 409 if the "
            "node is not cordoned, or is in repair (it returns by requalification)."
        ),
        request=CordonRequestSerializer,
        responses={200: NodeSerializer},
    )
    def uncordon(self, request: Request, pk: str) -> Response:
        target = self.get_object()  # 404 before 400
        body = CordonRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node = cordon_services.operator_uncordon(
            actor=request.user, node_id=target.pk, **body.validated_data
        )
        return Response(NodeSerializer(self.get_queryset().get(pk=node.pk)).data)

    @extend_schema(
        operation_id="nodes_timeline",
        summary="Read a node's timeline",
        description=(
            "Every timeline entry of every workflow of the node (onboardings, decommissions, "
            "a reimage's redeploy) and the operator actions on it and its allocations, merged "
            'and oldest first (docs/api.md, "Timelines"). `maas_events=true` merges the '
            "machine's latest MAAS events in; a MAAS that does not answer is reported in "
            "`maas_events`, never as an error."
        ),
        responses={200: NodeTimelineSerializer},
        parameters=[
            OpenApiParameter("maas_events", bool, description="Merge the machine's MAAS events."),
            OpenApiParameter("limit", int, description="Page size (default 50, at most 500)."),
            OpenApiParameter("offset", int, description="Entries to skip."),
        ],
    )
    def timeline(self, request: Request, pk: str) -> Response:
        """Oldest first; ``?maas_events=true`` merges the machine's MAAS events in."""
        node = self.get_object()
        with_maas = flag(request, "maas_events")
        rows = node_reads.timeline(node)
        paginator = Pagination()
        limit = paginator.get_limit(request) or paginator.default_limit
        offset = paginator.get_offset(request)
        status_: dict[str, Any] = {"requested": False, "available": False, "detail": ""}
        if with_maas:
            # the same (latest) MAAS events for every page, so pages of the merge line up
            maas_rows, status_ = node_reads.maas_events(node, limit=node_reads.MAAS_EVENTS_MERGED)
            db_rows = [node_reads.as_entry(r) for r in rows[: offset + limit]]
            page = node_reads.merged(db_rows, maas_rows)[offset : offset + limit]
            paginator.count = rows.count() + len(maas_rows)
        else:
            paginator.count = rows.count()
            page = [node_reads.as_entry(r) for r in rows[offset : offset + limit]]
        paginator.limit, paginator.offset, paginator.request = limit, offset, request
        return Response(
            {
                "count": paginator.count,
                "next": paginator.get_next_link(),
                "previous": paginator.get_previous_link(),
                "results": TimelineEntrySerializer(page, many=True).data,
                "maas_events": status_,
            }
        )


@extend_schema_view(
    list=extend_schema(
        operation_id="allocations_list",
        summary="List allocations",
        description=("Tenant workloads holding nodes, active and released."),
    ),
    retrieve=extend_schema(
        operation_id="allocations_read",
        summary="Read an allocation",
        description=("One allocation: who holds the node, since when, and its release."),
    ),
    create=extend_schema(
        operation_id="allocations_create",
        summary="Record an allocation",
        description=(
            "A tenant workload now holds a node; a decommission waits for it to be released "
            "(or force-releases it, audited)."
        ),
        request=AllocationCreateSerializer,
        responses={201: AllocationSerializer},
    ),
)
@extend_schema(tags=["allocations"])
class AllocationViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Allocation]
):
    """``/allocations``: a tenant workload holding a node; release when drained."""

    serializer_class = AllocationSerializer
    filterset_class = AllocationFilter
    queryset = Allocation.objects.select_related("node").order_by("-id")

    def create(self, request: Request) -> Response:
        body = AllocationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        allocation = allocation_services.allocation_create(
            actor=request.user, **body.validated_data
        )
        return Response(
            AllocationSerializer(self.get_queryset().get(pk=allocation.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        operation_id="allocations_release",
        summary="Release an allocation",
        description=("The workload left the node; the reason is audited."),
        request=ReleaseSerializer,
        responses={200: AllocationSerializer},
    )
    def release(self, request: Request, pk: str) -> Response:
        allocation = self.get_object()
        body = ReleaseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        allocation = allocation_services.allocation_release(
            actor=request.user, allocation_id=allocation.pk, **body.validated_data
        )
        return Response(AllocationSerializer(self.get_queryset().get(pk=allocation.pk)).data)


@extend_schema(tags=["nodes"], parameters=[path_id("node_pk", "The node.")])
class EvidenceViewSet(viewsets.GenericViewSet[QuarantineEvidence]):
    """``/nodes/{id}/evidence``: what put the node in quarantine, frozen (read only)."""

    def get_queryset(self) -> QuerySet[QuarantineEvidence]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return QuarantineEvidence.objects.none()
        node = get_object_or_404(Node, pk=self.kwargs["node_pk"])
        return QuarantineEvidence.objects.filter(node=node).order_by("-id")

    @extend_schema(
        operation_id="nodes_evidence_list",
        summary="List a node's quarantine evidence",
        description=(
            "Every piece of evidence that put the node in quarantine, newest first: a hardware "
            "conformance failure, failed acceptance tests, disks not erased. Each is frozen "
            "when the node was quarantined and never changes."
        ),
        responses={200: EvidenceSummarySerializer(many=True)},
    )
    def list(self, request: Request, node_pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(EvidenceSummarySerializer(page, many=True).data)

    @extend_schema(
        operation_id="nodes_evidence_read",
        summary="Read one piece of quarantine evidence",
        description=(
            "The report the workflow stored (what was expected, what MAAS showed), MAAS's "
            "events for the machine and the workflow's timeline up to the quarantine: what a "
            "repair (RMA) ticket needs."
        ),
        parameters=[path_id("id", "The evidence.")],
        responses={200: EvidenceSerializer},
    )
    def retrieve(self, request: Request, node_pk: str, pk: str) -> Response:
        evidence = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(EvidenceSerializer(evidence).data)

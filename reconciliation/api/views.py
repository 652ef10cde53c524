"""The reconciliation API (docs/reconciliation.md): status, the drift ledger, run now, drift
resolution.
"""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain import dryrun
from maas_domain.access import Action
from maas_domain.api.filters import IdFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.schema import IDEMPOTENCY_KEY, path_id
from maas_domain.errors import InvalidInput
from maas_domain.models import MaasSite
from maas_domain.models.sites import SiteStatus
from reconciliation import selectors, services
from reconciliation import sweep as leaks
from reconciliation.api.serializers import (
    DriftSerializer,
    ResolvedSerializer,
    ResolveSerializer,
    RunSerializer,
    RunsSerializer,
    StatusSerializer,
    SweepSerializer,
    SweptSerializer,
)
from reconciliation.models import DriftKind, DriftRecord, DriftState, Severity


class DriftFilter(django_filters.FilterSet):
    site = IdFilter(field_name="site_id")
    node = IdFilter(field_name="node_id")
    kind = django_filters.MultipleChoiceFilter(distinct=False, choices=DriftKind.choices)
    severity = django_filters.MultipleChoiceFilter(distinct=False, choices=Severity.choices)
    state = django_filters.MultipleChoiceFilter(distinct=False, choices=DriftState.choices)

    class Meta:
        model = DriftRecord
        fields = ["site", "kind", "severity", "state", "node", "system_id"]


@extend_schema_view(
    list=extend_schema(
        operation_id="drift_list",
        summary="List drift",
        description=(
            "Differences between MAAS and our records, most recently seen first. Filter by "
            "site, node, kind, severity or state."
        ),
    )
)
@extend_schema(tags=["reconciliation"])
class ReconciliationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[DriftRecord]):
    """``/reconciliation/...``: status, drift (list), run, drift resolution."""

    serializer_class = DriftSerializer
    filterset_class = DriftFilter
    action_classes = {
        "run": Action.OPERATE,
        "resolve_node": Action.OPERATE,
        "resolve_machine": Action.OPERATE,
        "sweep": Action.ADMIN,  # releases (and may erase) machines in MAAS
    }
    dry_run_plans = frozenset({"sweep"})  # the sweep's plans, read from MAAS; nothing sent
    queryset = DriftRecord.objects.order_by("-last_seen_at", "-id")

    @extend_schema(
        operation_id="reconciliation_status",
        summary="Reconciliation status",
        description=(
            "Per site: the last reconcile run, when the next is due, and the open drift by "
            "kind and severity."
        ),
        responses={200: StatusSerializer},
    )
    def summary(self, request: Request) -> Response:
        return Response(selectors.reconciliation_status())

    @extend_schema(
        operation_id="reconciliation_run",
        summary="Reconcile a site now",
        description=(
            "Queue a reconcile run for a site (or every active site): MAAS is read and "
            "compared with our records; the drift ledger is updated. A run changes MAAS only "
            "where a policy (leak_auto_sweep) lets it sweep a leak that never reached a tenant."
        ),
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
        summary="Resolve a node's drift",
        description=(
            "`acknowledge` (for a while or for good), `adopt` (take MAAS's value into our "
            "record) or `mark-manual-intervention` the node's open drift, all or one kind or "
            "record; audited."
        ),
        request=ResolveSerializer,
        responses={200: ResolvedSerializer},
        parameters=[IDEMPOTENCY_KEY, path_id("node_id", "The node.")],
    )
    def resolve_node(self, request: Request, node_id: str) -> Response:
        return self.resolve(request, node_id=node_id)

    @extend_schema(
        operation_id="drift_resolve_machine",
        summary="Resolve a machine's drift",
        description=(
            "The same actions for drift on a MAAS machine we have no node for (an unknown "
            "machine, a leaked one); audited."
        ),
        request=ResolveSerializer,
        responses={200: ResolvedSerializer},
        parameters=[IDEMPOTENCY_KEY],
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

    @extend_schema(
        operation_id="leaks_sweep",
        summary="Sweep leaked machines",
        description=(
            "Give back machines MAAS shows held by our MAAS user in Failed deployment, Failed "
            "commissioning, Failed testing or Failed disk erasing with nothing of ours claiming "
            "them: one (`system_id`) or every one of the site. Failed deployment and Failed disk "
            "erasing are released, with the erase of the machine's policy when a tenant may "
            'have written to it (docs/reconciliation.md, "Leaks": the rule); Failed '
            "commissioning and Failed testing, which MAAS cannot release, are marked Broken. "
            "One machine in another state, held by someone else or claimed answers 409 naming "
            "it. Audited per machine. With `dry_run=true`: the plans, nothing sent."
        ),
        request=SweepSerializer,
        responses={200: SweptSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    def sweep(self, request: Request) -> Response:
        dry_run = dryrun.active()

        def go() -> Response:
            body = SweepSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            data = body.validated_data
            site = MaasSite.objects.filter(pk=data["site_id"]).first()
            if site is None:
                raise InvalidInput("Invalid input.", fields={"site_id": ["Site not found."]})
            return Response(
                leaks.sweep(
                    actor=request.user,
                    site=site,
                    system_id=data.get("system_id", ""),
                    reason=data.get("reason", ""),
                    dry_run=dry_run,
                )
            )

        return go() if dry_run else idempotent(request, go)

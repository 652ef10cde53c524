"""What every workflow API shares: the detail body (allowed verbs, latest timeline entries,
cached MAAS diagnostics), the paginated timeline and the recovery-verb endpoint, generic over a
workflow kind."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import django_filters
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, re_path
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain import dryrun, throttling
from maas_domain.access import Action
from maas_domain.api.filters import IdFilter, UtcIsoDateTimeFilter
from maas_domain.api.idempotency import idempotent
from maas_domain.api.pagination import Pagination
from maas_domain.api.schema import IDEMPOTENCY_KEY
from maas_domain.api.serializers import StrictMixin
from maas_domain.api.urls import id_group
from maas_domain.diagnostics import cached_diagnostics
from maas_domain.errors import InvalidInput
from maas_domain.work import WorkflowState
from workflows import verbs
from workflows.kinds import WorkflowKind
from workflows.models import Workflow

EVENT_FIELDS = ["id", "at", "kind", "stage", "attempt", "message", "data", "actor_name"]
VERB_NAMES = list(verbs.VERBS)


class VerbSerializer(StrictMixin, serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)
    confirm = serializers.BooleanField(required=False, default=False)
    force = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Reopen although a tenant holds the node (admin only, with a reason).",
    )


class TimelineEventSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    kind = serializers.CharField()
    stage = serializers.CharField()
    attempt = serializers.IntegerField()
    message = serializers.CharField()
    data = serializers.JSONField()  # type: ignore[assignment]
    actor_name = serializers.CharField()


class MaasEventSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    created = serializers.DateTimeField()
    level = serializers.CharField()
    type = serializers.CharField()
    description = serializers.CharField()


class ScriptResultSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    status = serializers.CharField()
    exit_status = serializers.IntegerField(allow_null=True)
    output = serializers.CharField()


class DiagnosticsSerializer(serializers.Serializer[Any]):
    """What MAAS says about the machine, through the control plane (never SSH). The MAAS fields
    are present when ``available``; ``detail`` says why not otherwise."""

    available = serializers.BooleanField()
    detail = serializers.CharField(required=False)
    fetched_at = serializers.DateTimeField(allow_null=True)
    age_seconds = serializers.FloatField(allow_null=True)
    system_id = serializers.CharField(required=False)
    status = serializers.CharField(required=False)
    status_message = serializers.CharField(required=False, allow_null=True)
    error_description = serializers.CharField(required=False, allow_null=True)
    power_state = serializers.CharField(required=False, allow_null=True)
    events = MaasEventSerializer(many=True, required=False)
    installation_output = serializers.CharField(required=False)
    commissioning_results = ScriptResultSerializer(many=True, required=False)


class DryRunSerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField()
    allowed = serializers.BooleanField()
    current_state = serializers.CharField()
    verb = serializers.ChoiceField(choices=VERB_NAMES)
    from_stage = serializers.CharField()
    attempt = serializers.IntegerField()
    maas_calls = serializers.ListField(child=serializers.CharField())
    preconditions = serializers.ListField(child=serializers.CharField())


def detail_serializers(base: Any) -> tuple[Any, Any]:
    """(the verb answer: the row and its allowed verbs, the detail: that plus the latest
    timeline entries and diagnostics), for a kind's row serializer (schema documentation)."""
    name = base.__name__.removesuffix("Serializer")
    allowed = serializers.ListField(child=serializers.ChoiceField(choices=VERB_NAMES))
    answer = type(f"{name}VerbAnswerSerializer", (base,), {
        "allowed_verbs": allowed,
        "Meta": type("Meta", (base.Meta,), {"fields": [*base.Meta.fields, "allowed_verbs"]}),
    })  # fmt: skip
    detail = type(f"{name}DetailSerializer", (answer,), {
        "timeline": TimelineEventSerializer(many=True, help_text="The latest 50 entries."),
        "timeline_count": serializers.IntegerField(),
        "diagnostics": DiagnosticsSerializer(required=False),
        "Meta": type("Meta", (base.Meta,), {"fields": [
            *base.Meta.fields, "allowed_verbs", "timeline", "timeline_count", "diagnostics"
        ]}),
    })  # fmt: skip
    return answer, detail


DIAGNOSTICS_PARAM = OpenApiParameter(
    "diagnostics",
    str,
    enum=["cached", "refresh", "false"],
    description="cached (default): the last answer if fetched in the last minute; refresh: ask "
    "MAAS now; false: leave out.",
)
VERB_PARAMS = [
    OpenApiParameter("verb", str, OpenApiParameter.PATH, enum=VERB_NAMES),
    IDEMPOTENCY_KEY,
]
VERB_EXAMPLES = [
    OpenApiExample("retry with a reason", {"reason": "BMC was rebooted"}, request_only=True),
    OpenApiExample("restart-clean", {"reason": "start over", "confirm": True}, request_only=True),
    OpenApiExample(
        "dry-run plan",
        {"dry_run": True, "allowed": True, "current_state": "failed", "verb": "retry",
         "from_stage": "deploy", "attempt": 2, "maas_calls": ["deploy: machine.deploy"],
         "preconditions": ["state is failed; retry is allowed from failed"]},
        response_only=True, status_codes=["200"],
    ),
]  # fmt: skip


F = TypeVar("F", bound=Callable[..., Any])


def verb_pattern() -> str:
    """The ``{verb}`` part of a kind's verb route, from the declarations."""
    return "(?P<verb>" + "|".join(re.escape(name) for name in verbs.VERBS) + ")"


def kind_routes(
    plural: str, viewset: Any, *, collection: dict[str, str] | None = None
) -> list[URLPattern]:
    """The routes every workflow kind has under /api/v1/admin/: the list (``collection``:
    its methods, e.g. a start by POST), one workflow, its verbs and its timeline."""
    one, pk = plural.removesuffix("s"), id_group()
    view = viewset.as_view
    return [
        re_path(rf"^{plural}/?$", view(collection or {"get": "list"}), name=f"{one}-list"),
        re_path(rf"^{plural}/{pk}/?$", view({"get": "retrieve"}), name=f"{one}-detail"),
        re_path(rf"^{plural}/{pk}/{verb_pattern()}/?$", view({"post": "verb"}), name=f"{one}-verb"),
        re_path(rf"^{plural}/{pk}/timeline/?$", view({"get": "timeline"}), name=f"{one}-timeline"),
    ]


class WorkflowActions:
    """For a workflow API view: ``verb`` takes its verb's class; ``action_classes`` the rest."""

    kwargs: dict[str, Any]

    def required_action(self, request: Request) -> Action | None:
        if getattr(self, "action", None) == "verb":
            return verbs.access(str(self.kwargs.get("verb", "")))
        return None


def verb_schema(kind: str, answer: type[serializers.Serializer[Any]]) -> Callable[[F], F]:
    return extend_schema(
        operation_id=f"{kind}s_verb",
        request=VerbSerializer,
        responses={202: answer, 200: DryRunSerializer},
        parameters=VERB_PARAMS,
        examples=VERB_EXAMPLES,
        summary=f"Apply a recovery verb to {_a(kind)}",
        description=(
            f"Retry, resume, rerun, restart-clean, cancel, adopt or mark-manual-intervention "
            f'this {kind} (docs/api.md, "Recovery verbs"): 202 with the workflow after the '
            "move, or 409 with the verbs allowed now. With `dry_run=true`: the plan (the stage "
            "it continues at, the MAAS calls it may make), nothing changed."
        ),
    )


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def detail_schema(kind: str, detail: type[serializers.Serializer[Any]]) -> Callable[[F], F]:
    return extend_schema(
        operation_id=f"{kind}s_read",
        responses={200: detail},
        parameters=[DIAGNOSTICS_PARAM],
        summary=f"Read {_a(kind)}",
        description=(
            f"One {kind} with the recovery verbs allowed now, its latest timeline entries "
            "(oldest first; every one at its `/timeline`) and MAAS diagnostics: cached by "
            "default with their age, fetched now with `diagnostics=refresh`, left out with "
            "`diagnostics=false`."
        ),
    )


def timeline_schema(kind: str) -> Callable[[F], F]:
    return extend_schema(
        operation_id=f"{kind}s_timeline",
        responses={200: TimelineEventSerializer(many=True)},
        filters=False,  # a page of one workflow's entries: the list's filters do not apply
        summary=f"Read {_a(kind)}'s timeline",
        description=(
            f"Every timeline entry of the {kind}, oldest first, a page at a time (docs/api.md, "
            '"Timelines").'
        ),
    )


class WorkflowSerializer(serializers.ModelSerializer[Any]):
    """Base of a kind's read serializer: ``queued`` is a workflow waiting for a site slot."""

    queued = serializers.SerializerMethodField()

    def get_queued(self, wf: Workflow) -> bool:
        return bool(wf.state == WorkflowState.PENDING)


class WorkflowFilter(django_filters.FilterSet):
    """The list filters every workflow kind has; a kind adds its own and sets ``Meta.model``."""

    site = IdFilter(field_name="site_id")
    # distinct=False here and on every choice filter: they filter the row's own column, and the
    # DISTINCT django-filter adds by default made every filtered count sort the whole match.
    state = django_filters.MultipleChoiceFilter(distinct=False, choices=WorkflowState.choices)
    created_after = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    search = django_filters.CharFilter(field_name="hostname", lookup_expr="icontains")


RECENT_EVENTS = 50
DIAGNOSTICS = ("cached", "refresh", "true", "false")


def timeline(wf: Workflow, *, limit: int = RECENT_EVENTS) -> list[dict[str, Any]]:
    """The workflow's latest ``limit`` timeline entries, oldest first."""
    rows = list(wf.events.order_by("-at", "-id").values(*EVENT_FIELDS)[:limit])
    return [{**row, "at": row["at"].isoformat()} for row in reversed(rows)]


def timeline_page(wf: Workflow, request: Request) -> Response:
    """GET /{kind}s/{id}/timeline: every entry, oldest first, a page at a time."""
    paginator = Pagination()
    page: list[Any] | None = paginator.paginate_queryset(wf.events.order_by("at", "id"), request)
    rows = [{f: getattr(e, f) for f in EVENT_FIELDS} for e in page or []]
    return paginator.get_paginated_response(TimelineEventSerializer(rows, many=True).data)


def detail(
    wf: Workflow, serializer: type[serializers.Serializer[Any]], request: Request
) -> Response:
    """GET /{kind}s/{id}: the row, allowed verbs, the latest timeline entries (all of them at
    ``/timeline``) and MAAS diagnostics: cached (default, with their age), fetched now
    (``?diagnostics=refresh``) or left out (``?diagnostics=false``). Reading a workflow never
    waits on MAAS unless asked to."""
    mode = request.query_params.get("diagnostics", "cached").lower()
    if mode not in DIAGNOSTICS:
        raise InvalidInput(
            "Invalid query parameter.", fields={"diagnostics": ["One of: cached, refresh, false."]}
        )
    data = dict(serializer(wf).data)
    data["allowed_verbs"] = verbs.allowed_verbs(wf)
    data["timeline"] = timeline(wf)
    data["timeline_count"] = wf.events.count()
    if mode != "false":
        data["diagnostics"] = cached_diagnostics(
            wf, refresh=mode in ("refresh", "true"), caller=throttling.caller(request)
        )
    return Response(data)


def verb(
    request: Request,
    kind: WorkflowKind[Any],
    pk: str,
    name: str,
    serializer: type[serializers.Serializer[Any]],
) -> Response:
    """POST /{kind}s/{id}/{verb}[?dry_run=true] with optional {reason, confirm}."""
    get_object_or_404(kind.model, pk=pk)
    dry_run = dryrun.active()

    def run() -> Response:
        body = VerbSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = verbs.apply(
            kind,
            int(pk),
            name,
            actor=request.user,
            dry_run=dry_run,
            **body.validated_data,
        )
        if result["dry_run"]:
            return Response(result)
        wf = result["workflow"]
        data = dict(serializer(wf).data)
        data["allowed_verbs"] = verbs.allowed_verbs(wf)
        return Response(data, status=status.HTTP_202_ACCEPTED)

    return run() if dry_run else idempotent(request, run)

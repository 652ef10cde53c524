"""The node-facing endpoints under /api/v1/node/ (docs/api.md, "Node-facing endpoints"): no
admin authentication; a node proves itself with its onboarding's tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import serializers
from rest_framework.decorators import (
    api_view,
    authentication_classes,
    permission_classes,
    throttle_classes,
)
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain import throttling
from maas_domain.api.serializers import StrictMixin
from maas_domain.errors import Forbidden
from onboarding import node as node_services
from onboarding.cloudconfig import agent_bootstrap


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


def node_route(methods: list[str]) -> Callable[[Callable[..., Any]], Any]:
    """A node-facing DRF view: no admin authentication (the node proves itself with its
    tokens) and the per-address limit (maas_domain/throttling.py)."""

    def wrap(view: Callable[..., Any]) -> Any:
        view = throttle_classes([throttling.NodeAddressThrottle])(view)
        view = permission_classes([AllowAny])(view)
        view = authentication_classes([])(view)
        return api_view(methods)(view)

    return wrap


def _checked(request: Request, onboarding_id: int, call: Any) -> Any:
    """Run a node service; a refusal (403) is counted for (onboarding, source address) and
    becomes a 429 once there are too many (throttling.refused)."""
    try:
        return call()
    except Forbidden:
        throttling.refused(request, onboarding_id)
        raise


@extend_schema(
    operation_id="node_enroll",
    tags=["node-facing"],
    request=EnrollSerializer,
    responses={200: EnrollAnswerSerializer},
    description="Called by a node agent during first boot with its one-time enrollment token.",
)
@node_route(["POST"])
def enroll(request: Request) -> Response:
    body = EnrollSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    wf = _checked(
        request,
        data["onboarding_id"],
        lambda: node_services.onboarding_enroll(
            onboarding_id=data["onboarding_id"],
            attempt=data["attempt"],
            token=data["enrollment_token"],
            hostname=data["hostname"],
            agent_version=data["agent_version"],
        ),
    )
    return Response({"enrolled": True, "onboarding_id": wf.pk, "node_id": wf.node_id})


NODE_REPORT_STATUSES = ["ok", "failed"]


class ReportSerializer(StrictMixin, serializers.Serializer[Any]):
    onboarding_id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    hostname = serializers.CharField(max_length=63, trim_whitespace=False)
    bootstrap_token = serializers.CharField(max_length=200, trim_whitespace=False)
    phase = serializers.ChoiceField(choices=sorted(node_services.NODE_PHASES))
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
@node_route(["POST"])
def report(request: Request) -> Response:
    """The node reports its site bundle's outcome or its agent's start (docs/api.md)."""
    body = ReportSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    wf = _checked(
        request,
        data["onboarding_id"],
        lambda: node_services.onboarding_node_report(
            onboarding_id=data["onboarding_id"],
            attempt=data["attempt"],
            token=data["bootstrap_token"],
            hostname=data["hostname"],
            phase=data["phase"],
            ok=data["status"] == "ok",
            detail=data.get("detail", ""),
            version=data.get("version", ""),
        ),
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
@node_route(["POST"])
def checkin(request: Request) -> Response:
    """A running node agent checks in; it may be handed its onboarding's newer tokens."""
    body = CheckinSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    answer = _checked(
        request,
        data["onboarding_id"],
        lambda: node_services.onboarding_checkin(
            onboarding_id=data["onboarding_id"],
            attempt=data["attempt"],
            token=data["bootstrap_token"],
            hostname=data["hostname"],
        ),
    )
    return Response(answer, headers={"Cache-Control": "no-store"})


@extend_schema(
    operation_id="node_health", tags=["node-facing"], responses={200: NodeHealthSerializer}
)
@node_route(["GET", "HEAD"])
def node_health(request: Request) -> Response:
    return Response({"ok": True})


@extend_schema(exclude=True)  # a shell script, not part of the JSON API
@node_route(["GET", "HEAD"])
def agent_script(request: Request, version: str) -> HttpResponse:
    if version != settings.NODE_AGENT_VERSION:
        return HttpResponse("unknown agent version\n", status=404, content_type="text/plain")
    # the bytes the payload pinned (cloudconfig.agent_bootstrap): node-agent.sh checks them
    return HttpResponse(agent_bootstrap(version), content_type="text/x-shellscript")

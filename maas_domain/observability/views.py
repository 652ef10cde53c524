"""``GET /api/v1/admin/metrics``: the Prometheus scrape endpoint. It needs the ``read`` action
class, as every read of the admin API does (a session or a bearer token of a user who holds it:
Prometheus sends a read-scoped token with ``authorization: {type: Bearer, credentials_file:
...}``; docs/observability.md, "Scraping the admin endpoint"). A scraper needs no more: it
changes nothing, and what it sees (counts by kind and state, lags, durations) the read role sees
through the API anyway."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import renderers, viewsets
from rest_framework.request import Request

from maas_domain.access import Action
from maas_domain.observability import exposition


class PrometheusTextRenderer(renderers.BaseRenderer):
    """Lets a scraper that accepts only text/plain be answered (errors still render as JSON)."""

    media_type = "text/plain"
    format = "prometheus"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        return renderers.JSONRenderer().render(data)


class MetricsViewSet(viewsets.ViewSet):
    renderer_classes = [renderers.JSONRenderer, PrometheusTextRenderer]
    action_classes = {"list": Action.READ}  # the module's docstring says why

    @extend_schema(
        operation_id="metrics",
        summary="Prometheus metrics",
        description=(
            "The Prometheus text exposition: workflow, outbox and drift gauges from the "
            "database plus this host's counters and histograms (docs/observability.md)."
        ),
        tags=["metrics"],
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    def list(self, request: Request) -> HttpResponse:
        return HttpResponse(
            exposition.render_web(), content_type=exposition.CONTENT_TYPE_PLAIN_0_0_4
        )


metrics_view = MetricsViewSet.as_view({"get": "list"})

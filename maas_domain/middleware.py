"""Per-request correlation id: from ``X-Correlation-ID`` when safe, else minted; echoed back."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from maas_domain import context

HEADER = "X-Correlation-ID"


class CorrelationIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        cid = context.clean_correlation_id(request.headers.get(HEADER))
        with context.bound(cid):
            response = self.get_response(request)
        response[HEADER] = cid
        return response

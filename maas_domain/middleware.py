"""Per-request correlation id: from ``X-Correlation-ID`` when safe, else minted; echoed back."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from maas_domain import context

HEADER = "X-Correlation-ID"


NODE_LISTENER = "maascp.listener"


class ListenerMiddleware:
    """A request that arrived on the node listener (``config/wsgi_node.py`` marks its WSGI
    environ) is routed by ``config.node_urls``: node routes and health checks, nothing else."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.META.get(NODE_LISTENER) == "node":
            request.urlconf = "config.node_urls"
        return self.get_response(request)


class CorrelationIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        cid = context.clean_correlation_id(request.headers.get(HEADER))
        # set by the token authentication, if any
        token = context.api_token_id.set(None)
        scope = context.api_token_scope.set(None)
        try:
            with context.bound(cid):
                response = self.get_response(request)
        finally:
            context.api_token_scope.reset(scope)
            context.api_token_id.reset(token)
        response[HEADER] = cid
        return response

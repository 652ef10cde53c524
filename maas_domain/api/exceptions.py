"""One error body shape for the whole API:

``{"error": "<code>", "detail": "<human sentence>", ...}`` where validation errors add
``fields`` (``{"field.path": ["reason", ...]}``) or ``rows`` (``[{index, field, reason}]``) and
conflicts add what the client needs to decide (e.g. ``open_workflows``, ``current_revision``).

What an error lists is bounded (``_bounded``; docs/api.md, "Errors"): at most ``LISTED_FIELDS``
fields and ``LISTED_ROWS`` rows, the rest counted in ``fields_omitted`` / ``rows_omitted``, names
and reasons cut to ``NAME_CHARS`` / ``REASON_CHARS``: a body of 150,000 unknown keys got a 12.9 MB
answer naming each.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from maas_domain.errors import (
    CredentialsUnconfirmed,
    DomainError,
    ServiceUnavailable,
    secrets_unavailable,
)
from maas_domain.secrets import SecretsError
from maas_domain.secrets.sites import CredentialNotConfirmed


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, path))
        return out
    if isinstance(detail, list):
        if all(not isinstance(v, dict | list) for v in detail):
            return {prefix or "non_field_errors": [str(v) for v in detail]}
        out = {}
        for i, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}[{i}]"))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


LISTED_FIELDS = 50
LISTED_ROWS = 1000
REASONS_PER_FIELD = 5
NAME_CHARS = 200
REASON_CHARS = 500


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value


def _bounded(body: dict[str, Any]) -> dict[str, Any]:
    fields = body.get("fields")
    if isinstance(fields, dict):
        body["fields"] = {
            _cut(str(name), NAME_CHARS): [
                _cut(str(reason), REASON_CHARS)
                for reason in (reasons if isinstance(reasons, list) else [reasons])[
                    :REASONS_PER_FIELD
                ]
            ]
            for name, reasons in islice(fields.items(), LISTED_FIELDS)
        }
        if len(fields) > LISTED_FIELDS:
            body["fields_omitted"] = len(fields) - LISTED_FIELDS
    rows = body.get("rows")
    if isinstance(rows, list):
        body["rows"] = [
            {k: _cut(v, NAME_CHARS if k == "field" else REASON_CHARS) for k, v in row.items()}
            if isinstance(row, dict)
            else row
            for row in rows[:LISTED_ROWS]
        ]
        if len(rows) > LISTED_ROWS:
            body["rows_omitted"] = len(rows) - LISTED_ROWS
    return body


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, CredentialNotConfirmed):  # an operator's decision, not an outage
        exc = CredentialsUnconfirmed(str(exc), site_needs="confirm_maas_url")
    elif isinstance(exc, SecretsError):
        # a view that needed a secret and met an outage the service did not translate
        exc = secrets_unavailable(exc, "the request was not completed")
    elif isinstance(exc, OperationalError | InterfaceError):
        # the database is down, restarting, failing over or did not answer in time (a lost
        # connection, a statement timeout, a locked SQLite file): an outage, not a bug of ours,
        # and the transaction the request was in did not commit
        exc = ServiceUnavailable(
            "The database is unavailable or did not answer in time; the request did not "
            "complete. Try again shortly: /health/ready says when it is back.",
            dependency="database",
        )
    if isinstance(exc, DomainError):
        body = _bounded({"error": exc.code, "detail": exc.message, **exc.extra})
        # every 503 says when to try again, as the schema declares (maas_domain/api/schema.py)
        headers = {"Retry-After": str(ServiceUnavailable.retry_after)} if exc.status == 503 else {}
        return Response(body, status=exc.status, headers=headers)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.ValidationError):
        return Response(
            _bounded(
                {
                    "error": "validation_error",
                    "detail": "Invalid input.",
                    "fields": _flatten(exc.detail),
                }
            ),
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        response.data = {"error": code, "detail": str(exc.detail)}
    return response


@csrf_exempt  # it changes nothing; without this an unsafe method would get CSRF's HTML 403
def json_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return JsonResponse({"error": "not_found", "detail": "Unknown API endpoint."}, status=404)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The site's 404 page: the JSON error body under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return json_not_found(request)
    return page_not_found(request, exception or Http404())


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A CSRF refusal: the JSON error body under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": "permission_denied", "detail": f"CSRF check failed: {reason}"}, status=403
        )
    return django_csrf_failure(request, reason)

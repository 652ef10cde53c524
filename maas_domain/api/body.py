"""JSON request bodies: the API's parser and the middleware that refuses a bad body on every
route, anonymous node routes included (docs/security.md), both with the limits of
``maas_domain/jsontext.py`` (which the admin pages' JSON form fields share).

A body larger than its route's limit (``body_limit``: ``BODY_LIMITS``, any content type, from
``Content-Length`` before a byte is read) or than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413; what
the parser refuses (``jsontext.parse_json``) a 400 ``parse_error``. Whether the parsed value has
the right *type* (an object, a list of rows) is each serializer's business.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from maas_domain.jsontext import BodyRefused, TextRefused, parse_json
from maas_domain.validators import text_error

__all__ = ["BodyGuardMiddleware", "BodyRefused", "StrictJSONParser", "is_json", "parse_json"]


KIB = 1024
# The largest body each route takes, the first pattern that matches the path (docs/api.md,
# "Limits"); ``None``: Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB). The node routes are
# anonymous and take a few hundred bytes; the bulk routes up to 5000 rows; everything else a
# site (a 256 KiB CA bundle, 1000 approved hosts) at most. Paths outside /api/ (the admin pages)
# have Django's limit only.
BODY_LIMITS: tuple[tuple[re.Pattern[str], int | None], ...] = (
    (re.compile(r"/api/v1/node/"), 64 * KIB),
    (re.compile(r"/api/v1/admin/onboardings/batch/?$"), None),
    (re.compile(r"/api/v1/admin/maas-sites/[^/]+/roce-assignments/?$"), None),
    (re.compile(r"/api/"), 1024 * KIB),
)


def body_limit(path: str) -> int:
    """The most bytes a body to ``path`` may have."""
    default = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) or 2560 * KIB
    for pattern, limit in BODY_LIMITS:
        if pattern.match(path):
            return min(limit or default, default)
    return default


def too_large(limit: int) -> JsonResponse:
    return JsonResponse(
        {
            "error": "too_large",
            "detail": f"The request body is larger than this route takes ({limit} bytes).",
            "limit": limit,
        },
        status=413,
    )


def text_refused(exc: TextRefused) -> dict[str, Any]:
    return {
        "error": "validation_error",
        "detail": "Invalid input.",
        "fields": {exc.field[:200]: [exc.reason]},
    }


def is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class StrictJSONParser(JSONParser):
    """DRF's JSON parser with the limits above."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            return parse_json(raw) if raw else {}
        except TextRefused as exc:
            raise ValidationError({exc.field: [exc.reason]}) from exc
        except BodyRefused as exc:
            raise ParseError(str(exc)) from exc


class BodyGuardMiddleware:
    """Refuse a body over its route's limit, a bad JSON body, and a form whose text breaks the
    text rule (``validators.text_error``), before routing, authentication or any view runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_limit(request.path_info)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0  # Django reads no body without a valid length
        if length > limit:
            return too_large(limit)
        if is_json(request.META.get("CONTENT_TYPE", "")):
            try:
                raw = request.body
            except RequestDataTooBig:
                return too_large(limit)
            if raw:
                try:
                    parse_json(raw)
                except TextRefused as exc:
                    return JsonResponse(text_refused(exc), status=400)
                except BodyRefused as exc:
                    return JsonResponse({"error": "parse_error", "detail": str(exc)}, status=400)
        elif (
            request.method == "POST"
            and is_form(request.META.get("CONTENT_TYPE", ""))
            and (refused := _form_text_refused(request))
        ):
            return refused
        return self.get_response(request)


def is_form(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media in ("application/x-www-form-urlencoded", "multipart/form-data")


def _form_text_refused(request: HttpRequest) -> HttpResponse | None:
    """The admin pages' forms: the same text rule as JSON bodies, every field (the reasons of
    verbs and decommissions included), a 400 naming the first field that breaks it."""
    try:
        fields = list(request.POST.lists())
    except RequestDataTooBig:
        return too_large(int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0))
    for name, values in fields:
        for text in (name, *values):
            if reason := text_error(text):
                shown = name if not text_error(name) else "(a field name)"
                return HttpResponse(
                    f"Not accepted: {shown[:200]}: {reason}\n",
                    status=400,
                    content_type="text/plain; charset=utf-8",
                )
    return None

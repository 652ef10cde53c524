"""JSON request bodies: the API's parser and the middleware that refuses a bad body on every
route, anonymous node routes included (docs/security.md), both with the limits of
``maas_domain/jsontext.py`` (which the admin pages' JSON form fields share).

A body larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413; what the parser refuses
(``jsontext.parse_json``) a 400 ``parse_error``. Whether the parsed value has the right *type* (an
object, a list of rows) is each serializer's business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from maas_domain.jsontext import BodyRefused, parse_json

__all__ = ["BodyGuardMiddleware", "BodyRefused", "StrictJSONParser", "is_json", "parse_json"]


def is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class StrictJSONParser(JSONParser):
    """DRF's JSON parser with the limits above."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            return parse_json(raw) if raw else {}
        except BodyRefused as exc:
            raise ParseError(str(exc)) from exc


class BodyGuardMiddleware:
    """Refuse a bad JSON body before routing, authentication or any view runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_json(request.META.get("CONTENT_TYPE", "")):
            try:
                raw = request.body
            except RequestDataTooBig:
                return JsonResponse(
                    {"error": "too_large", "detail": "The request body is too large."}, status=413
                )
            if raw:
                try:
                    parse_json(raw)
                except BodyRefused as exc:
                    return JsonResponse({"error": "parse_error", "detail": str(exc)}, status=400)
        return self.get_response(request)

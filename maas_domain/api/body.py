"""JSON request bodies: one parser with limits, used by the API's parser and by the middleware
that refuses a bad body on every route, anonymous node routes included (docs/security.md).

Refused with 400 ``parse_error``: invalid UTF-8, nesting deeper than ``MAX_DEPTH``, an integer
outside the 64-bit range, a non-finite number (``1e999``, ``NaN``, ``Infinity``), a NUL
character (PostgreSQL cannot store one), and anything that is not JSON. A body larger than
``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413. Whether the parsed value has the right *type* (an
object, a list of rows) is each serializer's business.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from maas_domain.validators import MAX_INT

MAX_DEPTH = 32


class BodyRefused(ValueError):
    pass


def _int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_INT:
        raise BodyRefused(f"Number {text[:20]}… is out of range.")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BodyRefused(f"Number {text[:20]} is out of range.")
    return value


def _constant(text: str) -> Any:
    raise BodyRefused(f"{text} is not a JSON number.")


def _check_shape(value: Any) -> None:
    """Nesting depth and NUL characters of a parsed value, walked without recursion (linear in
    its size; no pattern over the raw text, which an adversary could make backtrack)."""
    pending = [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise BodyRefused("NUL characters are not accepted.")
        elif isinstance(item, dict | list):
            if level + 1 > MAX_DEPTH:
                raise BodyRefused(f"The body nests deeper than {MAX_DEPTH} levels.")
            children = [*item, *item.values()] if isinstance(item, dict) else item
            pending += [(child, level + 1) for child in children]


def parse_json(raw: bytes) -> Any:
    """The value of a JSON body, or ``BodyRefused`` with the reason."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyRefused(f"The body is not UTF-8 (byte {exc.start}).") from exc
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except BodyRefused:
        raise
    except RecursionError as exc:  # far deeper than MAX_DEPTH: the decoder gave up
        raise BodyRefused(f"The body nests deeper than {MAX_DEPTH} levels.") from exc
    except ValueError as exc:
        raise BodyRefused(f"JSON parse error - {exc}") from exc
    _check_shape(value)
    return value


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

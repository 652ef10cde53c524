"""JSON text from clients: one parser with limits, used by the API's parser and body middleware
(``maas_domain/api/body.py``) and by the admin pages' JSON form fields (``JSONFormField``, which
every admin page of ours uses: ``maas_domain.access.ActionAdmin``) (docs/security.md, T5).

Refused (``BodyRefused``, a 400 ``parse_error`` or a form error): invalid UTF-8, nesting deeper
than ``MAX_DEPTH``, an integer outside the 64-bit range, a non-finite number (``1e999``,
``NaN``, ``Infinity``), a NUL character (PostgreSQL cannot store one), a lone surrogate escape
(``"\\ud800"``: valid JSON text but no Unicode text, which nothing downstream can encode: not
the database, not the answer that names the field), in a value or a field name at any depth,
and anything that is not JSON; and text no field may hold (control and bidirectional
formatting characters, ``validators.text_error``) in any string, a value or a field name:
``TextRefused``, a 400 ``validation_error`` naming the field.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput

from maas_domain.validators import MAX_INT, text_error

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


class TextRefused(BodyRefused):
    """A string of the body (a value, or a field name) holds characters no text may hold
    (``validators.text_error``): a 400 naming the field, like any invalid field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


Path = tuple[Any, str | int] | None  # (parent's path, key or index), built only as walked


def field_name(path: Path) -> str:
    """``hardware.gpu.model``, ``rows[3].hostname``: the paths validation errors use."""
    parts: list[str | int] = []
    while path is not None:
        path, key = path
        parts.append(key)
    name = ""
    for key in reversed(parts):
        name += f"[{key}]" if isinstance(key, int) else (f".{key}" if name else key)
    return name or "(body)"


def _check_text(text: str, path: Path, *, is_key: bool) -> None:
    if "\x00" in text:
        raise BodyRefused("NUL characters are not accepted.")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BodyRefused(
                f"A lone surrogate (\\u{ord(text[exc.start]):04x}) is not Unicode text."
            ) from None
    if reason := text_error(text):
        raise TextRefused(field_name(path), f"A field name here: {reason}" if is_key else reason)


def _check_shape(value: Any) -> None:
    """Nesting depth, NUL characters, lone surrogates and text no field may hold
    (``validators.text_error``: control and bidirectional formatting characters) of a parsed
    value, keys included, walked without recursion (linear in its size; no pattern over the raw
    text, which an adversary could make backtrack)."""
    pending: list[tuple[Any, int, Path]] = [(value, 0, None)]
    while pending:
        item, level, path = pending.pop()
        if isinstance(item, str):
            _check_text(item, path, is_key=False)
        elif isinstance(item, dict | list):
            if level + 1 > MAX_DEPTH:
                raise BodyRefused(f"The body nests deeper than {MAX_DEPTH} levels.")
            if isinstance(item, dict):
                for key in item:
                    _check_text(key, path, is_key=True)
                pending += [(child, level + 1, (path, key)) for key, child in item.items()]
            else:
                pending += [(child, level + 1, (path, i)) for i, child in enumerate(item)]


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


class JSONFormField(forms.JSONField):
    """The admin pages' JSON fields, held to the same limits: Django's own field accepted a lone
    surrogate escape and then failed (500) rendering the form or storing the value."""

    def to_python(self, value: Any) -> Any:
        if self.disabled or not isinstance(value, str) or value in self.empty_values:
            return super().to_python(value)
        try:
            converted = parse_json(value.encode("utf-8", "replace"))
        except BodyRefused as exc:
            raise ValidationError(str(exc), code="invalid", params={"value": value}) from None
        return forms.fields.JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled or data is None or not isinstance(data, str):
            return super().bound_data(data, initial)
        try:
            return parse_json(data.encode("utf-8", "replace"))
        except BodyRefused:
            return InvalidJSONInput(data)

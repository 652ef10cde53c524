"""The committed OpenAPI document (``docs/openapi.yaml``) as data, for the tests that read it.

YAML is parsed with libyaml's C loader when PyYAML has it: the same data as ``yaml.safe_load``
in a quarter of the time (the pure-Python parse of the document was ~0.6 s, and several test
modules parse it when pytest imports them). Each call parses afresh, so a caller may change what
it gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load``, in C where it can be."""
    return yaml.load(text, Loader=_SAFE)  # noqa: S506 - a safe loader (SafeLoader or its C twin)


def openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = load_yaml(DOCUMENT.read_text())
    return document

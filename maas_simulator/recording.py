"""What the control endpoint records of each mutation: its parameters as MAAS received them
(query string without ``op``, then the form), so tests can assert what reached MAAS.

Secrets stay out: power passwords and other secret-looking keys are replaced by
``(redacted)`` (also inside the ``power_parameters`` JSON blob python-libmaas and our client
send), and ``user_data`` (it carries enrollment tokens) is recorded as the digest and size of
the bytes the node would be served.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from maas_simulator import api_machines, wire

SECRET_KEY = re.compile(r"pass|secret|token|k_g", re.IGNORECASE)
REDACTED = "(redacted)"


def _redact(key: str, value: Any) -> Any:
    if key == "user_data":
        data = api_machines.served_user_data(str(value).encode())
        return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    if key == "power_parameters":
        try:
            blob = json.loads(value)
        except (TypeError, ValueError):
            return REDACTED
        if isinstance(blob, dict):
            return {k: REDACTED if SECRET_KEY.search(k) else v for k, v in blob.items()}
        return REDACTED
    return REDACTED if SECRET_KEY.search(key) else value


def mutation_params(query: dict[str, list[str]], content_type: str, body: bytes) -> dict[str, Any]:
    """The parameters of one non-GET request; a repeated key keeps all its values (a list)."""
    try:
        form = wire.parse_form(content_type, body)
    except (ValueError, UnicodeDecodeError):
        form = {}
    merged: dict[str, list[str]] = {}
    for source in ({k: v for k, v in query.items() if k != "op"}, form):
        for key, values in source.items():
            merged.setdefault(key, []).extend(values)
    return {
        key: _redact(key, values[0]) if len(values) == 1 else [_redact(key, v) for v in values]
        for key, values in merged.items()
    }

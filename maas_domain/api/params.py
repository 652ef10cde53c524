"""Query parameters every endpoint reads the same way."""

from __future__ import annotations

from rest_framework.request import Request

from maas_domain.errors import InvalidInput


def flag(request: Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter: true/false (1/0, yes/no); anything else is a 400."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise InvalidInput("Invalid query parameter.", fields={name: ["Must be true or false."]})

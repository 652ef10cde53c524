"""Open-workflow lookups shared by every app.

Workflow apps (onboarding, decommission) register their model here; site and profile services
ask "what is still open on this site?" without importing those apps (which depend on this one).
"""

from __future__ import annotations

from typing import Any, Protocol

from django.db import models


class WorkflowModel(Protocol):
    objects: models.Manager[Any]

    @classmethod
    def open_filter(cls) -> models.Q: ...


_REGISTRY: list[tuple[str, type[Any]]] = []


def register(kind: str, model: type[Any]) -> None:
    if (kind, model) not in _REGISTRY:
        _REGISTRY.append((kind, model))


def open_workflows(**filters: Any) -> list[dict[str, Any]]:
    """Every open workflow matching ``filters`` (e.g. site=…, profile=…), as small dicts."""
    found: list[dict[str, Any]] = []
    for kind, model in _REGISTRY:
        rows = model.objects.filter(model.open_filter(), **filters).values(
            "id", "hostname", "state"
        )[:50]
        found.extend({"kind": kind, **row} for row in rows)
    return found

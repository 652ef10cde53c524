"""Helpers shared by the services: locked, revision-checked updates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db import IntegrityError, models, transaction
from django.db.models import F

from maas_domain import audit
from maas_domain.errors import Conflict, NotFound, PreconditionFailed

M = TypeVar("M", bound=models.Model)


def lock(queryset: models.QuerySet[M], pk: Any, label: str) -> M:
    """Load one row FOR UPDATE (call inside a transaction) or raise NotFound."""
    row = queryset.select_for_update().filter(pk=pk).first()
    if row is None:
        raise NotFound(f"{label} {pk} not found.")
    return row


def check_revision(row: Any, expected: int | None) -> None:
    if expected is not None and row.revision != expected:
        raise PreconditionFailed(
            f"Revision {expected} is stale; the current revision is {row.revision}. "
            "Re-read and apply your change again.",
            current_revision=row.revision,
        )


def save_revisioned(row: Any, *, unique_message: str | None = None) -> None:
    """Save a changed row with revision + 1 (inside the caller's transaction)."""
    row.revision = F("revision") + 1
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError as exc:
        raise Conflict(unique_message or "Conflicts with an existing record.") from exc
    row.refresh_from_db()


def audited_update(
    *,
    actor: audit.Actor,
    queryset: models.QuerySet[M],
    pk: Any,
    label: str,
    action: str,
    expected_revision: int | None,
    apply: Callable[[M], None],
    unique_message: str | None = None,
    reason: str | Callable[[], str] = "",
) -> M:
    """Lock, check the revision, apply the change, save, audit: the common update path.
    ``reason`` may be a callable, read after ``apply`` (a reason the change itself decides)."""
    with transaction.atomic():
        row = lock(queryset, pk, label)
        check_revision(row, expected_revision)
        before = audit.snapshot(row)
        apply(row)
        save_revisioned(row, unique_message=unique_message)
        audit.record(
            actor=actor,
            action=action,
            target=row,
            before=before,
            after=audit.snapshot(row),
            reason=reason() if callable(reason) else reason,
        )
        return row

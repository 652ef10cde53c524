"""Writing audit rows. Every privileged mutation calls :func:`record` inside its transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models, transaction

from maas_domain import context, dryrun
from maas_domain.models import AuditLog
from maas_domain.redaction import REDACTED, is_secret_name

Actor = AbstractBaseUser | AnonymousUser | None


def _is_secret(key: Any, value: Any) -> bool:
    scalar = isinstance(value, str | int | float | bytes) and not isinstance(value, bool)
    return scalar and value != "" and is_secret_name(key)


def redact(value: Any) -> Any:
    """Replace the scalar value of every secret-looking key, at any depth.

    Objects under such keys are walked, not blanked: credential *metadata* (versions, who
    rotated) is keyed by names like ``maas_api_key`` and is meant to be audited.
    """
    if isinstance(value, dict):
        return {k: REDACTED if _is_secret(k, v) else redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def snapshot(instance: models.Model, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON-safe picture of a row's concrete fields (foreign keys as ids)."""
    data: dict[str, Any] = {}
    for f in instance._meta.concrete_fields:
        if f.name in exclude:
            continue
        data[f.attname] = _jsonable(getattr(instance, f.attname))
    return data


def actor_name(actor: Actor) -> str:
    if actor is None or not getattr(actor, "is_authenticated", False):
        return "system"
    return str(actor.get_username())


def record(
    *,
    actor: Actor,
    action: str,
    target: models.Model | tuple[str, Any],
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    reason: str = "",
) -> AuditLog:
    """Write one audit row in the caller's transaction (refuses to run outside one)."""
    return record_many(actor=actor, entries=[Entry(action, target, before, after, reason)])[0]


class Entry(NamedTuple):
    """One audit row to write: what was done to what, before and after, and why."""

    action: str
    target: models.Model | tuple[str, Any]
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str = ""


def record_many(*, actor: Actor, entries: Sequence[Entry]) -> list[AuditLog]:
    """Write audit rows by one actor in one statement, in the caller's transaction (a change
    that touches many rows at once: a reconcile run cordoning nodes)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.record must run inside the mutation's transaction")
    user: Any = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    rows = []
    for action, target, before, after, reason in entries:
        if isinstance(target, tuple):
            target_type, target_id = target
        else:
            target_type, target_id = target._meta.label_lower, target.pk
        rows.append(
            AuditLog(
                actor=user,
                actor_name=actor_name(actor),
                action=action,
                target_type=target_type,
                target_id=str(target_id),
                before=redact(_jsonable(before)) if before is not None else None,
                after=redact(_jsonable(after)) if after is not None else None,
                reason=reason[:500],
                correlation_id=context.current_correlation_id(),
                api_token_id=context.api_token_id.get(),
            )
        )
    AuditLog.objects.bulk_create(rows)
    if (rehearsal := dryrun.current()) is not None:
        rehearsal.changes.extend(
            {
                "action": row.action,
                "target_type": row.target_type,
                "target_id": row.target_id,
                "before": row.before,
                "after": row.after,
            }
            for row in rows
        )
    return rows

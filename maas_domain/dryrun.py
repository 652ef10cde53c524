"""A dry run: a request rehearsed in a transaction that is always rolled back (docs/api.md,
"Dry runs").

While a rehearsal is active in this context, the code that would change what a rollback cannot
undo refuses to run (``refuse``): MAAS mutations (``maas/factory.py``) and secrets-backend
writes. Celery messages are only ever sent from ``on_commit`` callbacks, which a rollback
discards. What the request would have written is collected here instead: the audit rows (every
mutation writes one, ``audit.record``) and the workflows it would start
(``workflow/scheduling.start_workflows``), so the answer can say what would happen.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


class DryRunViolation(RuntimeError):
    """Code tried to change something a rollback cannot undo during a dry run (a defect: the
    route must plan instead)."""


@dataclass
class Rehearsal:
    """What a rehearsed request would have written."""

    changes: list[dict[str, Any]] = field(default_factory=list)
    workflows: list[dict[str, Any]] = field(default_factory=list)


_current: ContextVar[Rehearsal | None] = ContextVar("dry_run", default=None)


def current() -> Rehearsal | None:
    return _current.get()


def active() -> bool:
    return _current.get() is not None


@contextmanager
def rehearsing() -> Iterator[Rehearsal]:
    """Mark this context as a dry run; the caller owns the transaction it rolls back."""
    rehearsal = Rehearsal()
    token = _current.set(rehearsal)
    try:
        yield rehearsal
    finally:
        _current.reset(token)


def refuse(what: str) -> None:
    """Called before an action a rollback cannot undo: raises during a dry run."""
    if _current.get() is not None:
        raise DryRunViolation(f"a dry run must not {what}")

"""What a stage returns. Stages never touch workflow state themselves; the engine records these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Done:
    """The stage's effect is in place. ``updates`` are workflow fields to store with it."""

    message: str = ""
    updates: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Wait:
    """Come back when MAAS shows ``system_id`` in a status other than ``status`` (the site poller
    watches), or when an external signal wakes the workflow (enrollment), or at ``check_in``
    seconds at the latest (stage deadlines, slow signals)."""

    message: str
    system_id: str = ""
    status: int | None = None
    check_in: float = 300.0
    updates: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Retry:
    """A transient problem inside the stage: run it again after ``after`` seconds."""

    classification: str
    message: str
    after: float = 5.0


@dataclass(frozen=True)
class Fail:
    """The stage cannot succeed without an operator. ``failure_class`` is machine-readable;
    ``data`` goes on the timeline entry, ``updates`` are workflow fields to store with it (a
    report the failure rests on)."""

    failure_class: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    updates: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hold:
    """Stop in ``manual_intervention``: the stage did what it safely could and an operator must
    decide (e.g. disks that could not be erased). ``updates`` are stored with it."""

    failure_class: str
    message: str
    updates: dict[str, Any] = field(default_factory=dict)


Result = Done | Wait | Retry | Fail | Hold


class StageFailed(Exception):
    """Raise from deep inside a stage to end it with ``Fail`` (same fields)."""

    def __init__(self, failure_class: str, message: str, **data: Any) -> None:
        super().__init__(message)
        self.result = Fail(failure_class, message, data)


class LeaseLost(Exception):
    """Another execution owns the workflow now: stop without recording anything."""


class RowChanged(Exception):
    """Someone else wrote the workflow row while the stage ran (an enrollment), though this
    execution still holds the lease: the stage runs again on the fresh row."""


class LookedThroughHint(RowChanged):
    """A stage that looked at the machine through the site poll's listing (workflows/hints.py)
    was about to send a MAAS mutation: nothing was sent and nothing written; the stage runs
    again on a real read, as after any ``RowChanged``."""

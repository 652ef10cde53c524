"""The simulated clock and the scheduler of machine-driven steps (docs/simulator.md,
"Timelines").

Every duration is in *MAAS seconds*; ``Clock.scale`` makes them pass faster (scale 60 turns
MAAS's 30-minute deploy timeout into 30 real seconds). Steps wait on a heap and are applied
lazily whenever the simulator is touched, so 10,000 idle machines cost nothing.
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Generic, TypeVar

T = TypeVar("T")


class Clock:
    """Simulated wall clock: real time * scale, plus explicit jumps (``advance``)."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self._real0 = time.monotonic()
        self._sim0 = time.time()
        self._offset = 0.0

    def now(self) -> float:
        return self._sim0 + (time.monotonic() - self._real0) * self.scale + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds

    def wall(self, t: float) -> float:
        """The real moment the simulated time ``t`` was reached: what the simulator reports as
        an event's time, since a real MAAS stamps events with its own clock, which runs at real
        speed (a scaled stamp would look minutes in the future). Jumps made since ``t`` count as
        if made before it; never later than now."""
        return min(self._sim0 + (t - self._sim0 - self._offset) / self.scale, time.time())


class Scheduler(Generic[T]):
    """Steps due at a time, for a machine and the operation that scheduled them: popped in
    the order they fell due (ties in the order they were pushed)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, int, T]] = []
        self._seq = itertools.count()

    def push(self, due: float, system_id: str, op_id: int, step: T) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), system_id, op_id, step))

    def pop_due(self, now: float) -> tuple[float, str, int, T] | None:
        """The earliest step due at ``now`` or before, else None."""
        if not self._heap or self._heap[0][0] > now:
            return None
        due, _, system_id, op_id, step = heapq.heappop(self._heap)
        return due, system_id, op_id, step

"""Per-operation counts and timings of MAAS calls, in-process (exported by the metrics issue).

Keyed by (operation, outcome) where outcome is ``ok`` or the error kind (``transient``,
``conflict``, ...). Benchmarks read ``snapshot()`` to report MAAS requests per workflow.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class CallStat:
    count: int = 0
    seconds: float = 0.0
    max_seconds: float = 0.0


class CallStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: dict[tuple[str, str], CallStat] = defaultdict(CallStat)

    def record(self, operation: str, outcome: str, seconds: float) -> None:
        with self._lock:
            stat = self._stats[(operation, outcome)]
            stat.count += 1
            stat.seconds += seconds
            stat.max_seconds = max(stat.max_seconds, seconds)

    def snapshot(self) -> dict[tuple[str, str], CallStat]:
        with self._lock:
            return {k: CallStat(v.count, v.seconds, v.max_seconds) for k, v in self._stats.items()}

    def total(self) -> int:
        with self._lock:
            return sum(s.count for s in self._stats.values())

    def reset(self) -> None:
        with self._lock:
            self._stats.clear()


STATS = CallStats()

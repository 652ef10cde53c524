"""Folding bursts of the same hand-off into a few messages, per process.

When many workflows end together, each asks for the same follow-up (admit the site's queued
work, publish the outbox). The first request is sent at once; the others of the burst are folded
into one more, sent to run when a short window ends: a follow-up that runs later sees
everything committed before it, so nothing is missed, and the periodic sweep and publisher
catch anything a crash drops. docs/architecture.md ("At-least-once work").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable


class Coalescer:
    """Per process and key: when the next request may be sent, and until when one already on
    its way covers what happens now."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.lock = threading.Lock()
        self.next_at: dict[Hashable, float] = {}
        self.covered_until: dict[Hashable, float] = {}

    def countdown(self, key: Hashable) -> float | None:
        """Seconds until the request to send, or None when one on its way covers it."""
        now = time.monotonic()
        with self.lock:
            next_at = self.next_at.get(key, 0.0)
            if now >= next_at:
                self.next_at[key] = now + self.window
                return 0.0
            if self.covered_until.get(key, 0.0) >= now:
                return None
            self.covered_until[key] = next_at
            self.next_at[key] = next_at + self.window
            return next_at - now

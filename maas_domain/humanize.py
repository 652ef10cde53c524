"""Ages as people read them on the admin pages: "42s", "17m", "3h 5m", "2d 4h"."""

from __future__ import annotations

from datetime import timedelta


def humanize_age(delta: timedelta | None) -> str:
    if delta is None:
        return "-"
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 90:
        return f"{seconds}s"
    if seconds < 90 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"

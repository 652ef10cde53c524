"""Figures for metrics exporters: call these, they run a constant number of queries."""

from __future__ import annotations

from collections import Counter

from reconciliation import selectors


def open_drift_by_kind() -> dict[tuple[str, str], int]:
    """(kind, severity) → active drift records, all sites."""
    totals: Counter[tuple[str, str]] = Counter()
    for (_, kind, severity, _), n in selectors.open_drift_counts().items():
        totals[(kind, severity)] += n
    return dict(totals)


def reconcile_durations() -> dict[int, tuple[str, float | None]]:
    """site_id → (outcome, seconds) of its latest finished reconcile run."""
    return selectors.last_run_durations()

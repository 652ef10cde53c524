"""Reads of onboarding rows that need more than one table: batches with their onboardings
counted per state, in one query for any page size, and what a batch is doing (its phase), said
one way by the API, the admin pages and maasctl.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from maas_domain.work import OPEN_STATES, WorkflowState
from onboarding.models import Onboarding, OnboardingBatch

STATE_COUNTS = {
    state: Count("onboardings", filter=Q(onboardings__state=state))
    for state in WorkflowState.values
}


def batches() -> QuerySet[OnboardingBatch]:
    """Batches with their onboardings counted per state: one query for any page size."""
    return OnboardingBatch.objects.annotate(
        **{f"n_{state}": expr for state, expr in STATE_COUNTS.items()}
    ).order_by("-id")


FINISHED = "finished"


def open_count(batch: Any) -> int:
    """Onboardings of a batch (annotated by ``batches()``) that have not ended."""
    return sum(int(getattr(batch, f"n_{state}")) for state in OPEN_STATES)


def phase(batch: Any) -> str:
    """What a batch is doing: ``finished`` once none of its onboardings is open (nothing is
    left to admit, resume or cancel), else its admission state (``running``, ``paused``,
    ``cancelled``)."""
    return FINISHED if open_count(batch) == 0 else str(batch.state)


def in_flight(batches: QuerySet[OnboardingBatch]) -> QuerySet[OnboardingBatch]:
    """The batches that have not finished: some onboarding of theirs is open."""
    return batches.filter(
        Exists(Onboarding.objects.filter(batch=OuterRef("pk"), state__in=OPEN_STATES))
    )


def in_flight_per_site() -> dict[int, int]:
    """site id -> batches in flight there (the fleet page). One query."""
    rows = (
        in_flight(OnboardingBatch.objects.order_by()).values_list("site_id").annotate(n=Count("id"))
    )
    return dict(rows)

"""Reads of onboarding rows that need more than one table: batches with their onboardings
counted per state, in one query for any page size.
"""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from maas_domain.work import WorkflowState
from onboarding.models import OnboardingBatch

STATE_COUNTS = {
    state: Count("onboardings", filter=Q(onboardings__state=state))
    for state in WorkflowState.values
}


def batches() -> QuerySet[OnboardingBatch]:
    """Batches with their onboardings counted per state: one query for any page size."""
    return OnboardingBatch.objects.annotate(
        **{f"n_{state}": expr for state, expr in STATE_COUNTS.items()}
    ).order_by("-id")

"""Batch canary and failure budget (docs/onboarding.md, "Batches: canary and failure budget").

The batch's state lives on its row; the engine only asks, at admission, which pending rows must
keep waiting (``held_back``, the kind's ``admission_filter``). Whether a batch passes its canary
or pauses is decided where one of its workflows ends: the kind's hooks call ``after_success``
and ``after_failure`` inside the transaction that records the outcome, so the pause, its reason,
the audit row and the ``node.onboarding.batch_paused`` event exist exactly when the failure
does.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.utils import timezone

from maas_domain import audit, events
from maas_domain.work import WorkflowState
from onboarding.models import BatchState, Onboarding, OnboardingBatch

W = WorkflowState
BATCH_PAUSED = "node.onboarding.batch_paused"
FAILED = (W.FAILED, W.MANUAL_INTERVENTION)


def held_back() -> Q:
    """Pending onboardings that must keep waiting: their batch is paused or cancelled, or it
    has a canary that has not succeeded yet and they are not part of it."""
    return Q(batch__state__in=[BatchState.PAUSED, BatchState.CANCELLED]) | Q(
        batch__canary_size__gt=0, batch__canary_passed_at__isnull=True, batch_canary=False
    )


def _locked(wf: Onboarding) -> OnboardingBatch | None:
    if not wf.batch_id:
        return None
    return OnboardingBatch.objects.select_for_update().filter(pk=wf.batch_id).first()


def failures(batch: OnboardingBatch) -> int:
    """Failed (or frozen) workflows of the batch since its last resume."""
    total = Onboarding.objects.filter(batch=batch, state__in=FAILED).count()
    return max(total - batch.failures_before_resume, 0)


def after_success(wf: Onboarding) -> None:
    """A canary succeeded: once all of them have, the rest of the batch may start."""
    if not wf.batch_canary:
        return
    batch = _locked(wf)
    if batch is None or batch.canary_passed_at is not None:
        return
    waiting = Onboarding.objects.filter(batch=batch, batch_canary=True).exclude(state=W.SUCCEEDED)
    if not waiting.exists():
        batch.canary_passed_at = timezone.now()
        batch.save(update_fields=["canary_passed_at"])
        audit.record(
            actor=None,
            action="onboarding.batch_canary_passed",
            target=batch,
            after={"canary_size": batch.canary_size},
        )


def after_failure(wf: Onboarding) -> None:
    """A workflow of the batch failed (or froze): pause admission when it was a canary, or when
    the failure budget is spent."""
    batch = _locked(wf)
    if batch is None or batch.state != BatchState.RUNNING:
        return
    count = failures(batch)
    reason = ""
    if wf.batch_canary and batch.canary_passed_at is None:
        reason = f"canary {wf.hostname} (onboarding {wf.pk}) {wf.state}: {wf.reason}"
    elif batch.pause_after_failures and count >= batch.pause_after_failures:
        reason = (
            f"failure budget spent: {count} failed, pause after {batch.pause_after_failures} "
            f"(last: {wf.hostname}, {wf.failure_class or wf.state})"
        )
    elif batch.pause_failure_percent and 100 * count >= batch.pause_failure_percent * batch.size:
        reason = (
            f"failure budget spent: {count} of {batch.size} failed, pause at "
            f"{batch.pause_failure_percent}% (last: {wf.hostname}, {wf.failure_class or wf.state})"
        )
    if reason:
        pause(batch, reason[:500], failed=count)


def pause(batch: OnboardingBatch, reason: str, *, failed: int) -> None:
    batch.pause()
    batch.paused_reason, batch.paused_at = reason, timezone.now()
    batch.save(update_fields=["state", "paused_reason", "paused_at"])
    audit.record(
        actor=None,
        action="onboarding.batch_paused",
        target=batch,
        after={"state": batch.state, "failed": failed},
        reason=reason,
    )
    events.emit_other(BATCH_PAUSED, payload(batch, failed=failed))


def payload(batch: OnboardingBatch, *, failed: int) -> dict[str, Any]:
    return {
        "site_id": batch.site_id,
        "batch_id": batch.pk,
        "state": batch.state,
        "reason": batch.paused_reason,
        "size": batch.size,
        "failed": failed,
        "canary_size": batch.canary_size,
        "canary_passed": batch.canary_passed_at is not None,
        "correlation_id": batch.correlation_id,
    }

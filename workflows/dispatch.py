"""Hand-offs to Celery, always after the surrounding transaction commits.

Messages carry ids only. They name their task (``workflow.advance``, ``workflow.admit``) rather
than import it, so the modules that run a step (``step``) and those that schedule steps
(``scheduling``) each keep their task beside its body without importing each other. If the
broker is down the error is logged and the periodic sweep re-dispatches later: nothing is lost.
docs/architecture.md ("At-least-once work").
"""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from maas_domain.coalesce import Coalescer

ADVANCE = "workflow.advance"
ADMIT = "workflow.admit"
# Admissions of one site a process asks for are at least this far apart: the first at once,
# the others of a burst (many workflows ending together) folded into one at the window's end.
ADMIT_WINDOW_SECONDS = 0.5


def enqueue(kind: str, pk: int, dispatch: int, countdown: float = 0) -> None:
    """Run the current stage of workflow ``pk`` (for ``dispatch``) after commit."""

    def send() -> None:
        current_app.send_task(ADVANCE, (kind, pk, dispatch), countdown=max(countdown, 0))

    transaction.on_commit(send, robust=True)


_admissions = Coalescer(ADMIT_WINDOW_SECONDS)


def admit_after_commit(site_id: int) -> None:
    """Start queued workflows of ``site_id`` (a slot may have freed) after commit; a burst is
    folded into one admission per window (``maas_domain/coalesce.py``)."""

    def send() -> None:
        countdown = _admissions.countdown(site_id)
        if countdown is not None:
            current_app.send_task(ADMIT, (site_id,), countdown=countdown)

    transaction.on_commit(send, robust=True)

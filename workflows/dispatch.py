"""Hand-offs to Celery, always after the surrounding transaction commits.

Messages carry ids only (and, when the site poll wakes a workflow, the machine as its listing
returned it: workflows/hints.py). They name their task (``workflow.advance``,
``workflow.admit``) rather than import it, so the modules that run a step (``step``) and those
that schedule steps (``scheduling``) each keep their task beside its body without importing
each other. If the
broker is down the error is logged and the periodic sweep re-dispatches later: nothing is lost.
A step goes to its site's region's queue (``maas_domain/regions.py``): the caller names the
region it read with the workflow. Admission stays on the central queue.
docs/architecture.md ("At-least-once work", "Regions").
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction

from maas_domain import regions
from maas_domain.coalesce import Coalescer

ADVANCE = "workflow.advance"
ADMIT = "workflow.admit"
# Admissions of one site a process asks for are at least this far apart: the first at once,
# the others of a burst (many workflows ending together) folded into one at the window's end.
ADMIT_WINDOW_SECONDS = 0.5


def enqueue(
    kind: str,
    pk: int,
    dispatch: int,
    *,
    region: str,
    countdown: float = 0,
    hint: dict[str, Any] | None = None,
) -> None:
    """Run the current stage of workflow ``pk`` (for ``dispatch``) after commit, on the queue
    of ``region`` (its site's: a site's region cannot change while it has a workflow running,
    waiting or cancelling, so the region read with the row is the one to send to). ``hint``:
    the machine as the site poll saw it (workflows/hints.py), a fourth argument only when
    there is one, so the message of every other hand-off is unchanged."""
    args: tuple[Any, ...] = (kind, pk, dispatch) if hint is None else (kind, pk, dispatch, hint)

    def send() -> None:
        regions.send(ADVANCE, args, region=region, countdown=countdown)

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

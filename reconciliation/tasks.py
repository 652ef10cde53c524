"""Celery tasks of reconciliation. Arguments are ids only."""

from __future__ import annotations

from celery import shared_task

from reconciliation import services


@shared_task(name="reconciliation.dispatch")
def dispatch() -> dict[str, int]:
    """Beat entry (schedule in the ``reconciliation-dispatch`` periodic task, editable in the
    admin): queue one run per active site."""
    return services.reconcile_dispatch()


@shared_task(name="reconciliation.reconcile_site")
def reconcile_site(run_id: int) -> str:
    run = services.reconcile_execute(run_id)
    return run.state if run is not None else "not claimed"

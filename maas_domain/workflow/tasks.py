"""Celery tasks of the workflow engine. Arguments are ids only, never secrets."""

from __future__ import annotations

from celery import shared_task

from maas_domain.workflow import engine


@shared_task(name="workflow.advance")
def advance(kind: str, workflow_id: int, dispatch: int) -> str:
    return engine.run(kind, workflow_id, dispatch)


@shared_task(name="workflow.admit")
def admit(site_id: int) -> int:
    return engine.admit(site_id)


@shared_task(name="workflow.poll_site")
def poll_site(site_id: int) -> int:
    return engine.poll_site(site_id)


@shared_task(name="workflow.sweep")
def sweep() -> dict[str, int]:
    return engine.sweep()

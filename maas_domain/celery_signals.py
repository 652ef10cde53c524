"""Celery signal handlers: the correlation id travels from the code that sends a task into the
task that runs it, and database connections live across tasks.

``before_task_publish`` copies the current correlation id into the message headers;
``task_prerun`` binds it (and the task name) for the task's log lines; ``task_postrun`` unbinds.
Workflow steps bind their workflow's own correlation id on top (engine.run).
"""

from __future__ import annotations

from typing import Any

from celery import signals
from django.db import close_old_connections

from maas_domain import context

HEADER = "maascp_correlation_id"  # not "correlation_id": Celery uses that AMQP property
_TOKENS: dict[str, Any] = {}


@signals.before_task_publish.connect
def _stamp(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None and HEADER not in headers:
        cid = context.correlation_id.get()
        if cid:
            headers[HEADER] = cid


@signals.task_prerun.connect
def _bind(task_id: str = "", task: Any = None, **_: Any) -> None:
    cid = getattr(task.request, HEADER, None) if task is not None else None
    _TOKENS[task_id] = (
        context.correlation_id.set(context.clean_correlation_id(cid)),
        context.log_fields.set({"task": getattr(task, "name", "")}),
    )


@signals.task_postrun.connect
def _unbind(task_id: str = "", **_: Any) -> None:
    tokens = _TOKENS.pop(task_id, None)
    if tokens is not None:
        context.log_fields.reset(tokens[1])
        context.correlation_id.reset(tokens[0])


@signals.task_prerun.connect
@signals.task_postrun.connect
def _recycle_connections(**_: Any) -> None:
    """What Django does around a web request, around every task: a connection older than
    CONN_MAX_AGE, or one that saw an error, is closed; a kept one is health-checked on first
    use (CONN_HEALTH_CHECKS). Celery's own fix-up would open a new connection for every task
    (``CELERY_DB_REUSE_MAX`` in config/settings.py turns it off)."""
    close_old_connections()

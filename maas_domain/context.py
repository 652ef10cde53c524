"""Request/task context carried into logs, audit rows and (later) Celery tasks.

Context variables rather than thread-locals, so the values follow the code into any thread or
task that copies the context. The correlation id set by the API middleware is the one written to
audit rows and log lines.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_VALID_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

correlation_id: ContextVar[str | None] = ContextVar("correlation_id", default=None)
log_fields: ContextVar[dict[str, Any] | None] = ContextVar("log_fields", default=None)
# The API token a request authenticated with (its id): audit rows name it.
api_token_id: ContextVar[int | None] = ContextVar("api_token_id", default=None)
# ... and its scope: every authorization check of the request honours it (maas_domain/access.py),
# the services' own checks included, not only the view's.
api_token_scope: ContextVar[str | None] = ContextVar("api_token_scope", default=None)


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def clean_correlation_id(value: str | None) -> str:
    """Accept a caller's id only if it is short and safe to log; otherwise mint one."""
    if value and _VALID_ID.fullmatch(value):
        return value
    return new_correlation_id()


def current_correlation_id() -> str:
    value = correlation_id.get()
    if value is None:
        value = new_correlation_id()
        correlation_id.set(value)
    return value


@contextmanager
def bound(cid: str | None = None, **fields: Any) -> Iterator[str]:
    """Run a block with a correlation id and extra log fields (site_id, node_id, ...)."""
    token = correlation_id.set(clean_correlation_id(cid) if cid else current_correlation_id())
    merged = {**(log_fields.get() or {}), **fields}
    fields_token = log_fields.set(merged)
    try:
        yield correlation_id.get() or ""
    finally:
        log_fields.reset(fields_token)
        correlation_id.reset(token)

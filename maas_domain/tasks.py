"""The worker round-trip check (``manage.py ping_worker``, the embedded smoke test)."""

from __future__ import annotations

import logging
import os
import socket

from celery import shared_task

log = logging.getLogger("maas_domain.tasks")


@shared_task(name="maas_domain.ping", ignore_result=False)
def ping(token: str) -> dict[str, object]:
    """Round-trip check: proves a worker consumed the message and wrote a result."""
    log.info("ping %s", token)
    return {"pong": token, "host": socket.gethostname(), "pid": os.getpid()}

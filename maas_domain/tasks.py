"""Small operational tasks of the domain core."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="maas_domain.ping", ignore_result=False)
def ping(token: str) -> dict[str, object]:
    """Round-trip check: proves a worker consumed the message and wrote a result."""
    return {"pong": token, "host": socket.gethostname(), "pid": os.getpid()}

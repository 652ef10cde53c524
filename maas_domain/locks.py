"""Named database locks: non-blocking ones for periodic work (sweep, site poller, admission),
and ``hold`` for the writers of one fact that must take turns (a site's MAAS URL).

PostgreSQL: a transaction-scoped advisory lock, so two beats or two workers never do the same
periodic work at once and a crashed holder releases it with its connection. SQLite (embedded,
one beat): the database serialises writers already, so the lock is always granted.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def try_lock(name: str) -> Iterator[bool]:
    """``with try_lock("sweep") as got:`` runs the block in a transaction holding the lock."""
    with transaction.atomic():
        if connection.vendor != "postgresql":
            yield True
            return
        key = zlib.crc32(name.encode()) - (1 << 31)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [key])
            (got,) = cursor.fetchone()
        yield bool(got)


def hold(name: str) -> None:
    """Wait for the named lock until the caller's transaction ends (call inside one): the
    writers of one fact (a site's MAAS URL) take turns. SQLite serialises writers already."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("locks.hold must run inside a transaction")
    if connection.vendor != "postgresql":
        return
    key = zlib.crc32(name.encode()) - (1 << 31)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])

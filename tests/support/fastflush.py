"""Between transactional tests on PostgreSQL: a faster flush that keeps what migrations seeded.

Django empties every table after a test that commits (``transactional_db``, the live server,
whole-workflow tests) with one ``TRUNCATE`` of all tables, which PostgreSQL pays for by creating
new files for each: about a second a test on this machine. The few rows a test leaves are
deleted instead (every foreign key is ``DEFERRABLE INITIALLY DEFERRED``, so the order does not
matter inside the flush's transaction).

Either way a flush also removed what the migrations seeded (the access role groups, the beat
schedule of reconciliation, content types and permissions), so a database test that ran after a
transactional one in the same process saw a database no deployment has. ``snapshot`` copies
every table that holds rows right after the test database was migrated into a ``_seed_`` table
of its own (not a Django table, so no flush touches it), and every flush puts those rows back,
ids included: after any test, the database is as migrated. (With ``--reuse-db`` the snapshot is
of the reused database as it is: one emptied by a run before this existed lacks those rows; make
it again with ``--create-db``. ``make check`` always creates its databases.)
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.backends.postgresql.operations import DatabaseOperations

_truncate = DatabaseOperations.sql_flush
_seeded: list[str] = []  # the tables with rows right after migrating


def snapshot() -> None:
    """Copy the seeded tables (PostgreSQL only; call once the test database is migrated)."""
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    with connection.cursor() as cur:
        for table in connection.introspection.django_table_names(only_existing=True):
            if table == "django_migrations":
                continue
            cur.execute(f"SELECT EXISTS (SELECT 1 FROM {quote(table)})")  # noqa: S608
            if not cur.fetchone()[0]:
                continue
            seed = quote(f"_seed_{table}")
            cur.execute(f"DROP TABLE IF EXISTS {seed}")
            cur.execute(f"CREATE TABLE {seed} AS SELECT * FROM {quote(table)}")  # noqa: S608
            _seeded.append(table)


def _flush(
    self: DatabaseOperations,
    style: Any,
    tables: list[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    if not tables:
        return []
    if reset_sequences:
        empty = _truncate(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    else:
        empty = ["SET CONSTRAINTS ALL DEFERRED;"] + [
            f"DELETE FROM {self.quote_name(table)};"  # noqa: S608 (names from Django, quoted)
            for table in tables
        ]
    return empty + [
        f"INSERT INTO {self.quote_name(t)} SELECT * FROM {self.quote_name('_seed_' + t)};"  # noqa: S608
        for t in _seeded
        if t in tables
    ]


def install() -> None:
    DatabaseOperations.sql_flush = _flush  # type: ignore[method-assign,assignment]

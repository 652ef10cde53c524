"""Trigram (pg_trgm GIN) indexes for substring search, as a migration operation.

``icontains`` compiles to ``UPPER(col::text) LIKE UPPER('%term%')`` on PostgreSQL, so the index is
on that expression: the API's ``search`` and the admin's search box use it (docs/operations.md
says the database role must be allowed to create the extension). SQLite gets nothing.
Migrations import this module: change it only in ways that keep their effect.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def trigram_indexes(table: str, *columns: str) -> migrations.RunPython:
    """Create (and on reverse drop) ``<table>_<column>_trgm`` for each column."""
    names = [(f"{table}_{column}_trgm", column) for column in columns]

    def create(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for name, column in names:
            schema_editor.execute(
                f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" '
                f'USING gin ((UPPER("{column}"::text)) gin_trgm_ops)'
            )

    def drop(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for name, _ in names:
            schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')

    return migrations.RunPython(create, drop)

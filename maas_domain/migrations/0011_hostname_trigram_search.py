"""Substring search on hostnames and MAAS system ids (``icontains``, the API's ``search`` and
the admin's search box) served by trigram indexes on PostgreSQL; nothing on SQLite."""

from django.db import migrations

INDEXES = [
    ("nodes_hostname_trgm", "nodes", "hostname"),
    ("nodes_system_id_trgm", "nodes", "maas_system_id"),
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, table, column in INDEXES:
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" '
            f'USING gin ((UPPER("{column}"::text)) gin_trgm_ops)'
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _, _ in INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("maas_domain", "0010_sku_revision")]
    operations = [migrations.RunPython(create, drop)]

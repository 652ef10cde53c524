"""Substring search on hostnames and MAAS system ids (``icontains``, the API's ``search`` and
the admin's search box) served by trigram indexes on PostgreSQL; nothing on SQLite."""

from django.db import migrations

INDEXES = [
    ("node_decommissions_hostname_trgm", "node_decommissions", "hostname"),
    ("node_decommissions_system_id_trgm", "node_decommissions", "maas_system_id"),
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
    dependencies = [("decommission", "0002_workflow_fields_on_the_abstract_model")]
    operations = [migrations.RunPython(create, drop)]

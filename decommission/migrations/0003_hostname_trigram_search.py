"""Substring search on hostnames and MAAS system ids: trigram indexes on PostgreSQL
(maas_domain/db/trigram.py)."""

from django.db import migrations

from maas_domain.db.trigram import trigram_indexes


class Migration(migrations.Migration):
    dependencies = [("decommission", "0002_workflow_fields_on_the_abstract_model")]
    operations = [trigram_indexes("node_decommissions", "hostname", "maas_system_id")]

"""Substring search on hostnames and MAAS system ids: trigram indexes on PostgreSQL
(maas_domain/db/trigram.py)."""

from django.db import migrations

from maas_domain.db.trigram import trigram_indexes


class Migration(migrations.Migration):
    dependencies = [("maas_domain", "0010_sku_revision")]
    operations = [trigram_indexes("nodes", "hostname", "maas_system_id")]

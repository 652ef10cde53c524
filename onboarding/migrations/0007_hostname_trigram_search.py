"""Substring search on hostnames and MAAS system ids: trigram indexes on PostgreSQL
(maas_domain/db/trigram.py)."""

from django.db import migrations

from maas_domain.db.trigram import trigram_indexes


class Migration(migrations.Migration):
    dependencies = [("onboarding", "0006_live_run")]
    operations = [trigram_indexes("node_onboardings", "hostname", "maas_system_id")]

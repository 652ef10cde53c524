"""The parent link moves to every workflow (workflows/family.py): the child keeps the parent's
attempt that started it; a reimage's redeploy says so in ``layout_kept`` rather than by naming
its parent's kind."""

from django.db import migrations, models


def layout_kept_by_reimages(apps, schema_editor):
    Onboarding = apps.get_model("onboarding", "Onboarding")
    Onboarding.objects.filter(parent_kind="decommission").update(layout_kept=True)


class Migration(migrations.Migration):

    dependencies = [
        ("onboarding", "0009_hardware_and_acceptance_reports"),
    ]

    operations = [
        migrations.AddField(
            model_name="onboarding",
            name="layout_kept",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="onboarding",
            name="parent_attempt",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="onboarding",
            name="parent_id",
            field=models.PositiveBigIntegerField(blank=True, db_index=True, null=True),
        ),
        migrations.RunPython(layout_kept_by_reimages, migrations.RunPython.noop),
    ]

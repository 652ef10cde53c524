"""One parent link (workflows/family.py): a reimage's child onboarding already names its parent;
the attempt that started it moves onto the child, and the decommission's own copy of the link
goes."""

from django.db import migrations, models


def attempt_onto_the_child(apps, schema_editor):
    Decommission = apps.get_model("decommission", "Decommission")
    Onboarding = apps.get_model("onboarding", "Onboarding")
    rows = Decommission.objects.exclude(reimage_onboarding=None).values_list(
        "reimage_onboarding_id", "reimage_attempt"
    )
    for child_id, attempt in rows.iterator():
        Onboarding.objects.filter(pk=child_id).update(parent_attempt=attempt)


class Migration(migrations.Migration):

    dependencies = [
        ("decommission", "0004_erase_evidence"),
        ("onboarding", "0010_one_parent_link"),
    ]

    operations = [
        migrations.AddField(
            model_name="decommission",
            name="parent_attempt",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="decommission",
            name="parent_id",
            field=models.PositiveBigIntegerField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name="decommission",
            name="parent_kind",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.RunPython(attempt_onto_the_child, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="decommission",
            name="reimage_attempt",
        ),
        migrations.RemoveField(
            model_name="decommission",
            name="reimage_onboarding",
        ),
    ]

"""Create the beat schedule of reconciliation once, as a database row operators edit in the
admin (Periodic tasks → reconciliation-dispatch). A row that already exists is left alone, so an
operator's change survives deploys; settings-defined beat entries would be rewritten on every
beat start."""

from typing import Any

from django.db import migrations
from django.utils import timezone

NAME = "reconciliation-dispatch"


def create(apps: Any, schema_editor: Any) -> None:
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    if PeriodicTask.objects.filter(name=NAME).exists():
        return
    every, _ = IntervalSchedule.objects.get_or_create(every=300, period="seconds")
    PeriodicTask.objects.create(
        name=NAME,
        task="reconciliation.dispatch",
        interval=every,
        description="Queue a reconcile of every active MAAS site (docs/reconciliation.md).",
    )
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def remove(apps: Any, schema_editor: Any) -> None:
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create, remove)]

"""The Celery application. Configuration is in settings (``CELERY_*``); see docs/architecture.md."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["maas_domain.workflow"])  # workflow.* tasks live in a sub-package

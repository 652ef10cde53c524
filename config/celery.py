"""The Celery application. Configuration is in settings (``CELERY_*``); see docs/architecture.md."""

import os

from celery import Celery, signals

from maas_domain import broker
from maas_domain.heartbeat import Heartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
broker.install()  # the embedded broker writes each message whole (maas_domain/broker.py)

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # <app>.tasks modules; CELERY_IMPORTS lists tasks kept beside their bodies
# Every worker says which queues it serves (maas_domain/heartbeat.py; docs/operations.md, Regions).
app.steps["consumer"].add(Heartbeat)


@signals.worker_init.connect
def _worker_metrics(**_: object) -> None:
    """Serve this worker's metrics on MAASCP_WORKER_METRICS_PORT, when set (see
    docs/observability.md)."""
    from maas_domain.observability.exposition import start_worker_metrics

    start_worker_metrics()

"""Serving the metrics: the admin scrape endpoint of the web process and the worker port.

* ``GET /api/v1/admin/metrics`` (staff session or admin bearer token): the DB-derived gauges
  (``metrics.GAUGE_SOURCES``) plus every event metric written into this machine's metrics
  directory (``MAASCP_METRICS_DIR``) by the processes that share it: gunicorn's workers, and in
  the embedded mode the worker and beat too.
* ``MAASCP_WORKER_METRICS_PORT``: a Celery worker serves its own event metrics (main process and
  pool children) on this port. It then writes into a private directory under the metrics
  directory, wiped when the worker starts, so that nothing is exposed twice.

docs/observability.md explains which to scrape in which deployment.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from maas_domain.observability import metrics

log = logging.getLogger("maas_domain.metrics")
ENV = "PROMETHEUS_MULTIPROC_DIR"


def metrics_dir() -> Path:
    """The directory this process writes its event metrics to."""
    return Path(os.environ[ENV])


def wipe(path: Path) -> None:
    """Remove the metric files of processes that are gone (start-up of whoever owns ``path``)."""
    path.mkdir(parents=True, exist_ok=True)
    for name in glob.glob(str(path / "*.db")):
        Path(name).unlink(missing_ok=True)


class DatabaseGauges:
    """A collector running every registered DB-derived gauge source at scrape time."""

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            metrics.SOURCE_UP,
            "1 when a DB-derived gauge source answered this scrape, 0 when it failed",
            labels=["source"],
        )
        for name, source in list(metrics.GAUGE_SOURCES):
            try:
                families = list(source())
            except Exception:
                log.exception("metrics source %s failed", name)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up


def web_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(metrics_dir()))
    registry.register(DatabaseGauges())
    return registry


def render_web() -> bytes:
    return generate_latest(web_registry())


# -- the worker port -------------------------------------------------------------------------------

_worker_server: Any = None


def worker_dir(base: Path, port: int) -> Path:
    return base / f"worker-{port}"


def serve(path: Path, port: int, addr: str) -> tuple[Any, Any]:
    """Serve the merged metric files of ``path`` over HTTP (returns the server and its thread)."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(path))
    return start_http_server(port, addr=addr, registry=registry)


def start_worker_metrics() -> None:
    """Celery ``worker_init`` (main process, before the pool forks): when a worker metrics port
    is configured, move this worker's metric files into its own directory, wipe it, and serve it.
    """
    global _worker_server
    from django.conf import settings

    port = int(settings.WORKER_METRICS_PORT or 0)
    if not port or _worker_server is not None:
        return
    path = worker_dir(Path(settings.METRICS_DIR), port)
    if path.exists():
        shutil.rmtree(path)
    wipe(path)
    os.environ[ENV] = str(path)  # the pool's children inherit it when they fork
    _worker_server = serve(path, port, settings.WORKER_METRICS_ADDR)
    log.info("worker metrics on %s:%s", settings.WORKER_METRICS_ADDR, port)


__all__ = [
    "CONTENT_TYPE_PLAIN_0_0_4",
    "DatabaseGauges",
    "render_web",
    "serve",
    "start_worker_metrics",
    "wipe",
]

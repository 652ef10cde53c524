"""Every Prometheus metric of the control plane, in one place (docs/observability.md).

Two sources, because work happens in many processes on many machines:

* **Event-derived** counters and histograms are recorded where the event happens (a worker
  recording a stage result, any process calling MAAS, a reconcile run). prometheus_client runs in
  multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by the settings from
  ``MAASCP_METRICS_DIR``): each process writes its values to its own memory-mapped file and the
  exposition merges the files of a directory, so a prefork worker's children, gunicorn's workers
  and (embedded) every process of the machine add up.
* **DB-derived** gauges (workflows by kind and state, outbox lag, open drift) describe the whole
  deployment, not one process: they are computed from the database at scrape time by the web
  endpoint only, with a constant number of queries (``GAUGE_SOURCES``).

Label values are always from a small, code-defined set (kinds, stages, states, outcomes,
classifications, MAAS operations, HTTP codes) or operator-named sites: never ids, hostnames,
URLs, messages or anything secret.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from prometheus_client import Counter, Histogram, values
from prometheus_client.core import GaugeMetricFamily, Metric

# Multiprocess mode is chosen by prometheus_client when ``values`` is first imported. The
# settings set PROMETHEUS_MULTIPROC_DIR before anything imports it; if something did earlier,
# choose again so that our values go to the shared files (values are created lazily, per label
# set, so nothing has been recorded yet).
if "PROMETHEUS_MULTIPROC_DIR" in os.environ and not getattr(
    values.ValueClass, "_multiprocess", False
):
    values.ValueClass = values.get_value_class()

PREFIX = "maascp_"

# -- workflows (event-derived, recorded by engine.record) ----------------------------------------
STAGE_DURATION = Histogram(
    "maascp_workflow_stage_duration_seconds",
    "Wall time of a workflow stage from its first start to its end (waits and retries included)",
    ["kind", "stage", "outcome"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400),
    registry=None,
)
RETRIES = Counter(
    "maascp_workflow_retries",
    "Stage retries decided by the engine, by the transient problem's classification",
    ["kind", "stage", "classification"],
    registry=None,
)
FAILURES = Counter(
    "maascp_workflow_failures",
    "Workflows failed by a stage, by failure class",
    ["kind", "stage", "failure_class"],
    registry=None,
)

# -- MAAS (event-derived, recorded by the MAAS client for every HTTP attempt) ---------------------
MAAS_REQUESTS = Counter(
    "maascp_maas_requests",
    "HTTP requests sent to MAAS, by site, operation, outcome (ok or the error class) and code",
    ["site", "operation", "outcome", "code"],
    registry=None,
)
MAAS_LATENCY = Histogram(
    "maascp_maas_request_duration_seconds",
    "Latency of HTTP requests to MAAS by operation",
    ["operation"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=None,
)

# -- reconciliation (event-derived; recorded by the reconciliation app) ---------------------------
RECONCILE_DURATION = Histogram(
    "maascp_reconcile_duration_seconds",
    "Duration of one reconciliation run of a site, by outcome",
    ["site", "outcome"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
    registry=None,
)

# -- logging ---------------------------------------------------------------------------------------
LOG_RECORDS_DROPPED = Counter(
    "maascp_log_records_dropped",
    "Log records the Loki push handler dropped (queue full, or Loki refused or unreachable)",
    ["reason"],
    registry=None,
)

# -- security (docs/security.md) -------------------------------------------------------------------
NODE_REFUSALS = Counter(
    "maascp_node_refusals",
    "Requests the node-facing endpoints refused, by endpoint and reason "
    "(invalid, replayed, throttled)",
    ["endpoint", "reason"],
    registry=None,
)
THROTTLED = Counter(
    "maascp_throttled_requests",
    "Requests answered 429, by limit (api_mutations, node_address, node_onboarding, admin_login)",
    ["limit"],
    registry=None,
)

# -- DB-derived gauges (computed at scrape time by the web endpoint) -------------------------------
WORKFLOWS = "maascp_workflows"
OUTBOX_UNPUBLISHED = "maascp_outbox_unpublished_events"
OUTBOX_OLDEST_AGE = "maascp_outbox_oldest_unpublished_age_seconds"
OPEN_DRIFT = "maascp_reconcile_open_drift"
REGION_WORK_WAITING = "maascp_region_work_waiting"
REGION_WORKERS = "maascp_region_workers"
SOURCE_UP = "maascp_metrics_source_up"
NODES_CORDONED = "maascp_nodes_cordoned"

#: Every family name this module defines (the dashboard test checks the dashboard against it).
FAMILIES: dict[str, str] = {
    STAGE_DURATION._name: "histogram",
    RETRIES._name: "counter",
    FAILURES._name: "counter",
    MAAS_REQUESTS._name: "counter",
    MAAS_LATENCY._name: "histogram",
    RECONCILE_DURATION._name: "histogram",
    LOG_RECORDS_DROPPED._name: "counter",
    NODE_REFUSALS._name: "counter",
    THROTTLED._name: "counter",
    WORKFLOWS: "gauge",
    OUTBOX_UNPUBLISHED: "gauge",
    OUTBOX_OLDEST_AGE: "gauge",
    OPEN_DRIFT: "gauge",
    REGION_WORK_WAITING: "gauge",
    REGION_WORKERS: "gauge",
    SOURCE_UP: "gauge",
    NODES_CORDONED: "gauge",
}


def sample_names() -> set[str]:
    """The sample names a scrape can contain (``_total``, ``_bucket``...) for every family."""
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_count", "_sum"),
        "gauge": ("",),
    }
    return {name + s for name, typ in FAMILIES.items() for s in suffixes[typ]}


# -- recording -------------------------------------------------------------------------------------

_STAGE_END = {"Done": "succeeded", "Fail": "failed", "Hold": "manual_intervention"}


def stage_recorded(
    kind: str,
    stage: str,
    started: datetime | None,
    result: Any,
    now: datetime,
    stage_events: Iterable[Any] = (),
    *,
    cancelling: bool = False,
) -> None:
    """Called by the engine (``workflows.step.record``) with the final result of one
    step and the timeline events the stage added, inside its transaction; counted when that
    transaction commits (a rolled-back result did not happen). Retries are the engine's (a
    ``Retry`` result) and a stage's own (a ``retry.decision`` event that goes on, e.g. release
    and redeploy after a datasource failure). ``cancelling``: the step ran the kind's cancel
    stage (``Done`` then means cancelled)."""
    name = type(result).__name__
    if cancelling:
        outcome = {"Done": "cancelled", "Fail": "manual_intervention"}.get(name)
    else:
        outcome = _STAGE_END.get(name)
    retries = [getattr(result, "classification", "")] if name == "Retry" else []
    retries += [
        str(data.get("classification") or "unclassified")
        for event_kind, _, data in stage_events
        if event_kind == "retry.decision" and data.get("retry", True)
    ]
    failure_class = getattr(result, "failure_class", "") if not cancelling else ""

    def count() -> None:
        if outcome and started is not None:
            seconds = max((now - started).total_seconds(), 0.0)
            STAGE_DURATION.labels(kind, stage, outcome).observe(seconds)
        for classification in retries:
            RETRIES.labels(kind, stage, classification or "unclassified").inc()
        if failure_class:
            FAILURES.labels(kind, stage, failure_class).inc()

    transaction.on_commit(count, robust=True)


def maas_request(site: str, operation: str, outcome: str, code: int | None, seconds: float) -> None:
    """One HTTP attempt to MAAS (called by the client next to its in-process ``STATS``)."""
    MAAS_REQUESTS.labels(site or "-", operation, outcome, str(code) if code else "none").inc()
    MAAS_LATENCY.labels(operation).observe(seconds)


def reconcile_finished(site: str, seconds: float, outcome: str) -> None:
    """One reconciliation run of ``site`` (its name) ended; ``outcome`` is a short fixed word,
    the run's final state (``succeeded`` or ``failed``)."""
    RECONCILE_DURATION.labels(site, outcome).observe(max(seconds, 0.0))


def node_refused(endpoint: str, reason: str) -> None:
    NODE_REFUSALS.labels(endpoint, reason).inc()


def throttled(limit: str) -> None:
    THROTTLED.labels(limit).inc()


def log_records_dropped(reason: str, count: int = 1) -> None:
    LOG_RECORDS_DROPPED.labels(reason).inc(count)


# -- DB-derived gauge sources ----------------------------------------------------------------------

GaugeSource = Callable[[], Iterable[Metric]]

#: (name, callable) pairs evaluated by the web endpoint at every scrape. Each callable runs a
#: constant number of queries and returns metric families. Register more with
#: ``register_gauge_source`` (e.g. from an app's ``ready()``); a source that raises is reported
#: as ``maascp_metrics_source_up{source=...} 0`` and the rest of the scrape still answers.
GAUGE_SOURCES: list[tuple[str, GaugeSource]] = []


def register_gauge_source(name: str, source: GaugeSource) -> None:
    global GAUGE_SOURCES
    GAUGE_SOURCES = [(n, s) for n, s in GAUGE_SOURCES if n != name] + [(name, source)]


def open_drift_family(counts: Mapping[tuple[str, str], int]) -> GaugeMetricFamily:
    """Open drift by kind and severity, from ``{(kind, severity): n}`` counts the
    reconciliation app computes with a constant number of queries."""
    family = GaugeMetricFamily(
        OPEN_DRIFT, "Active (not cleared or resolved) drift records", labels=["kind", "severity"]
    )
    for (kind, severity), n in sorted(counts.items()):
        family.add_metric([str(kind), str(severity)], n)
    return family

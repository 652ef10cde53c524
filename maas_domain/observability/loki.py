"""A logging handler pushing the JSON log lines to Loki directly (``MAASCP_LOKI_URL``).

Meant for deployments without a log agent; with one (Grafana Alloy, promtail), leave the URL
unset and let the agent tail stdout (docs/observability.md). Records are queued (bounded) and
pushed in batches by a background thread, so logging never waits for Loki: when the queue is
full, or Loki refuses or cannot be reached, records are dropped and counted
(``maascp_log_records_dropped_total{reason}``), never retried forever, never raised.

Stream labels are the configured static labels plus a few low-cardinality fields: ``level``,
``logger``, ``site_id`` and ``workflow_kind`` when the record has them. Ids (correlation id,
onboarding/decommission id, node id, MAAS system id, hostname) stay inside the JSON line and
travel as Loki *structured metadata* (the third element of a value in the push API: indexed
per line, filterable without parsing, no new stream), because a label value per id would create
one Loki stream per id. ``push`` sends entries built elsewhere the same way: timeline entries and
MAAS events (``manage.py export_timelines --to-loki``, workflows/archive.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import requests

from maas_domain.logging import context_of

BATCH = 500  # records per push
FLUSH_SECONDS = 1.0  # longest a record waits in the queue before a push
QUEUE_SIZE = 10_000
TIMEOUT = (2.0, 5.0)
# stream labels, time in ns, the JSON line, structured metadata (ids; may be empty)
Entry = tuple[dict[str, str], str, str, dict[str, str]]
# The field that names a workflow of each kind (``<kind>_id``), by kind: filled as the kinds
# register (maas_domain/work.py), so a new kind's lines carry its label and id without a change
# here.
_KIND_FIELDS: dict[str, str] = {}
# What the operators correlate by (docs/observability.md): one value per request, workflow or
# machine, so structured metadata, never a label. ``site`` is the site's name; each kind's id
# field follows ``site_id``.
_METADATA_BEFORE = ("correlation_id", "site", "site_id")
_METADATA_AFTER = ("node_id", "maas_system_id", "hostname")
METADATA_FIELDS: tuple[str, ...] = _METADATA_BEFORE + _METADATA_AFTER


def register_kind(name: str) -> None:
    """A workflow kind's ``<name>_id`` becomes structured metadata and, when a line has it,
    the line's ``workflow_kind`` label."""
    global METADATA_FIELDS
    _KIND_FIELDS[f"{name}_id"] = name
    METADATA_FIELDS = _METADATA_BEFORE + tuple(_KIND_FIELDS) + _METADATA_AFTER


def structured_metadata(fields: Mapping[str, Any]) -> dict[str, str]:
    """The correlation fields of ``fields`` that are set, as Loki wants them: strings."""
    return {k: str(fields[k]) for k in METADATA_FIELDS if fields.get(k) not in (None, "")}


def push_body(entries: list[Entry]) -> str:
    """The Loki push API body (``POST /loki/api/v1/push``, JSON): entries grouped into streams
    by their labels; each value is ``[time in ns, line]`` plus the metadata object when set."""
    streams: dict[str, dict[str, Any]] = {}
    for labels, ts, line, metadata in entries:
        key = json.dumps(labels, sort_keys=True)
        stream = streams.setdefault(key, {"stream": labels, "values": []})
        stream["values"].append([ts, line, metadata] if metadata else [ts, line])
    return json.dumps({"streams": list(streams.values())})


def push(
    url: str,
    entries: list[Entry],
    *,
    tenant: str | None = None,
    session: requests.Session | None = None,
) -> int:
    """Send ``entries`` (in batches of ``BATCH``); returns how many Loki accepted. Raises
    ``requests.RequestException`` or ``LokiRefused`` for the caller to report: a command, not
    logging, where dropping silently would be wrong."""
    headers = {"Content-Type": "application/json"}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    sent = 0
    http = session or requests.Session()
    for start in range(0, len(entries), BATCH):
        chunk = entries[start : start + BATCH]
        response = http.post(url, data=push_body(chunk), headers=headers, timeout=TIMEOUT)
        if response.status_code >= 300:
            raise LokiRefused(f"Loki answered HTTP {response.status_code}: {response.text[:200]}")
        sent += len(chunk)
    return sent


class LokiRefused(Exception):
    pass


def stream_labels(record: logging.LogRecord, static: Mapping[str, str]) -> dict[str, str]:
    fields = context_of(record)
    labels = {**static, "level": record.levelname.lower(), "logger": record.name}
    site_id = getattr(record, "site_id", None) or fields.get("site_id")
    if site_id is not None:
        labels["site_id"] = str(site_id)
    for field, kind in _KIND_FIELDS.items():
        if fields.get(field) is not None or getattr(record, field, None) is not None:
            labels["workflow_kind"] = kind
    return labels


class LokiHandler(logging.Handler):
    def __init__(
        self,
        url: str,
        labels: Mapping[str, str] | None = None,
        tenant: str | None = None,
        *,
        queue_size: int = QUEUE_SIZE,
        batch: int = BATCH,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        super().__init__()
        self.url = url
        self.labels = {"app": "maascp", **dict(labels or {})}
        self.headers = {"Content-Type": "application/json"}
        if tenant:
            self.headers["X-Scope-OrgID"] = tenant
        self.queue_size = queue_size
        self.batch = batch
        self.flush_seconds = flush_seconds
        self.dropped = 0
        self._pid = -1
        self._queue: queue.Queue[Entry | None] = queue.Queue(1)
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._pending = 0
        self._last_warning = 0.0

    # -- producer side (any thread; never blocks, never raises) --------------------------------
    def handle(self, record: logging.LogRecord) -> bool:
        if threading.current_thread() is self._thread:
            return False  # the pusher's own HTTP library logging would feed back into Loki
        return super().handle(record)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._ensure_thread()
            entry = (
                stream_labels(record, self.labels),
                str(int(record.created * 1e9)),
                self.format(record),
                structured_metadata({**context_of(record), **vars(record)}),
            )
            with self._idle:
                self._pending += 1
            try:
                self._queue.put_nowait(entry)
            except queue.Full:
                with self._idle:
                    self._pending -= 1
                self._drop("queue_full", 1)
        except Exception:
            self.handleError(record)

    def _ensure_thread(self) -> None:
        # A forked process (Celery's pool) inherits the handler but not its thread: start anew.
        if self._pid == os.getpid() and self._thread is not None:
            return
        with self._idle:
            if self._pid == os.getpid() and self._thread is not None:
                return
            self._pid = os.getpid()
            self._pending = 0
            self._queue = queue.Queue(self.queue_size)
            self._thread = threading.Thread(target=self._run, name="loki-push", daemon=True)
            self._thread.start()

    # -- the pusher thread ---------------------------------------------------------------------
    def _run(self) -> None:
        q = self._queue
        session = requests.Session()
        while True:
            first = q.get()
            if first is None:
                return
            entries = [first]
            deadline = time.monotonic() + self.flush_seconds
            stop = False
            while len(entries) < self.batch:
                try:
                    item = q.get(timeout=max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                entries.append(item)
            self._push(session, entries)
            with self._idle:
                self._pending -= len(entries)
                self._idle.notify_all()
            if stop:
                return

    def _push(self, session: requests.Session, entries: list[Entry]) -> None:
        body = push_body(entries)
        try:
            response = session.post(self.url, data=body, headers=self.headers, timeout=TIMEOUT)
            if response.status_code >= 300:
                self._drop("refused", len(entries), f"HTTP {response.status_code}")
        except requests.RequestException as exc:
            self._drop("unreachable", len(entries), type(exc).__name__)

    def _drop(self, reason: str, count: int, detail: str = "") -> None:
        from maas_domain.observability import metrics

        self.dropped += count
        metrics.log_records_dropped(reason, count)
        now = time.monotonic()
        if now - self._last_warning > 60:  # stderr, not logging: that would feed back into us
            self._last_warning = now
            sys.stderr.write(f"loki log push: dropped {count} record(s): {reason} {detail}\n")

    # -- flushing --------------------------------------------------------------------------------
    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every queued record was pushed (or dropped), at most ``timeout`` seconds."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending <= 0, timeout=timeout)

    def close(self) -> None:
        if self._thread is not None and self._pid == os.getpid():
            self.flush(timeout=3.0)
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
            self._thread.join(timeout=3.0)
        super().close()

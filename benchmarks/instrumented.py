"""The project's Celery app with counters for the production-shaped benchmark
(``benchmarks/stack.py``): every worker process (prefork children included), beat and every
gunicorn worker (``benchmarks/gunicorn_conf.py``) counts the SQL statements it sends and the
Celery tasks it runs (and the statements each task name sent), and writes them with its CPU time
and peak RSS to ``MAASCP_BENCH_STATS`` when it exits. Product code is not touched; this module
is loaded with ``celery -A``.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from celery import signals

from config.celery import app

__all__ = ["app", "install"]

_lock = threading.Lock()
_stats: dict[str, Any] = {
    "statements": 0,
    "tasks": Counter(),
    "task_statements": Counter(),
    "cpu_at_start": 0.0,
}
_kind = ""
_running = threading.local()  # the task this thread runs, if any


def _count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    with _lock:
        _stats["statements"] += 1
        task = getattr(_running, "task", None)
        if task:
            _stats["task_statements"][task] += 1
        if os.environ.get("MAASCP_BENCH_SQL"):  # which statements: their first words, counted
            _stats.setdefault("sql", Counter())[" ".join(sql.split()[:8])[:120]] += 1
    return execute(sql, params, many, context)


def _on_connection(sender: Any, connection: Any, **_: Any) -> None:
    if _count not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count)


def install(kind: str) -> None:
    """Count this process's statements from now on, and write the stats at exit."""
    global _kind
    from django.db import connections
    from django.db.backends.signals import connection_created

    _kind = kind
    _stats["statements"] = 0
    _stats["tasks"] = Counter()
    _stats["task_statements"] = Counter()
    _stats["cpu_at_start"] = _cpu()
    connection_created.connect(_on_connection, weak=False)
    for conn in connections.all(initialized_only=True):
        _on_connection(None, conn)
    atexit.register(dump)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def dump() -> None:
    out = os.environ.get("MAASCP_BENCH_STATS")
    if not out or not _kind:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with _lock:
        body = {
            "kind": _kind,
            "pid": os.getpid(),
            "statements": _stats["statements"],
            "tasks": dict(_stats["tasks"]),
            "task_statements": dict(_stats["task_statements"]),
            # from when the process was ready: start-up imports are not per-node work
            "cpu_seconds": usage.ru_utime + usage.ru_stime - _stats["cpu_at_start"],
            "max_rss_kb": usage.ru_maxrss,
            "sql": dict(_stats.get("sql", {})),
        }
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{_kind}-{os.getpid()}.json").write_text(json.dumps(body))


@signals.worker_process_init.connect
def _child(**_: Any) -> None:
    install("worker")


@signals.worker_process_shutdown.connect
def _child_exit(**_: Any) -> None:
    dump()


@signals.worker_ready.connect
def _parent(**_: Any) -> None:
    install("worker-main")
    out = os.environ.get("MAASCP_BENCH_STATS")
    if out:  # the worker takes messages from now on (benchmarks/bench_fleet.py waits for it)
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"ready-{os.getpid()}").touch()


@signals.worker_shutdown.connect
def _parent_exit(**_: Any) -> None:
    dump()


@signals.beat_init.connect
def _beat(**_: Any) -> None:
    install("beat")


@signals.task_prerun.connect
def _task(sender: Any = None, **_: Any) -> None:
    if not _kind:  # the threads pool runs tasks in the main process
        install("worker-main")
    with _lock:
        _stats["tasks"][getattr(sender, "name", "?")] += 1
    _running.task = getattr(sender, "name", "?")


@signals.task_postrun.connect
def _task_done(**_: Any) -> None:
    _running.task = None

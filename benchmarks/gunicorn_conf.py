"""gunicorn settings for the production-shaped benchmark: each worker counts its SQL statements
and writes them with its CPU time when it exits (``benchmarks/instrumented.py``)."""

from __future__ import annotations

from typing import Any

from config.gunicorn import *  # noqa: F403 (the product's own settings first)


def post_worker_init(worker: Any) -> None:
    from benchmarks.instrumented import install

    install("web")


def worker_exit(server: Any, worker: Any) -> None:
    from benchmarks.instrumented import dump

    dump()

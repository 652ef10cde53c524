"""Which queues live workers serve: every worker writes a heartbeat naming its queues.

A Celery worker asked with ``inspect`` answers through a broadcast and a reply window (a second
or more, and nothing while a worker is busy starting): too slow for a health check or a metric
scrape. Instead each worker's main process writes, every ``MAASCP_WORKER_HEARTBEAT_SECONDS``,
one key of its own that lists the queues it consumes and expires after three intervals; readers
list the live keys. A worker stopped cleanly removes its key at once; one killed outright
disappears when its key expires.

Each value is signed with the deployment's key and stamped with its time (Django's
``signing``, salted for heartbeats): whoever can write the broker's Redis but does not hold
``MAASCP_SECRET_KEY`` cannot make an unserved region look served (a value without a valid
signature, for another name, or older than its TTL is not a heartbeat), and a malformed value
is skipped on its own: it hides no other worker, and no unserved region (docs/security.md, T26).

Where the keys live follows the broker (a worker always reaches its broker):

* Redis broker: ``maascp:worker:<name>`` (a JSON value with a TTL) and the sorted set
  ``maascp:workers`` of names seen in the last day, in the broker's Redis database;
* the embedded default's filesystem broker: one JSON file per worker under
  ``<data folder>/workers/`` with its expiry inside (the broker is a folder on this machine, so
  its workers are too).

docs/operations.md ("Regions") and docs/architecture.md ("Regions").
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from celery import bootsteps
from django.conf import settings
from django.core import signing

log = logging.getLogger("maas_domain.heartbeat")
KEY_PREFIX = "maascp:worker:"
INDEX = "maascp:workers"
FORGET_AFTER = 86400.0  # names not seen for a day leave the index
TTL_BEATS = 3  # a key outlives two missed beats


SALT = "maascp.heartbeat"


def signed(name: str, queues: list[str]) -> str:
    """A heartbeat's value: the worker's name and queues, signed and stamped now."""
    return signing.dumps({"name": name, "queues": queues, "pid": os.getpid()}, salt=SALT)


def verified(name: str, value: Any) -> list[str] | None:
    """The queues of a heartbeat ``value`` found under ``name``, or None when it is no valid
    heartbeat of that worker: unsigned, signed with another key, for another name, older than
    its TTL, or not the shape a worker writes."""
    try:
        text = value.decode() if isinstance(value, bytes) else str(value)
        data = signing.loads(text, salt=SALT, max_age=timedelta(seconds=ttl()))
        queues = data["queues"]
        if data["name"] != name or not all(isinstance(q, str) for q in queues):
            return None
        return list(queues)
    except (signing.BadSignature, UnicodeDecodeError, KeyError, TypeError, ValueError):
        return None


def interval() -> float:
    return float(settings.WORKER_HEARTBEAT_SECONDS)


def ttl() -> float:
    return interval() * TTL_BEATS


class Store(Protocol):
    def beat(self, name: str, queues: list[str], ttl: float) -> None: ...

    def forget(self, name: str) -> None: ...

    def live(self) -> dict[str, list[str]]:
        """Live workers and the queues each consumes."""
        ...


class RedisStore:
    def __init__(self, url: str) -> None:
        import redis

        self.redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)

    def beat(self, name: str, queues: list[str], ttl: float) -> None:
        now = time.time()
        value = signed(name, queues)
        pipe = self.redis.pipeline()
        pipe.set(KEY_PREFIX + name, value, px=max(int(ttl * 1000), 1))
        pipe.zadd(INDEX, {name: now})
        pipe.zremrangebyscore(INDEX, "-inf", now - FORGET_AFTER)
        pipe.execute()

    def forget(self, name: str) -> None:
        pipe = self.redis.pipeline()
        pipe.delete(KEY_PREFIX + name)
        pipe.zrem(INDEX, name)
        pipe.execute()

    def live(self) -> dict[str, list[str]]:
        found: list[Any] = self.redis.zrange(INDEX, 0, -1)
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in found]
        if not names:
            return {}
        values = self.redis.mget([KEY_PREFIX + n for n in names])
        return _valid(dict(zip(names, values, strict=True)))


class FolderStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, name: str) -> Path:
        return self.folder / (re.sub(r"[^A-Za-z0-9@._-]", "_", name) + ".json")

    def beat(self, name: str, queues: list[str], ttl: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(name)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(
            json.dumps({"name": name, "value": signed(name, queues), "expires": time.time() + ttl})
        )
        os.replace(tmp, path)

    def forget(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

    def live(self) -> dict[str, list[str]]:
        now = time.time()
        found: dict[str, Any] = {}
        for path in self.folder.glob("*.json") if self.folder.is_dir() else ():
            try:
                data = json.loads(path.read_text())
                expires, name = float(data["expires"]), str(data["name"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being replaced, removed meanwhile, or not a heartbeat file
            if expires > now:
                found[name] = data.get("value")
            elif expires < now - FORGET_AFTER:
                path.unlink(missing_ok=True)
        return _valid(found)


def _valid(values: dict[str, Any]) -> dict[str, list[str]]:
    """The live workers among stored values, each judged on its own (``verified``): one that
    is not a heartbeat is left out and said so, and hides nothing else."""
    found: dict[str, list[str]] = {}
    for name, value in values.items():
        if value is None:
            continue  # expired
        if (queues := verified(name, value)) is None:
            log.warning("worker heartbeat %r is not valid (unsigned, stale or malformed)", name)
            continue
        found[name] = queues
    return found


_stores: dict[str, Store] = {}


def store() -> Store:
    """The store of the broker this process uses (one per broker URL: tests change it)."""
    url = str(settings.CELERY_BROKER_URL or "")
    key = url if url.startswith("redis") else f"folder:{settings.DATA_DIR}"
    if key not in _stores:
        folder = settings.DATA_DIR / "workers"
        _stores[key] = RedisStore(url) if url.startswith("redis") else FolderStore(folder)
    return _stores[key]


def live_queues() -> dict[str, int]:
    """How many live workers consume each queue. Raises when the store cannot be read."""
    counts: dict[str, int] = {}
    for queues in store().live().values():
        for queue in set(queues):
            counts[queue] = counts.get(queue, 0) + 1
    return counts


class Heartbeat(bootsteps.StartStopStep):
    """A consumer bootstep (``config/celery.py`` adds it): a thread of the worker's main process
    beats while the consumer runs; a clean shutdown forgets the worker at once."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.worker = f"{parent.hostname}.{os.getpid()}"

    def _queues(self, consumer: Any) -> list[str]:
        task_consumer = getattr(consumer, "task_consumer", None)
        if task_consumer is not None:
            return sorted(q.name for q in task_consumer.queues)
        return sorted(consumer.app.amqp.queues.consume_from)

    def start(self, parent: Any) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        self.stopping.clear()

        def run() -> None:
            failing = False
            while True:
                try:
                    store().beat(self.worker, self._queues(parent), ttl())
                    failing = False
                except Exception as exc:
                    if not failing:  # once per outage, not every beat
                        log.warning("worker heartbeat not written: %s", exc)
                    failing = True
                if self.stopping.wait(interval()):
                    return

        self.thread = threading.Thread(target=run, name="maascp-heartbeat", daemon=True)
        self.thread.start()

    def stop(self, parent: Any) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
            self.thread = None

    def shutdown(self, parent: Any) -> None:
        self.stop(parent)
        try:
            store().forget(self.worker)
        except Exception as exc:
            log.warning("worker heartbeat not removed (it expires): %s", exc)

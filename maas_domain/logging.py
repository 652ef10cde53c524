"""JSON-lines logging with the request/task context attached to every record."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from maas_domain import context

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _attach(record: logging.LogRecord) -> None:
    if getattr(record, "correlation_id", None) is None:
        record.correlation_id = context.correlation_id.get()
    for key, value in (context.log_fields.get() or {}).items():
        if not hasattr(record, key):
            setattr(record, key, value)


def install_record_factory() -> None:
    """Attach the context to every record when it is created, whatever handlers (or a
    library that reconfigures logging) do later."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_maascp", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _attach(record)
        return record

    factory._maascp = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        _attach(record)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and value is not None and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)

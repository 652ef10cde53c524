"""JSON-lines logging with the request/task context attached to every record."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from maas_domain import context
from maas_domain.redaction import REDACTED, is_secret_name, redact_text

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


CONTEXT_ATTR = "maascp_context"


def _snapshot() -> dict[str, Any]:
    fields = {"correlation_id": context.correlation_id.get(), **(context.log_fields.get() or {})}
    return {k: v for k, v in fields.items() if v is not None}


def install_record_factory() -> None:
    """Snapshot the context onto every record when it is created (in the thread and task that
    logged it), in one attribute, so it never collides with a caller's ``extra`` fields and
    survives whatever handlers a library installs later."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_maascp", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        setattr(record, CONTEXT_ATTR, _snapshot())
        return record

    factory._maascp = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def context_of(record: logging.LogRecord) -> dict[str, Any]:
    """The context a record was logged in (explicit ``extra`` fields win)."""
    merged = dict(getattr(record, CONTEXT_ATTR, None) or _snapshot())
    merged.update({k: getattr(record, k) for k in merged if getattr(record, k, None) is not None})
    return merged


class ContextFilter(logging.Filter):
    """Expose the context as record attributes for handlers that read them."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in context_of(record).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class RedactFilter(logging.Filter):
    """On every handler (docs/security.md): blank secret shapes in the message, in string
    ``extra`` fields (a secret-named field is blanked whole) and in the traceback, before any
    handler formats the record. Idempotent, so a record seen by several handlers is fine."""

    _plain = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "_maascp_redacted", False):
            record.msg = redact_text(record.getMessage())
            record.args = None
            for key, value in list(vars(record).items()):
                if key in _STANDARD or key == CONTEXT_ATTR or key.startswith("_"):
                    continue
                if is_secret_name(key) and value not in (None, ""):
                    setattr(record, key, REDACTED)
                elif isinstance(value, str):
                    setattr(record, key, redact_text(value))
            if record.exc_info:
                record.exc_text = self._plain.formatException(record.exc_info)
                record.exc_info = None
            if record.exc_text:
                record.exc_text = redact_text(record.exc_text)
            if record.stack_info:
                record.stack_info = redact_text(record.stack_info)
            record._maascp_redacted = True
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
            skip = key in _STANDARD or key == CONTEXT_ATTR or key.startswith("_")
            if not skip and value is not None:
                payload[key] = value
        for key, value in context_of(record).items():
            payload.setdefault(key, value)
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            payload["exc"] = record.exc_text
        return json.dumps(payload, default=str)

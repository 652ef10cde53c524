"""MAAS errors as a small typed hierarchy. Classification happens here and only here.

Retry decisions everywhere else read the *type*, never a status code:

* ``MaasTransient``: connection errors, timeouts, 502/503/504, and 409 *with* Retry-After (a
  region-side DB conflict). Safe reads are retried; a mutation is never resent blindly:
  ``maybe_applied`` says whether the request may have reached MAAS, so the caller re-reads the
  machine and decides.
* ``MaasStateConflict``: 409 without Retry-After (NodeStateViolation): re-read, do not resend.
* ``MaasNotFound`` (404), ``MaasAuthError`` (401/403), ``MaasBadRequest`` (400, with MAAS's
  field errors kept), ``MaasServerError`` (500 and anything else unexpected).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any


class MaasError(Exception):
    kind = "error"

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        status: int | None = None,
        system_id: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.status = status
        self.system_id = system_id


class MaasTransient(MaasError):
    kind = "transient"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        maybe_applied: bool = True,
        **kw: object,
    ) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after
        self.maybe_applied = maybe_applied


class MaasStateConflict(MaasError):
    kind = "conflict"


class MaasNotFound(MaasError):
    kind = "not_found"


class MaasAuthError(MaasError):
    kind = "auth"


class MaasBadRequest(MaasError):
    kind = "bad_request"

    def __init__(self, message: str, *, field_errors: dict[str, list[str]], **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.field_errors = field_errors


class MaasServerError(MaasError):
    kind = "server_error"


_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


def excerpt(text: str, limit: int) -> str:
    """What may be kept of a server's answer: printable ASCII, whitespace collapsed, at most
    ``limit`` characters (an answer can be anything: HTML, escape sequences, a whole page)."""
    flat = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None  # an HTTP-date: treat as "no hint"


def classify(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    operation: str,
    system_id: str = "",
) -> MaasError:
    """Turn a non-2xx MAAS answer into its error class."""
    text = body.decode("utf-8", "replace").strip()
    short = excerpt(text, 300)
    common: dict[str, Any] = {"operation": operation, "status": status, "system_id": system_id}
    retry_after = retry_after_seconds(headers)
    if status in (502, 503, 504) or (status == 409 and retry_after is not None):
        # MAAS sends Retry-After only from its middleware, for errors raised inside the request's
        # transaction (rack unreachable by RPC, DB conflict), which is rolled back: not applied.
        # A PowerProblem (no rack can reach the BMC) comes without it, after the commit: the
        # recorded MAAS 3.5.10 kept the machine such a create made (docs/maas-api.md §11).
        return MaasTransient(
            f"MAAS answered {status} to {operation}: {short[:200]}",
            retry_after=retry_after,
            maybe_applied=retry_after is None,
            **common,
        )
    if status == 409:
        return MaasStateConflict(short or "state conflict", **common)
    if status == 404:
        return MaasNotFound(short or "not found", **common)
    if status in (401, 403):
        return MaasAuthError(short or f"HTTP {status}", **common)
    if status == 400:
        fields: dict[str, list[str]] = {}
        if headers.get("Content-Type", "").startswith("application/json"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                fields = {
                    str(k): [str(m) for m in (v if isinstance(v, list) else [v])]
                    for k, v in parsed.items()
                }
        message = "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()) if fields else short
        return MaasBadRequest(message, field_errors=fields, **common)
    return MaasServerError(f"MAAS answered {status} to {operation}: {short[:200]}", **common)

"""The HTTP client: one session; the API's error body turned into an exception with an exit code
and a message that says what failed and where (docs/cli.md, "Errors" and "Exit codes").

A 429 is waited out (the server's ``Retry-After``) and the request sent again when repeating it
is safe: a GET, a request with an ``Idempotency-Key``, a dry run. At most ``RETRIES`` times and
never longer than ``MAX_WAIT`` seconds a wait; otherwise it is exit code 6 with the wait the
server asked for.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from maasctl import output
from maasctl.config import Settings

USAGE, CONFLICT, NOT_FOUND, SERVER, RATE_LIMITED = 2, 3, 4, 5, 6
RETRIES = 3
MAX_WAIT = 60.0  # the server's mutation window is a minute (docs/api.md)
SAFE_METHODS = ("GET", "HEAD")
IDEMPOTENCY_KEY = "Idempotency-Key"


class ApiError(Exception):
    """An answer other than 2xx, or no answer at all. ``exit_code`` follows docs/cli.md."""

    def __init__(self, status: int | None, body: dict[str, Any], message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.message = message

    @property
    def exit_code(self) -> int:
        if self.status is None or self.status >= 500:
            return SERVER
        if self.status == 404:
            return NOT_FOUND
        if self.status == 409:
            return CONFLICT
        if self.status == 429:
            return RATE_LIMITED
        return USAGE


@dataclass(frozen=True)
class Page:
    """Some or all entries of a list, and how many the server has."""

    items: list[dict[str, Any]]
    total: int


def retry_after(response: requests.Response) -> float | None:
    """The seconds a 429 asks to wait (``Retry-After``: seconds or an HTTP date)."""
    raw = response.headers.get("Retry-After", "").strip()
    if not raw:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything it wraps (requests → urllib3 → the socket error)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        inner = [current.__cause__, current.__context__, getattr(current, "reason", None)]
        inner += [a for a in current.args if isinstance(a, BaseException)]
        todo += [e for e in inner if isinstance(e, BaseException)]


# failures before the request left (NameResolutionError is a NewConnectionError)
_CONNECTING = (NewConnectionError, ConnectTimeoutError)
_ERRNO = {
    errno.ECONNREFUSED: "connection refused (nothing listens there)",
    errno.ECONNRESET: "connection reset",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "connection timed out",
}


def network_reason(exc: requests.RequestException, timeout: float) -> str:
    """Why a request got no answer, in words (not only "ConnectionError")."""
    if isinstance(exc, requests.ConnectTimeout):
        return f"no connection within {timeout:g} s"
    if isinstance(exc, requests.ReadTimeout):
        return f"no answer within {timeout:g} s"
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            return "host not found (DNS)"
        if isinstance(cause, OSError) and cause.errno in _ERRNO:
            return _ERRNO[cause.errno]
    if isinstance(exc, requests.exceptions.SSLError):
        return f"TLS failed: {_innermost(exc)}"
    return _innermost(exc)


def _innermost(exc: BaseException) -> str:
    last = list(_causes(exc))[-1]
    return f"{type(last).__name__}: {last}"[:300]


class Api:
    sleep = staticmethod(time.sleep)  # tests replace it

    def __init__(self, settings: Settings) -> None:
        self.base = settings.url + "/api/v1/admin"
        self.origin = settings.url
        self.timeout = settings.timeout
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {settings.token}"
        self.session.headers["User-Agent"] = "maasctl"
        self.replayed = False  # the last answer was replayed under its Idempotency-Key

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        url = self.base + path
        query = {k: v for k, v in (params or {}).items() if v not in (None, "")}
        repeatable = (
            method in SAFE_METHODS
            or IDEMPOTENCY_KEY in (headers or {})
            or query.get("dry_run") == "true"
        )
        retried = 0
        while True:
            try:
                response = self.session.request(
                    method, url, json=body, params=query, headers=headers, timeout=self.timeout
                )
            except requests.RequestException as exc:
                raise self._no_answer(method, url, exc) from None
            if response.status_code != 429:
                self.replayed = response.headers.get("Idempotent-Replayed") == "true"
                break
            wait = retry_after(response)
            if not repeatable or retried >= RETRIES or wait is None or wait > MAX_WAIT:
                raise self._refused(method, response, retried=retried, repeatable=repeatable)
            retried += 1
            output.warn(
                f"maasctl: {urlsplit(url).netloc} answered 429 (too many requests) to "
                f"{method} {urlsplit(url).path}; waiting {wait:g} s as it asks "
                f"(retry {retried} of {RETRIES})"
            )
            self.sleep(wait)
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = {"error": "not_json", "detail": response.text[:200].strip()}
        if response.status_code >= 300:
            raise self._refused(method, response, retried=retried, repeatable=repeatable, data=data)
        return data

    def _where(self, method: str, url: str) -> str:
        return f"{method} {output.clean(url)}"

    def _no_answer(self, method: str, url: str, exc: requests.RequestException) -> ApiError:
        reason = network_reason(exc, self.timeout)
        if any(isinstance(c, _CONNECTING) for c in _causes(exc)):  # nothing was sent
            where = self._where(method, url)
            return ApiError(None, {}, f"cannot reach {self.origin} ({where}): {reason}")
        maybe = "" if method in SAFE_METHODS else "; it may have been applied: look before retrying"
        return ApiError(None, {}, f"{self._where(method, url)}: {reason}{maybe}")

    def _refused(
        self,
        method: str,
        response: requests.Response,
        *,
        retried: int,
        repeatable: bool,
        data: Any = None,
    ) -> ApiError:
        if data is None:
            try:
                data = response.json()
            except ValueError:
                data = {}
        body = data if isinstance(data, dict) else {}
        status = response.status_code
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = response.reason or ""
        detail = body.get("detail") or response.reason or ""
        message = (
            f"{status} {phrase} from {self._where(method, response.url)}: {output.clean(detail)}"
        )
        if status == 429:
            wait = retry_after(response)
            asked = f"the server asks to wait {wait:g} s" if wait is not None else "try later"
            if retried:
                message += f" ({asked}; gave up after {retried} retries)"
            elif not repeatable:
                message += f" ({asked}; not retried: this request is not safe to repeat blindly)"
            else:
                message += f" ({asked}; longer than maasctl waits, {MAX_WAIT:g} s)"
        return ApiError(status, body, message)

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def pages(self, path: str, *, limit: int | None, **params: Any) -> Page:
        """Up to ``limit`` items of a list (every item with None), following pages."""
        items: list[dict[str, Any]] = []
        offset, total = 0, 0
        while limit is None or len(items) < limit:
            size = 500 if limit is None else min(500, limit - len(items))
            page = self.get(path, limit=size, offset=offset, **params)
            items += page["results"]
            total = int(page.get("count", len(items)))
            if not page.get("next") or not page["results"]:
                break
            offset += len(page["results"])
        return Page(items, max(total, len(items)))

    def latest(self, path: str, *, limit: int | None, **params: Any) -> Timeline:
        """The latest ``limit`` entries of a timeline (every entry with None), oldest first,
        whichever order the server pages them in (docs/cli.md, "Timelines")."""
        first = self.get(path, limit=min(limit or 500, 500), offset=0, **params)
        total = int(first["count"])
        entries: list[dict[str, Any]] = first["results"]
        if total > len(entries) and entries:
            if limit is None or limit > len(entries):
                entries = self.pages(path, limit=None, **params).items
            else:  # the other end: the server may page oldest first or newest first
                offset = max(total - limit, 0)
                other = self.get(path, limit=limit, offset=offset, **params)["results"]
                if other and max(map(_moment, other)) > max(map(_moment, entries)):
                    entries = other
        entries = oldest_first(entries)
        return Timeline(entries if limit is None else entries[-limit:], total, first)


@dataclass(frozen=True)
class Timeline:
    entries: list[dict[str, Any]]  # oldest first
    total: int
    first_page: dict[str, Any]  # what else the server said (e.g. ``maas_events``)


def _moment(entry: dict[str, Any]) -> datetime:
    try:
        moment = datetime.fromisoformat(str(entry.get("at")))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def oldest_first(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries by time, oldest first; entries of one instant keep their order (reversed first
    when the server sent them newest first)."""
    if len(entries) > 1 and _moment(entries[0]) > _moment(entries[-1]):
        entries = entries[::-1]
    return sorted(entries, key=_moment)

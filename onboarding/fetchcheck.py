"""Can a node fetch this URL? The preflight's check of the bootstrap endpoint, the node-agent
script and the site bundle (docs/security.md): no redirect is followed (a redirect is reported
with where it points), at most ``CAP`` bytes of a body are read (HEAD first; GET only when HEAD
is not allowed), every request has connect/read timeouts and an overall deadline, and
link-local or metadata targets are refused unless the deployment allows them.

A URL that answered is remembered per process for ``FETCHABLE_SECONDS``: a batch's preflights
check the same bootstrap endpoint, agent script and bundle, and the first two are the control
plane's own node routes, throttled per source address (``MAASCP_NODE_REQUESTS_PER_MINUTE``), so
a 1,000-node batch from one worker host would otherwise throttle itself and fail its own
preflights. A failure is never remembered: the next preflight checks again."""

from __future__ import annotations

import hashlib
import tempfile
import threading
import time
from urllib.parse import urlsplit

import requests

from maas_domain import urlsafety

CAP = 64 << 10
TIMEOUT = (3.0, 5.0)
DEADLINE = 10.0
FETCHABLE_SECONDS = 60.0

_lock = threading.Lock()
_fetchable_until: dict[str, float] = {}


# What may pass by itself: no answer in time, no connection (the control plane or the bundle host
# restarting or overloaded), or an answer that says "later". Anything else is an answer.
TRANSIENT = frozenset(
    {"ConnectTimeout", "ReadTimeout", "Timeout", "ConnectionError", "HTTP 429", "HTTP 502",
     "HTTP 503", "HTTP 504"}
)  # fmt: skip


def forget() -> None:
    """Drop what this process remembers (tests; a URL's answer may change between them)."""
    with _lock:
        _fetchable_until.clear()


def fetch_problem(url: str, *, ca_pem: str = "") -> str:
    """'' when the URL answers below 300; otherwise why not (a short sentence). ``ca_pem``: the
    CA bundle the node trusts for it, as its curl does (``--cacert``: that bundle only); empty:
    the system's CAs."""
    now = time.monotonic()
    key = f"{url} {hashlib.sha256(ca_pem.encode()).hexdigest()}"
    with _lock:
        if _fetchable_until.get(key, 0.0) > now:
            return ""
    problem = _check(url, _ca_file(ca_pem) if ca_pem.strip() else True)
    if not problem:
        with _lock:
            if len(_fetchable_until) > 1000:
                _fetchable_until.clear()
            _fetchable_until[key] = now + FETCHABLE_SECONDS
    return problem


_ca_files: dict[str, str] = {}


def _ca_file(pem: str) -> str:
    """A file holding ``pem`` (requests verifies against a path), one per bundle per process."""
    with _lock:
        if pem not in _ca_files:
            with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
                f.write(pem)
            _ca_files[pem] = f.name
        return _ca_files[pem]


def _check(url: str, verify: str | bool = True) -> str:
    parts = urlsplit(url)
    if problem := urlsafety.resolved_problem(parts.hostname or "", parts.port):
        return f"refused: {problem}"
    started = time.monotonic()
    try:
        with requests.Session() as session:
            response = session.head(url, timeout=TIMEOUT, allow_redirects=False, verify=verify)
            if response.status_code == 405:
                response = session.get(
                    url, timeout=TIMEOUT, allow_redirects=False, stream=True, verify=verify
                )
                read = 0
                try:
                    for chunk in response.iter_content(8192):
                        read += len(chunk)
                        if read >= CAP or time.monotonic() - started > DEADLINE:
                            break
                finally:
                    response.close()
    except requests.RequestException as exc:
        return type(exc).__name__
    status = response.status_code
    if 300 <= status < 400:
        where = urlsafety.display(response.headers.get("Location", "?"))
        return f"HTTP {status} redirects to {where}; redirects are not followed"
    return "" if status < 300 else f"HTTP {status}"

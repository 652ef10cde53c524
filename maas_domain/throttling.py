"""Rate limits on every door (docs/security.md): fixed windows counted in the cache (Redis in
production, so every web process shares them).

* API mutations (POST/PUT/PATCH/DELETE): per token (per user for a session),
  ``MAASCP_API_MUTATIONS_PER_MINUTE``; 429 with ``Retry-After`` (``MutationThrottle``); dry
  runs are counted apart, against the same number;
* node-facing endpoints: every request per source address (``NodeAddressThrottle``,
  ``MAASCP_NODE_REQUESTS_PER_MINUTE``); and *refusals only*, per (onboarding, source address)
  (``refused``, ``MAASCP_NODE_REFUSALS_PER_MINUTE``): the token is checked first, so a valid
  token is never held back by anybody else's failures;
* admin login: after ``MAASCP_ADMIN_LOGIN_FAILURES`` failures per address or user name in 15
  minutes, the login answers 429 until the window ends (``maas_domain/admin_site.py``).

The cache down or hung (its timeouts: ``config/settings.py``) is ``CacheUnavailable``, a 503
naming the ``cache``: a limit that cannot be counted is not silently dropped for a request that
changes something (its work would need the broker, the same Redis in production, anyway). Node
reads (``GET``/``HEAD``: the health route, the agent script) are served uncounted meanwhile, as
the admin reads, which no limit counts, are.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from redis.exceptions import RedisError
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from maas_domain import dryrun
from maas_domain.errors import CacheUnavailable
from maas_domain.observability import metrics

_PREFIX = "maascp:throttle"
log = logging.getLogger(__name__)
# what the cache backends raise when their store is gone: Redis's errors (a refused or reset
# connection, a timeout, a server still loading), the file cache's OSError
_CACHE_ERRORS = (RedisError, OSError)


def _key(limit: str, ident: str, period: int) -> tuple[str, int]:
    window = int(time.time()) // period
    return f"{_PREFIX}:{limit}:{ident}:{window}", period - int(time.time()) % period


def count(limit: str, ident: str, *, period: int) -> int:
    """This window's count for (limit, ident), after adding one (``CacheUnavailable``: the cache
    is down or hung)."""
    key, left = _key(limit, ident, period)
    try:
        cache.add(key, 0, timeout=period + 1)
        try:
            return int(cache.incr(key))
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=left + 1)
            return 1
    except _CACHE_ERRORS as exc:
        raise _unavailable(exc) from exc


def peek(limit: str, ident: str, *, period: int) -> int:
    key, _ = _key(limit, ident, period)
    try:
        return int(cache.get(key) or 0)
    except _CACHE_ERRORS as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: Exception) -> CacheUnavailable:
    log.warning("rate-limit cache unavailable: %s", type(exc).__name__)
    return CacheUnavailable(exc)


def retry_after(period: int) -> int:
    return max(period - int(time.time()) % period, 1)


def over(limit: str, ident: str, *, allowed: int, period: int = 60) -> int | None:
    """Count one request; the seconds to wait when over ``allowed`` in the window, else None."""
    if count(limit, ident, period=period) <= allowed:
        return None
    metrics.throttled(limit)
    return retry_after(period)


def caller(request: Any) -> str:
    """Who a per-caller limit counts: the bearer token, else the user (a session)."""
    token = getattr(getattr(request, "auth", None), "pk", None)
    return f"token-{token}" if token else f"user-{getattr(request.user, 'pk', None)}"


def client_address(request: Any) -> str:
    """The address a request came from: the peer, or, when the peer is one of our own proxies
    (``MAASCP_TRUSTED_PROXIES``, the buffering proxy of docs/operations.md), the last address
    in ``X-Forwarded-For`` that is not one of them. Nobody else's header is believed."""
    peer = str(request.META.get("REMOTE_ADDR") or "unknown")
    if not _trusted(peer):
        return peer
    hops = [h.strip() for h in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    for hop in reversed([h for h in hops if h]):
        if not _trusted(hop):
            return hop
    return peer


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in settings.TRUSTED_PROXIES if ip.version == net.version)


class MutationThrottle(BaseThrottle):
    """Per-token (else per-user) limit on the API's state-changing methods."""

    def __init__(self) -> None:
        self.wait_seconds: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        if not request.user.is_authenticated:
            # anonymous callers reach only the node routes, which have limits of their own
            # (per source address and per onboarding): one shared bucket would hold a whole
            # fleet enrolling at once to this limit
            return True
        ident = caller(request)
        # a dry run changes nothing: it has its own bucket of the same size and never uses up
        # the mutations an operator is about to make
        limit = "api_dry_runs" if dryrun.active() else "api_mutations"
        self.wait_seconds = over(limit, ident, allowed=settings.API_MUTATIONS_PER_MINUTE)
        return self.wait_seconds is None

    def wait(self) -> float | None:
        return self.wait_seconds


class NodeAddressThrottle(BaseThrottle):
    """Every node-facing route: at most ``MAASCP_NODE_REQUESTS_PER_MINUTE`` requests per source
    address (one node cannot flood the others' listener)."""

    def __init__(self) -> None:
        self.wait_seconds: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        try:
            self.wait_seconds = over(
                "node_address", client_address(request), allowed=settings.NODE_REQUESTS_PER_MINUTE
            )
        except CacheUnavailable:
            if request.method in ("GET", "HEAD"):
                return True  # a read needs no Redis: served uncounted (the docstring above)
            raise
        if self.wait_seconds is not None:
            metrics.node_refused(_endpoint(request), "throttled")
        return self.wait_seconds is None

    def wait(self) -> float | None:
        return self.wait_seconds


def _endpoint(request: Any) -> str:
    match = getattr(request, "resolver_match", None)
    return str(getattr(match, "url_name", "") or "node").removeprefix("node-")


def refused(request: Any, onboarding_id: int) -> None:
    """Called after a node request was refused (a wrong, stale or replayed token): counts the
    refusal for (onboarding, source address); past ``MAASCP_NODE_REFUSALS_PER_MINUTE`` the
    answer becomes a 429. Only refusals are counted, after the token check: a node with a
    valid token is never throttled by other addresses' failures."""
    wait = over(
        "node_refusals",
        f"{onboarding_id}@{client_address(request)}",
        allowed=settings.NODE_REFUSALS_PER_MINUTE,
    )
    if wait is not None:
        metrics.node_refused(_endpoint(request), "throttled")
        raise Throttled(wait=wait)

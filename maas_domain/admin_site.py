"""The admin site: Django's, with the login throttled after repeated failures and user, group
and periodic-task changes audited (docs/security.md).

After ``MAASCP_ADMIN_LOGIN_FAILURES`` failed logins for one user name from one address within
15 minutes, that address may not try that name again until the window ends (429 with
``Retry-After``, the right password included); after ``MAASCP_ADMIN_LOGIN_FAILURES_PER_ADDRESS``
failures from one address, whatever the names, the address may not try any. A user name is never
locked as such: failures from somewhere else do not keep its owner out. With the counters' cache
down, a login attempt is a 503 (it could not be counted), never an uncounted try.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from maas_domain import throttling
from maas_domain.errors import CacheUnavailable
from maas_domain.observability import metrics

WINDOW = 15 * 60


def _limits(request: HttpRequest, username: str) -> list[tuple[str, int]]:
    """(counter, its limit): the (address, user name) pair, and the address alone."""
    address = throttling.client_address(request)
    return [
        (f"pair-{address}-{username.lower()[:150]}", settings.ADMIN_LOGIN_FAILURES),
        (f"addr-{address}", settings.ADMIN_LOGIN_FAILURES_PER_ADDRESS),
    ]


@receiver(user_login_failed)
def _count_failure(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any) -> None:
    if request is None:
        return
    try:
        for ident, _limit in _limits(request, str(credentials.get("username", ""))):
            throttling.count("admin_login", ident, period=WINDOW)
    except CacheUnavailable:
        pass  # the cache went away after the login's own check: the attempt is refused anyway


class ControlPlaneAdminSite(admin.AdminSite):
    """Django's admin site, opening on the fleet page (docs/admin.md, "The fleet page"): per
    site, the counts an operator scans first, each a link to its filtered list; Django's list
    of pages follows it."""

    site_header = "MAAS control plane"
    index_title = "Fleet"
    # Django's app list down the left of every page took 300 of 1440 px from every table; the
    # fleet page lists the pages instead (docs/admin.md, "Layout").
    enable_nav_sidebar = False
    index_template = "admin/fleet.html"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        from maas_domain import fleet
        from maas_domain.access import Action, allowed
        from maas_domain.admin_common import health_badge

        extra = dict(extra_context or {})
        if allowed(request.user, Action.READ):  # the counts are a read of every list
            found = fleet.fleet()
            for row in found["rows"]:
                row["health"] = health_badge(row["site"].health)
            extra["fleet"] = found
        return super().index(request, extra)

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method == "POST":
            username = str(request.POST.get("username", ""))
            try:
                over = any(
                    throttling.peek("admin_login", ident, period=WINDOW) >= limit
                    for ident, limit in _limits(request, username)
                )
            except CacheUnavailable as exc:  # failures cannot be counted: no login attempt
                return HttpResponse(
                    exc.message + "\n",
                    status=503,
                    content_type="text/plain",
                    headers={"Retry-After": str(exc.retry_after)},
                )
            if over:
                metrics.throttled("admin_login")
                return HttpResponse(
                    "Too many failed logins; try again later.\n",
                    status=429,
                    content_type="text/plain",
                    headers={"Retry-After": str(throttling.retry_after(WINDOW))},
                )
        return super().login(request, extra_context)

"""The admin site: Django's, with the login throttled after repeated failures and user, group
and periodic-task changes audited (docs/security.md).

After ``MAASCP_ADMIN_LOGIN_FAILURES`` failed logins from one address, or for one user name,
within 15 minutes, the login page answers 429 (with ``Retry-After``) to every attempt from that
address or for that name until the window ends, the right password included.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from maas_domain import throttling
from maas_domain.observability import metrics

WINDOW = 15 * 60


def _idents(request: HttpRequest, username: str) -> list[str]:
    return [f"addr-{throttling.client_address(request)}", f"user-{username.lower()[:150]}"]


@receiver(user_login_failed)
def _count_failure(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any) -> None:
    if request is None:
        return
    for ident in _idents(request, str(credentials.get("username", ""))):
        throttling.count("admin_login", ident, period=WINDOW)


class ControlPlaneAdminSite(admin.AdminSite):
    site_header = "MAAS control plane"

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method == "POST":
            username = str(request.POST.get("username", ""))
            limit = settings.ADMIN_LOGIN_FAILURES
            if any(
                throttling.peek("admin_login", i, period=WINDOW) >= limit
                for i in _idents(request, username)
            ):
                metrics.throttled("admin_login")
                return HttpResponse(
                    "Too many failed logins; try again later.\n",
                    status=429,
                    content_type="text/plain",
                    headers={"Retry-After": str(throttling.retry_after(WINDOW))},
                )
        return super().login(request, extra_context)

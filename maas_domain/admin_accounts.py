"""Admin pages for the audit log and API tokens (docs/admin.md)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.access import ALLOWS, Action, allowed
from maas_domain.admin_common import (
    ReadOnlyAdmin,
    reason_step,
)
from maas_domain.errors import DomainError
from maas_domain.humanize import humanize_age
from maas_domain.models import (
    ApiToken,
    AuditLog,
    TokenScope,
)
from maas_domain.services.tokens import api_token_create, api_token_list, api_token_revoke


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor_name", "action", "target", "reason", "correlation_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_name", "=target_id", "=correlation_id", "action"]
    date_hierarchy = "created_at"
    readonly_fields = ["before_json", "after_json"]
    exclude = ["before", "after"]

    @admin.display(description="target")
    def target(self, row: AuditLog) -> str:
        return f"{row.target_type} {row.target_id}"

    @admin.display(description="before")
    def before_json(self, row: AuditLog) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(row.before, indent=2, sort_keys=True))

    @admin.display(description="after")
    def after_json(self, row: AuditLog) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(row.after, indent=2, sort_keys=True))


class TokenForm(forms.Form):
    """A token for any active user (yourself or a colleague); the service checks the rest
    (the scope within the user's role, the expiry's bounds) and names the field."""

    user = forms.ModelChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"),
        to_field_name="username",
        help_text="Who will hold it: the scope must be within their role.",
    )
    name = forms.CharField(
        max_length=100, help_text="What it is for, e.g. ci-east or alice-laptop."
    )
    scope = forms.ChoiceField(
        choices=TokenScope.choices,
        initial=TokenScope.READ,
        help_text="read (changes nothing), operate or admin; within the user's role.",
    )
    expires_in_days = forms.IntegerField(
        required=False, min_value=1, help_text="Empty: the default (MAASCP_API_TOKEN_DAYS)."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["expires_in_days"] = forms.IntegerField(  # the settings of this process
            required=False,
            min_value=1,
            max_value=settings.API_TOKEN_MAX_DAYS,
            help_text=f"Empty: {settings.API_TOKEN_DAYS} days; at most "
            f"{settings.API_TOKEN_MAX_DAYS}.",
        )

    def place(self, exc: DomainError) -> None:
        fields = exc.extra.get("fields") or {}
        if not fields:
            self.add_error(None, exc.message)
        for key, reasons in fields.items():
            target = {"expires_in": "expires_in_days"}.get(key, key)
            for reason in reasons:
                self.add_error(target if target in self.fields else None, reason)


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Tokens (never their values). Creating one, for yourself or a colleague, and revoking
    call the token service (audited); the new token is shown once, on the page that answers
    the creation (docs/admin.md, "Tokens")."""

    list_display = ["name", "user", "prefix", "scope", "created", "expires", "last_used", "status"]
    list_filter = ["scope"]
    search_fields = ["name", "user__username", "prefix"]
    exclude = ["key_hash"]
    list_select_related = ["user"]
    actions = ["revoke_tokens"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        """What the API's ``GET /tokens`` shows this user: their own, or (admin) everyone's."""
        return api_token_list(actor=request.user)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return allowed(request.user, Action.ADMIN)  # as POST /tokens

    @admin.display(description="created", ordering="created_at")
    def created(self, token: ApiToken) -> str:
        by = f" by {token.created_by}" if token.created_by else ""
        return f"{token.created_at:%Y-%m-%d %H:%M}{by}"

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, token: ApiToken) -> str:
        return f"{token.expires_at:%Y-%m-%d}" if token.expires_at else "never"

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, token: ApiToken) -> str:
        if token.last_used_at is None:
            return "never"
        return f"{humanize_age(timezone.now() - token.last_used_at)} ago"

    @admin.display(description="status")
    def status(self, token: ApiToken) -> str:
        if token.revoked_at is not None:
            return f"revoked {token.revoked_at:%Y-%m-%d} by {token.revoked_by or 'system'}"
        if token.expires_at is not None and token.expires_at <= timezone.now():
            return "expired"
        return "active"

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """A form; its valid POST makes the token through the service and answers the one page
        that ever shows it (never cached, never in a message or a log)."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = TokenForm(request.POST or None, initial={"user": request.user.get_username()})
        back = reverse("admin:maas_domain_apitoken_changelist")
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "back_url": back, "subtitle": None}  # fmt: skip
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            days = data["expires_in_days"]
            try:
                token, raw = api_token_create(
                    actor=request.user,
                    user=data["user"],
                    name=data["name"],
                    scope=data["scope"],
                    expires_in=timedelta(days=days) if days else None,
                )
            except DomainError as exc:
                form.place(exc)
            else:
                shown = TemplateResponse(
                    request,
                    "admin/maas_domain/apitoken/created.html",
                    {**context, "title": f"Token {token.name} for {token.user.get_username()}",
                     "token": token, "raw": raw, "allows": ALLOWS[Action(token.scope)]},
                    status=201,
                )  # fmt: skip
                shown["Cache-Control"] = "no-store"
                return shown
        return TemplateResponse(
            request,
            "admin/maas_domain/apitoken/add.html",
            {**context, "title": "New API token", "form": form},
            status=400 if form.errors else 200,
        )

    @admin.action(description="Revoke selected tokens…")
    def revoke_tokens(
        self, request: HttpRequest, queryset: QuerySet[ApiToken]
    ) -> HttpResponse | None:
        live = queryset.filter(revoked_at__isnull=True)
        form, page = reason_step(
            self,
            request,
            live,
            action="revoke_tokens",
            title="Revoke API tokens",
            rows=[f"{t.name} of {t.user.get_username()} ({t.prefix}…, {t.scope})" for t in live],
            submit="Yes, revoke",
            help="A revoked token stops working at once (and the tokens made through it).",
        )
        if form is None:
            return page
        done, refused = [], []
        for token in live:
            try:
                api_token_revoke(
                    actor=request.user, token_id=token.pk, reason=form.cleaned_data["reason"]
                )
            except DomainError as exc:
                refused.append(f"{token.prefix}…: {exc.message}")
            else:
                done.append(f"{token.prefix}…")
        if done:
            self.message_user(request, f"Revoked {len(done)}: {', '.join(done)}.")
        for line in refused:
            self.message_user(request, f"Not revoked {line}", messages.ERROR)
        return None

"""Admin pages for the audit log and API tokens (docs/admin.md)."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.admin_common import (
    ReadOnlyAdmin,
)
from maas_domain.errors import DomainError
from maas_domain.models import (
    ApiToken,
    AuditLog,
)
from maas_domain.services.tokens import api_token_list, api_token_revoke


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


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Tokens (never their values). Revocation calls the token service (audited); tokens are
    minted by the API, ``manage.py api_token`` or ``run_embedded`` (docs/security.md)."""

    list_display = [
        "name",
        "user",
        "prefix",
        "scope",
        "created_at",
        "created_by",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["scope"]
    exclude = ["key_hash"]
    list_select_related = ["user"]
    actions = ["revoke_tokens"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        """What the API's ``GET /tokens`` shows this user: their own, or (admin) everyone's."""
        return api_token_list(actor=request.user)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        done, refused = [], []
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                api_token_revoke(actor=request.user, token_id=token.pk, reason="admin page")
            except DomainError as exc:
                refused.append(f"{token.prefix}…: {exc.message}")
            else:
                done.append(f"{token.prefix}…")
        if done:
            self.message_user(request, f"Revoked {len(done)}: {', '.join(done)}.")
        for line in refused:
            self.message_user(request, f"Not revoked {line}", messages.ERROR)

"""Django admin registrations (operators' pages; issue 8 builds the workflow pages)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from maas_domain.models import (
    ApiToken,
    AuditLog,
    MaasSite,
    Node,
    PowerCredentialOverride,
    RoceAssignment,
    SiteCredential,
    SiteProfile,
    Sku,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MaasSite)
class MaasSiteAdmin(ReadOnlyAdmin):
    list_display = ["name", "status", "health", "last_probe_at", "maas_url", "updated_at"]
    list_filter = ["status", "health"]
    search_fields = ["name", "maas_url"]


@admin.register(SiteProfile)
class SiteProfileAdmin(ReadOnlyAdmin):
    list_display = ["name", "site", "status", "architecture", "distro_series", "storage_layout"]
    list_filter = ["status", "site"]
    search_fields = ["name"]
    list_select_related = ["site"]


@admin.register(RoceAssignment)
class RoceAssignmentAdmin(ReadOnlyAdmin):
    list_display = ["hostname", "interface", "ipv4_cidr", "site"]
    list_filter = ["site"]
    search_fields = ["hostname", "ipv4_cidr"]
    list_select_related = ["site"]


@admin.register(SiteCredential, PowerCredentialOverride)
class SecretRefAdmin(ReadOnlyAdmin):
    """Metadata only: the value is never in these rows."""

    exclude = ["path"]


@admin.register(Sku)
class SkuAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "gpu_model", "gpu_count", "active"]
    list_filter = ["active"]
    search_fields = ["code", "name"]


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = ["hostname", "site", "sku", "state", "maas_system_id", "updated_at"]
    list_filter = ["state", "site", "sku"]
    search_fields = ["hostname", "maas_system_id"]
    list_select_related = ["site", "sku"]


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor_name", "action", "target_type", "target_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_name", "target_id", "correlation_id"]
    date_hierarchy = "created_at"


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    exclude = ["key_hash"]
    list_select_related = ["user"]

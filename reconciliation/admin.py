"""Read-only admin pages for reconciliation. The schedule itself is the
``reconciliation-dispatch`` row under Periodic tasks (django-celery-beat), editable there."""

from __future__ import annotations

from django.contrib import admin

from maas_domain.admin import ReadOnlyAdmin
from reconciliation.models import DriftRecord, NodeMaasState, ReconcileRun


@admin.register(ReconcileRun)
class ReconcileRunAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "site",
        "trigger",
        "state",
        "started_at",
        "duration_ms",
        "machines_seen",
        "drift_opened",
        "drift_cleared",
        "reason",
    ]
    list_filter = ["state", "trigger", "site"]


@admin.register(DriftRecord)
class DriftRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "site",
        "kind",
        "severity",
        "state",
        "subject",
        "hostname",
        "occurrences",
        "last_seen_at",
    ]
    list_filter = ["state", "kind", "severity", "site"]
    search_fields = ["hostname", "system_id", "subject"]


@admin.register(NodeMaasState)
class NodeMaasStateAdmin(ReadOnlyAdmin):
    list_display = ["node", "site", "system_id", "status_name", "power_state", "last_seen_at"]
    list_filter = ["site", "status_name", "power_state"]
    search_fields = ["system_id", "hostname"]

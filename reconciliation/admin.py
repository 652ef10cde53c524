"""Read-only admin pages for reconciliation. The schedule itself is the
``reconciliation-dispatch`` row under Periodic tasks (django-celery-beat), editable there."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from maas_domain.access import Action, allowed
from maas_domain.admin_common import ReadOnlyAdmin
from maas_domain.errors import DomainError
from reconciliation import services
from reconciliation import sweep as leaks
from reconciliation.models import DriftKind, DriftRecord, NodeMaasState, ReconcileRun


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
    """The drift ledger. Resolutions call the same service as the API (one audit row per
    record, with the operator's name); a record that cannot take one is reported, not changed."""

    actions = ["acknowledge", "adopt_maas_value", "mark_manual_intervention", "sweep_leaks"]
    list_select_related = ["site", "node"]
    show_full_result_count = False

    def _resolve(self, request: HttpRequest, queryset: QuerySet[DriftRecord], action: str) -> None:
        if not allowed(request.user, Action.OPERATE):  # the same class as the API's resolve
            raise PermissionDenied
        done, refused = 0, []
        for rec in queryset:
            where: dict[str, Any] = (
                {"node_id": rec.node_id}
                if rec.node_id
                else {"system_id": rec.system_id, "site_id": rec.site_id}
            )
            try:
                done += len(
                    services.drift_resolve(
                        actor=request.user,
                        action=action,
                        drift_id=rec.pk,
                        reason=f"{action} from the admin",
                        **where,
                    )
                )
            except DomainError as exc:
                refused.append(f"{rec.pk} ({rec.kind}): {exc.message}")
        if done:
            self.message_user(request, f"{action}: {done} drift record(s) by {request.user}.")
        if refused:
            self.message_user(request, "Left unchanged: " + "; ".join(refused), messages.WARNING)

    @admin.action(description="Acknowledge selected drift")
    def acknowledge(self, request: HttpRequest, queryset: QuerySet[DriftRecord]) -> None:
        self._resolve(request, queryset, "acknowledge")

    @admin.action(description="Adopt MAAS's value into our record")
    def adopt_maas_value(self, request: HttpRequest, queryset: QuerySet[DriftRecord]) -> None:
        self._resolve(request, queryset, "adopt")

    @admin.action(description="Mark for manual intervention")
    def mark_manual_intervention(
        self, request: HttpRequest, queryset: QuerySet[DriftRecord]
    ) -> None:
        self._resolve(request, queryset, "mark-manual-intervention")

    @admin.action(description="Sweep selected leaks (release, or mark Broken, in MAAS)")
    def sweep_leaks(self, request: HttpRequest, queryset: QuerySet[DriftRecord]) -> None:
        """The API's sweep, one machine per selected leak (docs/reconciliation.md, "Leaks"):
        the machine is read again and refused, naming why, when it is no longer a leak."""
        if not allowed(request.user, Action.ADMIN):  # it releases machines: the API's class
            raise PermissionDenied
        done, refused = [], []
        for rec in queryset.select_related("site"):
            if rec.kind != DriftKind.LEAK or not rec.system_id:
                refused.append(f"{rec.pk} ({rec.kind}): not a leak")
                continue
            try:
                answer = leaks.sweep(
                    actor=request.user,
                    site=rec.site,
                    system_id=rec.system_id,
                    reason="sweep from the admin",
                )
            except DomainError as exc:
                refused.append(f"{rec.hostname or rec.system_id}: {exc.message}")
                continue
            for plan in answer["swept"]:
                erase = f", {plan['erase']} erase" if plan["action"] == "release" else ""
                done.append(f"{plan['hostname']} ({plan['action']}{erase})")
        if done:
            self.message_user(request, f"Swept by {request.user}: " + "; ".join(done))
        if refused:
            self.message_user(request, "Not swept: " + "; ".join(refused), messages.WARNING)

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

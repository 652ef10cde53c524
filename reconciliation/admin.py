"""Read-only admin pages for reconciliation. The schedule itself is the
``reconciliation-dispatch`` row under Periodic tasks (django-celery-beat), editable there."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.access import Action, allowed
from maas_domain.admin_common import ReadOnlyAdmin, reason_step
from maas_domain.errors import DomainError
from maas_domain.humanize import DRIFT_STATE_COLOURS, SEVERITY_COLOURS, badge, humanize_age
from reconciliation import services
from reconciliation import sweep as leaks
from reconciliation.models import DriftKind, DriftRecord, DriftState, NodeMaasState, ReconcileRun


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


class DriftStateFilter(admin.SimpleListFilter):
    """Open drift by default (what nobody has looked at yet); every state one click away."""

    title = "state"
    parameter_name = "state"
    EVERY = "all"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            *((s.value, s.label + (" (default)" if s == DriftState.OPEN else ""))
              for s in DriftState),
            (self.EVERY, "every state"),
        ]  # fmt: skip

    def value(self) -> str:
        return str(super().value() or DriftState.OPEN)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == self.EVERY:
            return queryset
        if self.value() not in DriftState.values:  # a hand-made URL: nothing matches it
            return queryset.none()
        return queryset.filter(state=self.value())

    def choices(self, changelist: Any) -> Any:
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }


ACKNOWLEDGE_EXPIRY = (
    "When it lapses the record opens again if MAAS still differs; empty: it stays "
    "acknowledged until the drift clears."
)


@admin.register(DriftRecord)
class DriftRecordAdmin(ReadOnlyAdmin):
    """The drift ledger, open records first. Resolutions ask for a reason (and, for an
    acknowledgement, an expiry) and call the same service as the API (one audit row per
    record, with the operator's name and reason); a record that cannot take one is reported,
    not changed."""

    actions = ["acknowledge", "adopt_maas_value", "mark_manual_intervention", "sweep_leaks"]
    list_select_related = ["site", "node"]
    show_full_result_count = False
    list_display = [
        "id",
        "site",
        "kind_col",
        "severity_col",
        "state_col",
        "machine",
        "message",
        "occurrences",
        "last_seen",
    ]
    list_filter = [DriftStateFilter, "severity", "kind", "site"]
    search_fields = ["hostname", "system_id", "subject"]

    @admin.display(description="kind", ordering="kind")
    def kind_col(self, rec: DriftRecord) -> str:
        return rec.kind.replace("_", " ")

    @admin.display(description="severity", ordering="severity")
    def severity_col(self, rec: DriftRecord) -> SafeString:
        return badge(rec.severity, SEVERITY_COLOURS.get(rec.severity, "#6c757d"), "wf-sev")

    @admin.display(description="state", ordering="state")
    def state_col(self, rec: DriftRecord) -> SafeString:
        until = ""
        if rec.state == DriftState.ACKNOWLEDGED and rec.acknowledged_until:
            until = f" until {rec.acknowledged_until:%Y-%m-%d %H:%M}"
        return format_html(
            "{}{}", badge(rec.state, DRIFT_STATE_COLOURS.get(rec.state, "#6c757d")), until
        )

    @admin.display(description="machine")
    def machine(self, rec: DriftRecord) -> SafeString:
        return format_html(
            '{}<br><span class="wf-data">{}</span>', rec.hostname or "-", rec.subject
        )

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, rec: DriftRecord) -> str:
        return f"{humanize_age(timezone.now() - rec.last_seen_at)} ago"

    def _resolve(
        self, request: HttpRequest, queryset: QuerySet[DriftRecord], action: str, label: str
    ) -> HttpResponse | None:
        if not allowed(request.user, Action.OPERATE):  # the same class as the API's resolve
            raise PermissionDenied
        rows = list(queryset.select_related("site")[:500])
        form, page = reason_step(
            self,
            request,
            rows,
            action=self._action_name(action),
            title=f"{label}: {len(rows)} drift record(s)",
            rows=[
                f"{r.pk} {r.severity} {r.kind} on {r.site.name}: {r.hostname or r.subject}: "
                f"{r.message}"
                for r in rows
            ],
            submit=f"Yes, {label.lower()}",
            help="Each record gets an audit row with your name and this reason.",
            expiry=ACKNOWLEDGE_EXPIRY if action == "acknowledge" else "",
        )
        if form is None:
            return page
        reason = form.cleaned_data["reason"]
        hours = form.cleaned_data.get("expires_in_hours")
        expires_at = timezone.now() + timedelta(hours=hours) if hours else None
        done, refused = 0, []
        for rec in rows:
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
                        reason=reason,
                        expires_at=expires_at,
                        **where,
                    )
                )
            except DomainError as exc:
                refused.append(f"{rec.pk} ({rec.kind}): {exc.message}")
        if done:
            until = f", until {expires_at:%Y-%m-%d %H:%M} UTC" if expires_at else ""
            self.message_user(
                request, f"{action}: {done} drift record(s) by {request.user}{until}."
            )
        if refused:
            self.message_user(request, "Left unchanged: " + "; ".join(refused), messages.WARNING)
        return None

    @staticmethod
    def _action_name(action: str) -> str:
        return {"adopt": "adopt_maas_value"}.get(action, action.replace("-", "_"))

    @admin.action(description="Acknowledge selected drift…")
    def acknowledge(
        self, request: HttpRequest, queryset: QuerySet[DriftRecord]
    ) -> HttpResponse | None:
        return self._resolve(request, queryset, "acknowledge", "Acknowledge")

    @admin.action(description="Adopt MAAS's value into our record…")
    def adopt_maas_value(
        self, request: HttpRequest, queryset: QuerySet[DriftRecord]
    ) -> HttpResponse | None:
        return self._resolve(request, queryset, "adopt", "Adopt MAAS's value")

    @admin.action(description="Mark for manual intervention…")
    def mark_manual_intervention(
        self, request: HttpRequest, queryset: QuerySet[DriftRecord]
    ) -> HttpResponse | None:
        return self._resolve(
            request, queryset, "mark-manual-intervention", "Mark for manual intervention"
        )

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


@admin.register(NodeMaasState)
class NodeMaasStateAdmin(ReadOnlyAdmin):
    list_display = ["node", "site", "system_id", "status_name", "power_state", "last_seen_at"]
    list_filter = ["site", "status_name", "power_state"]
    search_fields = ["system_id", "hostname"]

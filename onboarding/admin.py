"""Operators' pages for onboardings and batches (the generic workflow pages, plus a start form
and the batch progress page)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.access import Action, ActionAdmin, allowed
from maas_domain.errors import DomainError
from maas_domain.humanize import STATE_COLOURS, state_badge
from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.models.sites import ProfileStatus, SiteStatus
from maas_domain.validators import hostname_error, ipv4_error
from maas_domain.work import WorkflowState
from onboarding import batches, selectors, services
from onboarding.api.views import batch_summary
from onboarding.models import Onboarding, OnboardingBatch
from workflows.admin import WorkflowAdmin
from workflows.models import Workflow


def _checked(check: Any) -> Any:
    def run(value: Any) -> None:
        if reason := check(value):
            raise forms.ValidationError(reason)

    return run


class ProfileChoice(forms.ModelChoiceField[SiteProfile]):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.site.name} / {obj.name} ({obj.distro_series}, {obj.architecture})"


class OnboardingStartForm(forms.Form):
    site = forms.ModelChoiceField(queryset=MaasSite.objects.filter(status=SiteStatus.ACTIVE))
    profile = ProfileChoice(
        queryset=SiteProfile.objects.filter(status=ProfileStatus.ACTIVE).select_related("site")
    )
    sku = forms.ModelChoiceField(queryset=Sku.objects.filter(active=True), label="SKU")
    hostname = forms.CharField(max_length=63, validators=[_checked(hostname_error)])
    ipmi_ip = forms.CharField(
        max_length=15, label="IPMI address", validators=[_checked(ipv4_error)]
    )
    confirm_host = forms.CharField(
        max_length=63,
        required=False,
        help_text="Guarded sites only: repeat the hostname to confirm this live run.",
    )


@admin.register(Onboarding)
class OnboardingAdmin(WorkflowAdmin):
    kind_name = "onboarding"
    diagnostics = True
    version_fields = ("site_bundle_version", "agent_bootstrap_version")
    summary_fields = (
        *WorkflowAdmin.summary_fields[:2],
        "profile",
        "sku",
        "ipmi_ip",
        "node",
        "batch",
        *WorkflowAdmin.summary_fields[2:],
        "created_machine",
        "pxe_mac",
        "site_bundle_done_at",
        "agent_started_at",
        "node_failure",
        "node_failure_detail",
        "enrolled_at",
        "completed_at",
    )
    start_form = OnboardingStartForm
    add_action = Action.OPERATE

    def report_panels(self, wf: Workflow) -> list[dict[str, Any]]:
        """The hardware judgement and the acceptance results (docs/hardware.md)."""
        assert isinstance(wf, Onboarding)
        panels = []
        hw = wf.hardware_report or {}
        if hw:
            verdict = "conformant" if hw.get("conformant") else "NOT conformant"
            panels.append(
                {
                    "id": "wf-hardware",
                    "title": f"Hardware: {verdict} to SKU {hw.get('sku', '?')} "
                    f"(mode {hw.get('mode', '?')}, {hw.get('checked_at', '')[:19]})",
                    "columns": ("requirement", "expected", "observed", "held"),
                    "rows": [
                        {
                            "passed": c["passed"],
                            "cells": (
                                c["requirement"],
                                c["expected"],
                                c["observed"],
                                "yes" if c["passed"] else "NO",
                            ),
                        }
                        for c in hw.get("checks", ())
                    ],
                    "empty": f"MAAS had no {hw['missing']}"
                    if hw.get("missing")
                    else hw.get("note", "no requirements"),
                }
            )
        acc = wf.acceptance_report or {}
        if acc:
            panels.append(
                {
                    "id": "wf-acceptance",
                    "title": f"Acceptance tests: {'passed' if acc.get('passed') else 'FAILED'}",
                    "columns": ("script", "device", "status", "exit", "runtime", "output"),
                    "rows": [
                        {
                            "passed": r["passed"],
                            "cells": (
                                r["script"],
                                r["device"] or "-",
                                r["status"],
                                r["exit_status"],
                                r["runtime"],
                                r.get("output_excerpt", ""),
                            ),
                        }
                        for r in acc.get("results", ())
                    ],
                    "empty": "MAAS showed no result",
                }
            )
        return panels

    form_field_map = {"site_id": "site", "profile_id": "profile", "sku_id": "sku"}

    def start(self, request: HttpRequest, data: dict[str, Any]) -> Onboarding:
        return services.onboarding_start(
            actor=request.user,
            site_id=data["site"].pk,
            profile_id=data["profile"].pk,
            sku_id=data["sku"].pk,
            hostname=data["hostname"],
            ipmi_ip=data["ipmi_ip"],
            confirm_host=data["confirm_host"] or None,
        )


BATCH_ACTIONS = {"resume": Action.OPERATE, "cancel": Action.ADMIN}


class PhaseFilter(admin.SimpleListFilter):
    """In flight (some onboarding of it open) or finished: the API's ``phase``."""

    title = "phase"
    parameter_name = "phase"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("in_flight", "in flight"), ("finished", "finished")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[OnboardingBatch]
    ) -> QuerySet[OnboardingBatch]:
        flying = selectors.in_flight(OnboardingBatch.objects.all()).values("pk")
        if self.value() == "in_flight":
            return queryset.filter(pk__in=flying)
        if self.value() == "finished":
            return queryset.exclude(pk__in=flying)
        return queryset


@admin.register(OnboardingBatch)
class OnboardingBatchAdmin(ActionAdmin[OnboardingBatch]):
    list_display = ["id", "site", "size", "progress", "created_by", "created_at"]
    list_filter = [PhaseFilter, "site"]
    search_fields = ["=id", "created_by", "correlation_id__exact"]
    list_select_related = ["site"]
    show_full_result_count = False
    ordering = ["-id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[OnboardingBatch]:
        # Counts per state in the list query itself: no query per row.
        return (
            super()
            .get_queryset(request)
            .annotate(**{f"n_{state}": expr for state, expr in selectors.STATE_COUNTS.items()})
        )

    @admin.display(description="progress")
    def progress(self, batch: Any) -> SafeString:
        """The batch's phase as the API and maasctl say it (onboarding/selectors.py), then its
        counts."""
        done, failed = batch.n_succeeded, batch.n_failed
        queued, manual = batch.n_pending, batch.n_manual_intervention
        cancelled = batch.n_cancelled
        phase = selectors.phase(batch)
        if phase == selectors.FINISHED:
            return format_html(
                "finished: {} succeeded, {} failed{}",
                done,
                failed,
                f", {cancelled} cancelled" if cancelled else "",
            )
        active = selectors.open_count(batch) - queued - manual
        return format_html(
            "{}: {} succeeded, {} failed, {} in progress, {} queued{}",
            phase,
            done,
            failed,
            active,
            queued,
            f", {manual} need an operator" if manual else "",
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:pk>/resume/", wrap(self.resume_view), name="onboarding_batch_resume"),
            path("<int:pk>/cancel/", wrap(self.cancel_view), name="onboarding_batch_cancel"),
            *super().get_urls(),
        ]

    def _can_act(self, request: HttpRequest, action: str) -> bool:
        """As the API (maas_domain/access.py): resuming continues work (operate); cancelling
        a whole batch is a cancel (admin)."""
        return allowed(request.user, BATCH_ACTIONS[action])

    def _batch_action(self, request: HttpRequest, pk: int, action: str) -> HttpResponse:
        if not self._can_act(request, action):
            raise PermissionDenied
        back = HttpResponseRedirect(reverse("admin:onboarding_onboardingbatch_change", args=[pk]))
        if request.method != "POST":
            return back
        reason = request.POST.get("reason", "").strip()[:500]
        try:
            if action == "resume":
                batches.batch_resume(actor=request.user, batch_id=pk, reason=reason)
                self.message_user(request, f"batch {pk} resumed: its pending nodes start again")
            elif request.POST.get("confirmed") != "yes":
                self.message_user(
                    request, "Tick the confirmation to cancel the whole batch.", messages.ERROR
                )
            else:
                done = batches.batch_cancel(actor=request.user, batch_id=pk, reason=reason)
                left = done["left_for_operator"]
                self.message_user(
                    request,
                    f"batch {pk} cancelled: {len(done['cancelled'])} onboardings cancelled"
                    + (f"; {len(left)} wait for an operator" if left else ""),
                )
        except DomainError as exc:
            self.message_user(request, f"{action} refused: {exc.message}", messages.ERROR)
        return back

    def resume_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._batch_action(request, pk, "resume")

    def cancel_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._batch_action(request, pk, "cancel")

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The batch page: counts per state, a progress bar, the failed nodes with reasons."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        batch = OnboardingBatch.objects.select_related("site", "profile", "sku").filter(
            pk=object_id if str(object_id).isdigit() else 0
        )
        found = batch.first()
        if found is None:
            raise Http404("No such batch.")
        summary = batch_summary(found)
        counts = summary["counts"]
        finished = summary["phase"] == selectors.FINISHED
        order = [s for s in WorkflowState.values if counts.get(s)]
        bars = [
            (s, counts[s], STATE_COLOURS.get(s, "#999"), 100.0 * counts[s] / max(found.size, 1))
            for s in order
        ]
        onboardings = reverse("admin:onboarding_onboarding_changelist")
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Batch {found.pk}: {found.size} nodes on {found.site.name}",
            "subtitle": None,
            "batch": found,
            "summary": summary,
            "counts": [(s, counts[s], state_badge(s)) for s in order],
            "bars": bars,
            "failed": [
                {**row, "url": reverse("admin:onboarding_onboarding_change", args=[row["id"]])}
                for row in summary["failed"]
            ],
            "finished": finished,
            # a finished batch has nothing to resume or cancel: no button offers it
            "can_resume": not finished and self._can_act(request, "resume"),
            "can_cancel": not finished and self._can_act(request, "cancel"),
            "all_url": f"{onboardings}?batch__id__exact={found.pk}",
            "failed_url": f"{onboardings}?batch__id__exact={found.pk}&state__exact=failed",
        }
        return TemplateResponse(request, "admin/onboarding/batch_detail.html", context)

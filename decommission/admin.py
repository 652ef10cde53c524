"""Operators' pages for decommissions: the generic workflow pages plus a start page whose every
submission goes through a confirmation that says what will happen (the stages and MAAS calls of
the chosen mode, the node's fate, the allocations a force-release would take) and asks why."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from maas_domain.models import Allocation, AllocationState, Node, SiteProfile
from maas_domain.models.sites import ProfileStatus
from workflows.admin import WorkflowAdmin
from workflows.models import Workflow

from . import services
from .models import Decommission, Mode
from .workflow import KIND

OUTCOME = {
    Mode.REIMAGE: "released with the policy's disk erase, then redeployed through the onboarding "
    "stages with new tokens; the node returns to active when the node agent enrolls",
    Mode.FULL: "released with the policy's disk erase, then deleted from MAAS (unless policy "
    "keeps it Ready); the node row is retired and keeps its history",
    Mode.STORAGE_CLEANUP: "released with the policy's disk erase; the node returns to its pool "
    "only if the erase succeeded",
}


class NodeChoice(forms.ModelChoiceField[Node]):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.hostname} ({obj.site.name}, {obj.state})"


class DecommissionStartForm(forms.Form):
    node = NodeChoice(
        queryset=Node.objects.filter(state__in=services.STARTABLE).select_related("site")
    )
    mode = forms.ChoiceField(choices=Mode.choices)
    profile = forms.ModelChoiceField(
        queryset=SiteProfile.objects.filter(status=ProfileStatus.ACTIVE).select_related("site"),
        required=False,
        help_text="Policy and reimage target; default: the profile the node was onboarded with.",
    )
    force_release = forms.BooleanField(
        required=False, help_text="Force-release the node's active allocations (audited)."
    )
    confirm_host = forms.CharField(
        max_length=63, required=False, help_text="Guarded sites only: repeat the hostname."
    )
    reason = forms.CharField(max_length=500, help_text="Kept in the audit log and the timeline.")


@admin.register(Decommission)
class DecommissionAdmin(WorkflowAdmin):
    kind_name = "decommission"
    diagnostics = True
    extra_list_display = ("mode",)
    summary_fields = (
        "hostname",
        "mode",
        "site",
        "node",
        "profile",
        "erase_mode",
        "erased",
        "fallback_used",
        "machine_deleted",
        "prior_node_state",
        "force_release",
        "requested_by",
        "request_reason",
        *WorkflowAdmin.summary_fields[2:],
    )
    start_form = DecommissionStartForm
    form_field_map = {"node_id": "node", "profile_id": "profile"}

    def get_list_filter(self, request: HttpRequest) -> Any:
        return [*super().get_list_filter(request), "mode"]

    def is_destructive(self, wf: Workflow, verb: str) -> bool:
        # anything that would run a full decommission's MAAS deletion again asks first
        reopening = verb in ("retry", "resume", "rerun", "adopt")
        full = isinstance(wf, Decommission) and wf.mode == Mode.FULL
        return super().is_destructive(wf, verb) or (full and reopening)

    def start_initial(self, request: HttpRequest) -> dict[str, Any]:
        node = request.GET.get("node", "")
        return {"node": int(node)} if node.isdigit() else {}

    def start(self, request: HttpRequest, data: dict[str, Any]) -> Decommission:
        return services.decommission_start(
            actor=request.user,
            node_id=data["node"].pk,
            mode=data["mode"],
            force_release=data["force_release"],
            profile_id=data["profile"].pk if data["profile"] else None,
            reason=data["reason"],
            confirm=True,  # only reached from the confirmation page
            confirm_host=data["confirm_host"] or None,
        )

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "POST" and request.POST.get("confirmed") != "yes":
            form = DecommissionStartForm(request.POST)
            if form.is_valid():
                return self._start_preview(request, form)
        return super().add_view(request, form_url, extra_context)

    def _start_preview(self, request: HttpRequest, form: DecommissionStartForm) -> HttpResponse:
        data = form.cleaned_data
        node, mode = data["node"], data["mode"]
        stages = [
            (s.name, [str(c) for c in s.maas_calls])
            for s in KIND.stages_for(Decommission(mode=mode))
        ]
        held = list(Allocation.objects.filter(node=node, state=AllocationState.ACTIVE))
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "title": f"Confirm {mode} of {node.hostname}",
            "node": node,
            "mode": mode,
            "outcome": OUTCOME[mode],
            "stages": stages,
            "allocations": held,
            "force_release": data["force_release"],
            "form": form,
        }
        return TemplateResponse(request, "admin/decommission/confirm_start.html", context)

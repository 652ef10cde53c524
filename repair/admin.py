"""Operators' pages for repairs: the generic workflow pages (the packet in the summary), a start
page, and the requalify operation offered while a repair waits in_repair."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest

from maas_domain.models import Node, NodeState, SiteProfile
from maas_domain.models.sites import ProfileStatus
from workflows.admin import Operation, WorkflowAdmin

from . import services
from .models import Repair


class NodeChoice(forms.ModelChoiceField[Node]):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.hostname} ({obj.site.name}, {obj.state})"


class RepairStartForm(forms.Form):
    node = NodeChoice(
        queryset=Node.objects.filter(
            Q(state=NodeState.QUARANTINED)
            | Q(state=NodeState.ACTIVE, cordons__lifted_at__isnull=True, cordons__isnull=False)
        )
        .distinct()
        .select_related("site"),
        help_text="A quarantined node, or an active one that is cordoned.",
    )
    profile = forms.ModelChoiceField(
        queryset=SiteProfile.objects.filter(status=ProfileStatus.ACTIVE).select_related("site"),
        required=False,
        help_text="Policy and requalification target; default: the node's last onboarding's.",
    )
    ticket = forms.CharField(max_length=200, required=False, help_text="The RMA ticket.")
    reason = forms.CharField(max_length=500, help_text="Kept in the audit log and the timeline.")


def _requalify(request: HttpRequest, wf: Repair, reason: str) -> Repair:
    return services.repair_requalify(actor=request.user, repair_id=wf.pk, note=reason)


@admin.register(Repair)
class RepairAdmin(WorkflowAdmin):
    kind_name = "repair"
    extra_list_display = ("ticket", "fault_class")
    summary_fields = (
        "hostname",
        "site",
        "node",
        "profile",
        "ticket",
        "fault_class",
        "prior_node_state",
        "handed_over_at",
        "repaired_at",
        "repaired_by",
        "repair_note",
        "requested_by",
        "request_reason",
        "packet",
        *WorkflowAdmin.summary_fields[2:],
    )
    start_form = RepairStartForm
    form_field_map = {"node_id": "node", "profile_id": "profile"}
    operations = (
        Operation(
            "requalify",
            run=_requalify,
            allowed=lambda wf: wf.stage == "in_repair" and wf.repaired_at is None,
            destructive=False,
            help="The repair is done: mark the machine fixed, commission it again, judge, "
            "test and (per policy) deploy it; the node returns only if all pass.",
            maas_calls=("mark_fixed", "commission (a child onboarding)"),
        ),
    )

    def start_initial(self, request: HttpRequest) -> dict[str, Any]:
        node = request.GET.get("node", "")
        return {"node": int(node)} if node.isdigit() else {}

    def start(self, request: HttpRequest, data: dict[str, Any]) -> Repair:
        return services.repair_start(
            actor=request.user,
            node_id=data["node"].pk,
            profile_id=data["profile"].pk if data["profile"] else None,
            ticket=data["ticket"],
            reason=data["reason"],
        )

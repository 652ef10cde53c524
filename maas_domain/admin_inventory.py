"""Admin pages for SKUs, nodes and allocations (docs/admin.md).

The node page is the one an operator opens for a machine: its state, SKU and site, its
allocations, every workflow of every kind on it, the merged timeline (oldest first, as every
timeline: docs/api.md, "Timelines") and MAAS diagnostics fetched live after the page loads. It
reads through ``maas_domain.selectors`` (the same reads as ``GET /nodes/{id}`` and its
timeline) and knows workflow kinds only from the registry.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from maas_domain import hardware, work
from maas_domain import selectors as node_reads
from maas_domain.access import Action, ActionAdmin, allowed
from maas_domain.admin_common import (
    ReadOnlyAdmin,
    readable,
)
from maas_domain.diagnostics import admin_diagnostics
from maas_domain.errors import DomainError, InvalidInput
from maas_domain.humanize import NODE_STATE_COLOURS, event_category, humanize_age
from maas_domain.models import (
    Node,
    QuarantineEvidence,
    Sku,
)
from maas_domain.services import cordons
from maas_domain.services import skus as sku_services
from maas_domain.work import OPEN_STATES


class SkuForm(forms.ModelForm[Sku]):
    """The hardware profile is checked as the API checks it, against the GPU count given on
    the same form (docs/hardware.md)."""

    class Meta:
        model = Sku
        fields = ["code", "name", "gpu_model", "gpu_count", "hardware", "active"]
        help_texts = {
            "hardware": "JSON: gpu, cpu, memory, nics, disks, firmware (docs/hardware.md).",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            data["hardware"] = hardware.validate_profile(
                data.get("hardware") or {},
                gpu_count=data.get("gpu_count") or 0,
                gpu_model=data.get("gpu_model") or "",
            )
        except InvalidInput as exc:
            for key, reasons in (exc.extra.get("fields") or {}).items():
                for reason in reasons:
                    self.add_error("hardware", f"{key}: {reason}")
        return data


@admin.register(Sku)
class SkuAdmin(ActionAdmin[Sku]):
    form = SkuForm
    list_display = ["code", "name", "gpu_model", "gpu_count", "active", "node_count"]
    list_filter = ["active", "gpu_model"]
    search_fields = ["code", "name", "gpu_model"]
    readonly_fields = ["revision"]  # the services count it
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Sku]:
        return super().get_queryset(request).annotate(n_nodes=Count("nodes"))

    @admin.display(description="nodes")
    def node_count(self, sku: Any) -> int:
        return int(sku.n_nodes)

    def save_model(self, request: HttpRequest, obj: Sku, form: Any, change: bool) -> None:
        if change:
            changes = {k: form.cleaned_data[k] for k in form.changed_data}
            sku_services.sku_update(actor=request.user, sku_id=obj.pk, changes=changes)
        else:
            obj.pk = sku_services.sku_create(actor=request.user, data=form.cleaned_data).pk


class CordonedFilter(admin.SimpleListFilter):
    """Nodes with an active cordon (taking no new work, whatever their state), or without."""

    title = "cordoned"
    parameter_name = "cordoned"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "cordoned"), ("no", "not cordoned")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        held = cordons.active().values("node_id")
        if self.value() == "yes":
            return queryset.filter(pk__in=held)
        if self.value() == "no":
            return queryset.exclude(pk__in=held)
        return queryset


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = [
        "hostname",
        "site",
        "sku",
        "state_col",
        "maas_system_id",
        "ipmi_ip",
        "cordoned",
        "updated",
        "start_links",
    ]
    list_filter = ["state", CordonedFilter, "site", "sku"]
    search_fields = ["hostname", "maas_system_id", "ipmi_ip"]
    list_select_related = ["site", "sku"]

    @admin.display(description="lifecycle state", ordering="state")
    def state_col(self, node: Node) -> SafeString:
        return format_html(
            '<span class="wf-badge" style="background:{};color:#fff;border-radius:4px;'
            'padding:2px 8px">{}</span>',
            NODE_STATE_COLOURS.get(node.state, "#6c757d"),
            node.state,
        )

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, node: Node) -> str:
        return f"{humanize_age(timezone.now() - node.updated_at)} ago"

    @admin.display(description="")
    def start_links(self, node: Node) -> SafeString:
        """The start pages of the workflow kinds an operator starts on a node in its state
        (each confirms before acting): the kinds declare it (``WorkflowKind.node_start``)."""
        links = []
        for kind in work.KINDS.values():
            if kind.node_start is None or node.state not in kind.node_start[1]:
                continue
            meta = kind.model._meta
            url = reverse(f"admin:{meta.app_label}_{meta.model_name}_add") + f"?node={node.pk}"
            links.append(format_html('<a href="{}">{}</a>', url, kind.node_start[0]))
        return format_html_join(" ", "{}", ((link,) for link in links))

    @admin.display(description="cordons")
    def cordoned(self, node: Node) -> str:
        held = getattr(node, "active_cordons", None)
        return ", ".join(sorted({c.reason for c in held})) if held else ""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return (
            super()
            .get_queryset(request)
            .prefetch_related(
                Prefetch("cordons", queryset=cordons.active(), to_attr="active_cordons")
            )
        )

    # -- the node page ----------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:pk>/diagnostics/", wrap(self.diagnostics_view), name="node_diagnostics"),
            path("<int:pk>/cordon/", wrap(self.cordon_view), name="node_cordon"),
            path("<int:pk>/uncordon/", wrap(self.uncordon_view), name="node_uncordon"),
            *super().get_urls(),
        ]

    def _node(self, request: HttpRequest, pk: Any) -> Node:
        if not self.has_view_permission(request):
            raise PermissionDenied
        node = Node.objects.select_related("site", "sku").filter(pk=_int(pk)).first()
        if node is None:
            raise Http404(f"No node {pk}.")
        return node

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The node page (GET only: nothing on it is a form)."""
        node = self._node(request, object_id)
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(status=405, headers={"Allow": "GET"})
        with_maas = request.GET.get("maas_events") == "1"
        rows = node_reads.timeline(node)
        total = rows.count()
        start = max(total - NODE_TIMELINE_LIMIT, 0)  # the latest entries, oldest first
        timeline = [node_reads.as_entry(r) for r in rows[start:]]
        maas_status: dict[str, Any] = {}
        if with_maas:
            maas_rows, maas_status = node_reads.maas_events(
                node, limit=node_reads.MAAS_EVENTS_MERGED
            )
            timeline = node_reads.merged(timeline, maas_rows)
        workflows = [
            {**wf, "url": _workflow_url(wf["model"], wf["id"])}
            for wf in node_reads.every_workflow(node)
        ]
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Node {node.pk}: {node.hostname}",
            "subtitle": None,
            "node": node,
            "state_badge": self.state_col(node),
            "allocations": list(node.allocations.order_by("-state", "-id")[:200]),
            "workflows": workflows,
            "open_workflows": [w for w in workflows if w["state"] in OPEN_STATES],
            "timeline": [(e, event_category(e["kind"], e["source"])) for e in timeline],
            "timeline_total": total,
            "timeline_shown_from": start,
            "with_maas": with_maas,
            "maas_status": maas_status,
            "observation": node_reads.last_observation(node),
            "quarantine_evidence": self.quarantine_evidence(node),
            "diagnostics_url": reverse("admin:node_diagnostics", args=[node.pk])
            if node.maas_system_id
            else "",
            "start_links": self.start_links(node),
            "cordons": list(node.cordons.order_by("-id")[:50]),
            "can_cordon": allowed(request.user, Action.OPERATE),
            "can_uncordon": allowed(request.user, Action.ADMIN)
            and cordons.active([node.pk]).exists(),
            "changelist_url": reverse("admin:maas_domain_node_changelist"),
            "sku_url": reverse("admin:maas_domain_sku_change", args=[node.sku_id]),
            "site_url": reverse("admin:maas_domain_maassite_change", args=[node.site_id]),
        }
        return TemplateResponse(request, "admin/maas_domain/node/detail.html", context)

    def cordon_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """POST with a reason: the cordon service, as ``POST /nodes/{id}/cordon`` (operate)."""
        return self._cordon_change(request, pk, Action.OPERATE, cordons.operator_cordon)

    def uncordon_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """POST with a reason: every cordon lifted (admin), as ``POST /nodes/{id}/uncordon``."""
        return self._cordon_change(request, pk, Action.ADMIN, cordons.operator_uncordon)

    def _cordon_change(
        self, request: HttpRequest, pk: int, action: Action, service: Any
    ) -> HttpResponse:
        node = self._node(request, pk)
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        if not allowed(request.user, action):
            raise PermissionDenied
        try:
            service(actor=request.user, node_id=node.pk, reason=request.POST.get("reason", ""))
        except DomainError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            done = "cordoned" if service is cordons.operator_cordon else "uncordoned"
            self.message_user(request, f"Node {node.hostname} {done}.")
        return HttpResponseRedirect(reverse("admin:maas_domain_node_change", args=[node.pk]))

    def quarantine_evidence(self, node: Node) -> list[tuple[str, str]]:
        """(label, URL) of each piece of evidence that put the node in quarantine, newest
        first (docs/hardware.md, "Quarantine evidence")."""
        return [
            (
                f"{e.created_at:%Y-%m-%d %H:%M} {e.kind}: {e.reason}",
                reverse("admin:maas_domain_quarantineevidence_change", args=[e.pk]),
            )
            for e in node.evidence.order_by("-id")[:20]
        ]

    def diagnostics_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """What MAAS says about the node's machine now (status, events as MAAS stamped them,
        commissioning results, installation output), loaded by the node page after it shows."""
        node = self._node(request, pk)
        data = admin_diagnostics(request, node.site, node.maas_system_id, since=node.updated_at)
        return TemplateResponse(request, "admin/workflow/diagnostics.html", {"d": data})


NODE_TIMELINE_LIMIT = 500


def _int(value: Any) -> int:
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else 0


def _workflow_url(model: Any, pk: int) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[pk])


@admin.register(QuarantineEvidence)
class QuarantineEvidenceAdmin(ReadOnlyAdmin):
    """Evidence is frozen: its page shows it and nothing can change it."""

    list_display = ["id", "node", "kind", "workflow_kind", "workflow_id", "reason", "created_at"]
    list_filter = ["kind"]
    search_fields = ["node__hostname", "maas_system_id"]
    list_select_related = ["node"]
    shown = (
        "node", "kind", "workflow_kind", "workflow_id", "maas_system_id", "reason",
        "created_at", "report_pretty", "maas_events_pretty", "timeline_pretty",
    )  # fmt: skip
    readonly_fields = shown
    fields = shown

    # tables an operator reads, the JSON one click away under each (docs/admin.md, "Evidence")
    @admin.display(description="report")
    def report_pretty(self, evidence: QuarantineEvidence) -> SafeString:
        return readable(evidence.report)

    @admin.display(description="MAAS events")
    def maas_events_pretty(self, evidence: QuarantineEvidence) -> SafeString:
        return readable(evidence.maas_events)

    @admin.display(description="timeline")
    def timeline_pretty(self, evidence: QuarantineEvidence) -> SafeString:
        return readable(evidence.timeline)

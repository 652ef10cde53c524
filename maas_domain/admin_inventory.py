"""Admin pages for SKUs, nodes and allocations (docs/admin.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.access import ActionAdmin
from maas_domain.admin_common import (
    ReadOnlyAdmin,
)
from maas_domain.humanize import humanize_age
from maas_domain.models import (
    Allocation,
    Node,
    Sku,
)
from maas_domain.models.inventory import DECOMMISSIONABLE, NodeState
from maas_domain.services import skus as sku_services

NODE_STATE_COLOURS: dict[str, str] = {
    NodeState.REGISTERED: "#6c757d",
    NodeState.PROVISIONING: "#0b5ed7",
    NodeState.ACTIVE: "#198754",
    NodeState.DRAINING: "#c25e00",
    NodeState.QUARANTINED: "#dc3545",
    NodeState.RETIRED: "#495057",
}


@admin.register(Sku)
class SkuAdmin(ActionAdmin[Sku]):
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


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = [
        "hostname",
        "site",
        "sku",
        "state_col",
        "maas_system_id",
        "ipmi_ip",
        "updated",
        "decommission_link",
    ]
    list_filter = ["state", "site", "sku"]
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
    def decommission_link(self, node: Node) -> str:
        """Opens the decommission start page for this node (which confirms before acting)."""
        if node.state not in DECOMMISSIONABLE:
            return ""
        url = reverse("admin:decommission_decommission_add") + f"?node={node.pk}"
        return format_html('<a href="{}">decommission…</a>', url)


@admin.register(Allocation)
class AllocationAdmin(ReadOnlyAdmin):
    list_display = ["id", "node", "holder", "state", "created_at", "released_at", "released_by"]
    list_filter = ["state"]
    search_fields = ["holder", "node__hostname"]
    list_select_related = ["node"]
    show_full_result_count = False

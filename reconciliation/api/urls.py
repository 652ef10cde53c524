"""Routes under /api/v1/admin/reconciliation/ (docs/reconciliation.md; a trailing slash is
optional)."""

from django.urls import re_path

from maas_domain.api.urls import id_group
from reconciliation.api.views import ReconciliationViewSet

summary = ReconciliationViewSet.as_view({"get": "summary"})
drift = ReconciliationViewSet.as_view({"get": "list"})
run = ReconciliationViewSet.as_view({"post": "run"})
resolve_node = ReconciliationViewSet.as_view({"post": "resolve_node"})
resolve_machine = ReconciliationViewSet.as_view({"post": "resolve_machine"})
sweep = ReconciliationViewSet.as_view({"post": "sweep"})

admin_urlpatterns = [
    re_path(r"^reconciliation/status/?$", summary, name="reconciliation-status"),
    re_path(r"^reconciliation/drift/?$", drift, name="reconciliation-drift"),
    re_path(r"^reconciliation/run/?$", run, name="reconciliation-run"),
    # Give back leaked machines (docs/reconciliation.md, "Leaks"): one, or every one of a site.
    re_path(r"^reconciliation/leaks/sweep/?$", sweep, name="reconciliation-leaks-sweep"),
    re_path(
        rf"^reconciliation/drift/{id_group('node_id')}/resolve/?$",
        resolve_node,
        name="reconciliation-drift-resolve",
    ),
    # Drift on a machine we have no node for (unknown machine, leak): keyed by MAAS system id.
    re_path(
        r"^reconciliation/drift/machines/(?P<system_id>[0-9A-Za-z_-]{1,32})/resolve/?$",
        resolve_machine,
        name="reconciliation-machine-drift-resolve",
    ),
]

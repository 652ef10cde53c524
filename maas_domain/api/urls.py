"""Admin API routes, as docs/api.md lists them (a trailing slash is optional)."""

from django.urls import re_path

from maas_domain.api import inventory, views
from maas_domain.api.exceptions import json_not_found


def id_group(name: str = "pk") -> str:
    """A row id in a path: at most 18 digits, so a longer one is a 404, never an overflow."""
    return rf"(?P<{name}>[0-9]{{1,18}})"


ID = id_group()
SITE = id_group("site_pk")
NODE = id_group("node_pk")

sites = views.SiteViewSet.as_view({"get": "list", "post": "create"})
site = views.SiteViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
)
site_credentials = views.SiteViewSet.as_view({"post": "credentials"})
site_probe = views.SiteViewSet.as_view({"post": "probe"})
profiles = views.ProfileViewSet.as_view({"get": "list", "post": "create"})
profile = views.ProfileViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
)
roce = views.RoceAssignmentViewSet.as_view({"get": "list", "post": "create"})
roce_one = views.RoceAssignmentViewSet.as_view({"delete": "destroy"})
skus = inventory.SkuViewSet.as_view({"get": "list", "post": "create"})
sku = inventory.SkuViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
)
nodes = inventory.NodeViewSet.as_view({"get": "list"})
node = inventory.NodeViewSet.as_view({"get": "retrieve"})
node_timeline = inventory.NodeViewSet.as_view({"get": "timeline"})
node_cordon = inventory.NodeViewSet.as_view({"post": "cordon"})
node_uncordon = inventory.NodeViewSet.as_view({"post": "uncordon"})
node_evidence = inventory.EvidenceViewSet.as_view({"get": "list"})
node_evidence_one = inventory.EvidenceViewSet.as_view({"get": "retrieve"})
allocations = inventory.AllocationViewSet.as_view({"get": "list", "post": "create"})
allocation = inventory.AllocationViewSet.as_view({"get": "retrieve"})
tokens = views.TokenViewSet.as_view({"get": "list", "post": "create"})
token_revoke = views.TokenViewSet.as_view({"post": "revoke"})
allocation_release = inventory.AllocationViewSet.as_view({"post": "release"})

urlpatterns = [
    re_path(r"^$", views.IndexView.as_view(), name="admin-index"),
    re_path(r"^maas-sites/?$", sites, name="site-list"),
    re_path(rf"^maas-sites/{ID}/?$", site, name="site-detail"),
    re_path(rf"^maas-sites/{ID}/credentials/?$", site_credentials, name="site-credentials"),
    re_path(rf"^maas-sites/{ID}/probe/?$", site_probe, name="site-probe"),
    re_path(rf"^maas-sites/{SITE}/profiles/?$", profiles, name="profile-list"),
    re_path(rf"^maas-sites/{SITE}/profiles/{ID}/?$", profile, name="profile-detail"),
    re_path(rf"^maas-sites/{SITE}/roce-assignments/?$", roce, name="roce-list"),
    re_path(rf"^maas-sites/{SITE}/roce-assignments/{ID}/?$", roce_one, name="roce-detail"),
    re_path(r"^skus/?$", skus, name="sku-list"),
    re_path(rf"^skus/{ID}/?$", sku, name="sku-detail"),
    re_path(r"^nodes/?$", nodes, name="node-list"),
    re_path(rf"^nodes/{ID}/?$", node, name="node-detail"),
    re_path(rf"^nodes/{ID}/timeline/?$", node_timeline, name="node-timeline"),
    re_path(rf"^nodes/{ID}/cordon/?$", node_cordon, name="node-cordon"),
    re_path(rf"^nodes/{ID}/uncordon/?$", node_uncordon, name="node-uncordon"),
    re_path(rf"^nodes/{NODE}/evidence/?$", node_evidence, name="node-evidence-list"),
    re_path(rf"^nodes/{NODE}/evidence/{ID}/?$", node_evidence_one, name="node-evidence-detail"),
    re_path(r"^allocations/?$", allocations, name="allocation-list"),
    re_path(rf"^allocations/{ID}/?$", allocation, name="allocation-detail"),
    re_path(rf"^allocations/{ID}/release/?$", allocation_release, name="allocation-release"),
    re_path(r"^tokens/?$", tokens, name="token-list"),
    re_path(rf"^tokens/{ID}/revoke/?$", token_revoke, name="token-revoke"),
    re_path(r"^[\s\S]*$", json_not_found),  # any path, newlines included: a JSON 404
]

"""Decommission routes under /api/v1/admin/ (a trailing slash is optional)."""

from django.urls import re_path

from decommission.api import views
from maas_domain.api.urls import id_group
from workflows.api import kind_routes

NODE = id_group("node_pk")
start = views.DecommissionViewSet.as_view({"post": "start"})
cleanup = views.DecommissionViewSet.as_view({"post": "storage_cleanup"})

admin_urlpatterns = [
    *kind_routes("decommissions", views.DecommissionViewSet),
    re_path(rf"^nodes/{NODE}/decommission/?$", start, name="node-decommission"),
    re_path(rf"^nodes/{NODE}/storage-cleanup/?$", cleanup, name="node-storage-cleanup"),
]

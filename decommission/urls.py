"""Decommission routes under /api/v1/admin/ (a trailing slash is optional)."""

from django.urls import re_path

from decommission import api
from maas_domain.api.urls import id_group
from workflows.api import kind_routes

NODE = id_group("node_pk")
start = api.DecommissionViewSet.as_view({"post": "start"})
cleanup = api.DecommissionViewSet.as_view({"post": "storage_cleanup"})

admin_urlpatterns = [
    *kind_routes("decommissions", api.DecommissionViewSet),
    re_path(rf"^nodes/{NODE}/decommission/?$", start, name="node-decommission"),
    re_path(rf"^nodes/{NODE}/storage-cleanup/?$", cleanup, name="node-storage-cleanup"),
]

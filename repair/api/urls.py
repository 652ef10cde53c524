"""Repair routes under /api/v1/admin/ (a trailing slash is optional)."""

from django.urls import re_path

from maas_domain.api.urls import id_group
from workflows.api import kind_routes

from . import views

NODE, ID = id_group("node_pk"), id_group()
start = views.RepairViewSet.as_view({"post": "start"})
requalify = views.RepairViewSet.as_view({"post": "requalify"})

admin_urlpatterns = [
    *kind_routes("repairs", views.RepairViewSet),
    re_path(rf"^nodes/{NODE}/repair/?$", start, name="node-repair"),
    re_path(rf"^repairs/{ID}/requalify/?$", requalify, name="repair-requalify"),
]

"""Decommission routes under /api/v1/admin/ (a trailing slash is optional)."""

from django.urls import re_path

from decommission import api
from maas_domain.api.urls import id_group
from workflows.verbs import VERBS as VERB_NAMES

decommissions = api.DecommissionViewSet.as_view({"get": "list"})
decommission = api.DecommissionViewSet.as_view({"get": "retrieve"})
verb = api.DecommissionViewSet.as_view({"post": "verb"})
timeline = api.DecommissionViewSet.as_view({"get": "timeline"})
start = api.DecommissionViewSet.as_view({"post": "start"})
cleanup = api.DecommissionViewSet.as_view({"post": "storage_cleanup"})
ID = id_group()
NODE = id_group("node_pk")
VERBS = "(?P<verb>" + "|".join(VERB_NAMES) + ")"

admin_urlpatterns = [
    re_path(r"^decommissions/?$", decommissions, name="decommission-list"),
    re_path(rf"^decommissions/{ID}/?$", decommission, name="decommission-detail"),
    re_path(rf"^decommissions/{ID}/{VERBS}/?$", verb, name="decommission-verb"),
    re_path(rf"^decommissions/{ID}/timeline/?$", timeline, name="decommission-timeline"),
    re_path(rf"^nodes/{NODE}/decommission/?$", start, name="node-decommission"),
    re_path(rf"^nodes/{NODE}/storage-cleanup/?$", cleanup, name="node-storage-cleanup"),
]

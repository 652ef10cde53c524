"""Admin API routes, exactly as seed 000 §4 lays them out (a trailing slash is optional)."""

from django.urls import re_path

from maas_domain.api import views
from maas_domain.api.exceptions import json_not_found

ID = r"(?P<pk>[0-9]+)"
SITE = r"(?P<site_pk>[0-9]+)"

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

urlpatterns = [
    re_path(r"^maas-sites/?$", sites, name="site-list"),
    re_path(rf"^maas-sites/{ID}/?$", site, name="site-detail"),
    re_path(rf"^maas-sites/{ID}/credentials/?$", site_credentials, name="site-credentials"),
    re_path(rf"^maas-sites/{ID}/probe/?$", site_probe, name="site-probe"),
    re_path(rf"^maas-sites/{SITE}/profiles/?$", profiles, name="profile-list"),
    re_path(rf"^maas-sites/{SITE}/profiles/{ID}/?$", profile, name="profile-detail"),
    re_path(rf"^maas-sites/{SITE}/roce-assignments/?$", roce, name="roce-list"),
    re_path(rf"^maas-sites/{SITE}/roce-assignments/{ID}/?$", roce_one, name="roce-detail"),
    re_path(r"^.*$", json_not_found),
]

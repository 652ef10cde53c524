"""URL routing: the admin pages, the admin API under /api/v1/admin/ (its Prometheus scrape
endpoint included), its OpenAPI document with Swagger UI and Redoc under /api/v1/, and the
health endpoints."""

from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from decommission.api.urls import admin_urlpatterns as decommission_admin
from maas_domain import health
from maas_domain.observability.views import metrics_view
from onboarding.api.urls import admin_urlpatterns as onboarding_admin
from onboarding.api.urls import node_urlpatterns
from reconciliation.api.urls import admin_urlpatterns as reconciliation_admin
from repair.api.urls import admin_urlpatterns as repair_admin

urlpatterns: list[URLPattern | URLResolver] = [
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("admin/", admin.site.urls),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # the split view serves Swagger UI's start script as a file (no inline script: the CSP)
    path(
        "api/v1/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"
    ),
    path("api/v1/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    re_path(r"^api/v1/admin/metrics/?$", metrics_view, name="metrics"),
    path("api/v1/admin/", include(onboarding_admin)),
    path("api/v1/admin/", include(decommission_admin)),
    path("api/v1/admin/", include(reconciliation_admin)),
    path("api/v1/admin/", include(repair_admin)),
    path("api/v1/admin/", include("maas_domain.api.urls")),
]
if not settings.SEPARATE_NODE_LISTENER:
    # otherwise served only by the node listener (config/wsgi_node.py, config/node_urls.py)
    urlpatterns.append(path("api/v1/node/", include(node_urlpatterns)))

handler404 = "maas_domain.api.exceptions.not_found"

"""URL routing: the admin pages, the admin API under /api/v1/admin/ (its Prometheus scrape
endpoint included) and the health endpoints."""

from django.contrib import admin
from django.urls import include, path, re_path

from decommission.urls import admin_urlpatterns as decommission_admin
from maas_domain import health
from maas_domain.observability.views import metrics_view
from onboarding.urls import admin_urlpatterns as onboarding_admin
from onboarding.urls import node_urlpatterns
from reconciliation.urls import admin_urlpatterns as reconciliation_admin

urlpatterns = [
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("admin/", admin.site.urls),
    re_path(r"^api/v1/admin/metrics/?$", metrics_view, name="metrics"),
    path("api/v1/admin/", include(onboarding_admin)),
    path("api/v1/admin/", include(decommission_admin)),
    path("api/v1/admin/", include(reconciliation_admin)),
    path("api/v1/admin/", include("maas_domain.api.urls")),
    path("api/v1/node/", include(node_urlpatterns)),
]

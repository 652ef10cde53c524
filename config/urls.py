"""URL routing: the admin pages and the admin API under /api/v1/admin/."""

from django.contrib import admin
from django.urls import include, path

from decommission.urls import admin_urlpatterns as decommission_admin
from maas_domain import health
from onboarding.urls import admin_urlpatterns as onboarding_admin
from onboarding.urls import node_urlpatterns
from reconciliation.urls import admin_urlpatterns as reconciliation_admin

urlpatterns = [
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("admin/", admin.site.urls),
    path("api/v1/admin/", include(onboarding_admin)),
    path("api/v1/admin/", include(decommission_admin)),
    path("api/v1/admin/", include(reconciliation_admin)),
    path("api/v1/admin/", include("maas_domain.api.urls")),
    path("api/v1/node/", include(node_urlpatterns)),
]

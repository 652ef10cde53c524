"""URL routing: the admin pages and the admin API under /api/v1/admin/."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/admin/", include("maas_domain.api.urls")),
]

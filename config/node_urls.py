"""The node listener's routes: the node-facing endpoints and the health checks, nothing else
(no admin pages, no admin API). See ``config/wsgi_node.py`` and docs/security.md."""

from django.urls import include, path, re_path

from maas_domain import health
from maas_domain.api.exceptions import json_not_found
from onboarding.api.urls import node_urlpatterns

urlpatterns = [
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("api/v1/node/", include(node_urlpatterns)),
    re_path(r"^.*$", json_not_found),
]

"""Routes: admin onboarding API under /api/v1/admin/, node-facing routes under /api/v1/node/."""

from django.urls import re_path

from maas_domain.api.urls import id_group
from onboarding import api
from workflows.api import kind_routes

batch = api.OnboardingViewSet.as_view({"post": "batch"})
batch_detail = api.OnboardingViewSet.as_view({"get": "batch_detail"})
batch_list = api.OnboardingViewSet.as_view({"get": "batch_list"})
batch_resume = api.OnboardingViewSet.as_view({"post": "batch_resume"})
batch_cancel = api.OnboardingViewSet.as_view({"post": "batch_cancel"})
ID = id_group()

admin_urlpatterns = [
    *kind_routes(
        "onboardings", api.OnboardingViewSet, collection={"get": "list", "post": "create"}
    ),
    re_path(r"^onboardings/batch/?$", batch, name="onboarding-batch"),
    re_path(r"^onboardings/batches/?$", batch_list, name="onboarding-batch-list"),
    re_path(rf"^onboardings/batches/{ID}/?$", batch_detail, name="onboarding-batch-detail"),
    re_path(rf"^onboardings/batches/{ID}/resume/?$", batch_resume, name="onboarding-batch-resume"),
    re_path(rf"^onboardings/batches/{ID}/cancel/?$", batch_cancel, name="onboarding-batch-cancel"),
]

node_urlpatterns = [
    re_path(r"^health/?$", api.node_health, name="node-health"),
    re_path(r"^enroll/?$", api.enroll, name="node-enroll"),
    re_path(r"^report/?$", api.report, name="node-report"),
    re_path(r"^checkin/?$", api.checkin, name="node-checkin"),
    re_path(
        r"^agent/(?P<version>[0-9A-Za-z.+-]+)/bootstrap\.sh$",
        api.agent_script,
        name="node-agent-script",
    ),
]

"""Routes: admin onboarding API under /api/v1/admin/, node-facing routes under /api/v1/node/."""

from django.urls import re_path

from maas_domain.api.urls import id_group
from onboarding.api import node, views
from workflows.api import kind_routes

batch = views.OnboardingViewSet.as_view({"post": "batch"})
batch_detail = views.OnboardingViewSet.as_view({"get": "batch_detail"})
batch_list = views.OnboardingViewSet.as_view({"get": "batch_list"})
batch_resume = views.OnboardingViewSet.as_view({"post": "batch_resume"})
batch_cancel = views.OnboardingViewSet.as_view({"post": "batch_cancel"})
ID = id_group()

admin_urlpatterns = [
    *kind_routes(
        "onboardings", views.OnboardingViewSet, collection={"get": "list", "post": "create"}
    ),
    re_path(r"^onboardings/batch/?$", batch, name="onboarding-batch"),
    re_path(r"^onboardings/batches/?$", batch_list, name="onboarding-batch-list"),
    re_path(rf"^onboardings/batches/{ID}/?$", batch_detail, name="onboarding-batch-detail"),
    re_path(rf"^onboardings/batches/{ID}/resume/?$", batch_resume, name="onboarding-batch-resume"),
    re_path(rf"^onboardings/batches/{ID}/cancel/?$", batch_cancel, name="onboarding-batch-cancel"),
]

node_urlpatterns = [
    re_path(r"^health/?$", node.node_health, name="node-health"),
    re_path(r"^enroll/?$", node.enroll, name="node-enroll"),
    re_path(r"^report/?$", node.report, name="node-report"),
    re_path(r"^checkin/?$", node.checkin, name="node-checkin"),
    re_path(
        r"^agent/(?P<version>[0-9A-Za-z.+-]+)/bootstrap\.sh$",
        node.agent_script,
        name="node-agent-script",
    ),
]

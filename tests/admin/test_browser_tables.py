"""The admin's lists and the fleet page at 1440 px in headless Chromium, filled the way an
ordinary day fills them (long reasons, drift with long messages, many tokens): no table cell
clipped or hidden, no column under the filter panel (docs/admin.md, "Layout"). Quicker than
the whole journey (tests/admin/test_browser.py, which measures every page the same way): the
rows are written directly, no worker runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from decommission.models import Decommission
from maas_domain.models import QuarantineEvidence
from onboarding.models import OnboardingBatch
from reconciliation.models import DriftRecord
from tests.admin.test_browser import (  # noqa: F401 (fixtures)
    PASSWORD,
    _shots_folder,
    browser_page,
    shot,
)
from tests.factories import make_node, make_onboarding, make_profile, make_site, make_sku
from tests.support.tokens import bearer_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WHY = ("deploy failed: MAAS reports Failed deployment: curtin command failed: installing "
       "the kernel package linux-image-generic-hwe-22.04 returned exit status 100; see the "
       "installation log of machine 4y3h7a for the apt mirror it could not reach")  # fmt: skip


@pytest.fixture
def day() -> dict[str, Any]:
    """What a working day leaves in the lists."""
    user = get_user_model().objects.create_user(
        "operator", password=PASSWORD, is_staff=True, is_superuser=True
    )
    site = make_site(name="lab-east-datacenter-7", health="degraded")
    sku = make_sku(code="gpu-8x-h100-sxm5-80gb")
    west = make_site(name="lab-west", health="healthy")
    for i in range(3):
        make_node(west, sku=sku, state=("active", "quarantined", "provisioning")[i])
    profile = make_profile(site, name="h100-jammy")
    batch = OnboardingBatch.objects.create(site=site, profile=profile, sku=sku, size=20,
                                           created_by="operator", correlation_id="c")  # fmt: skip
    for i in range(20):
        make_onboarding(site, profile=profile, sku=sku, batch=batch,
                        hostname=f"gpu-rack07-unit{i:02d}.lab-east.example.com",
                        state="failed" if i % 3 else "running", stage="deploy",
                        failure_class="maas_deploy_failed" if i % 3 else "",
                        reason=WHY if i % 3 else "")  # fmt: skip
    nodes = [make_node(site, sku=sku, state="active", maas_system_id=f"sys{i:03d}",
                       hostname=f"gpu-rack08-unit{i:02d}.lab-east.example.com",
                       ipmi_ip=f"10.10.8.{i + 1}") for i in range(12)]  # fmt: skip
    for node in nodes[:4]:
        Decommission.objects.create(site=site, node=node, hostname=node.hostname,
                                    mode="reimage", correlation_id="c", state="failed",
                                    stage="erase", failure_class="erase_failed",
                                    reason=WHY)  # fmt: skip
    now = timezone.now()
    for i, kind in enumerate(["leak", "status_mismatch", "unknown_machine", "workflow_stuck"] * 5):
        DriftRecord.objects.create(
            site=site, kind=kind, severity=("critical", "warning", "info")[i % 3],
            subject=f"machine:m{i:03d}", system_id=f"m{i:03d}",
            hostname=f"gpu-rack09-unit{i:02d}.lab-east.example.com",
            message=f"MAAS shows machine m{i:03d} Deployed, owned by maas-admin, with no node "
            "of this site for it: a machine this control plane does not know is taking power",
            first_seen_at=now - timedelta(days=2), last_seen_at=now, occurrences=40 + i,
        )  # fmt: skip
    for i in range(15):
        bearer_token(user, scope=("read", "operate", "admin")[i % 3],
                     name=f"ci-pipeline-lab-east-{i:02d}")  # fmt: skip
    evidence = QuarantineEvidence.objects.create(
        node=nodes[5], kind="hardware_nonconformant", workflow_kind="onboarding", workflow_id=1,
        maas_system_id="sys005", reason="4 GPUs found, the SKU states 8",
        report={"conformant": False, "sku": "gpu-8x-h100-sxm5-80gb", "mode": "strict",
                "checks": [{"requirement": "gpu.count", "expected": 8, "observed": 4,
                            "passed": False},
                           {"requirement": "memory.total_gib", "expected": 2048,
                            "observed": 2048, "passed": True}]},
        maas_events=[{"created": "2024-05-01T20:00:00", "level": "INFO",
                      "type": "Commissioning", "description": "commissioning finished"}],
        timeline=[{"at": "2024-05-01T20:00:00+00:00", "kind": "stage.failed",
                   "stage": "conformance", "message": "4 GPUs found, the SKU states 8"}],
    )  # fmt: skip
    return {"batch": batch, "evidence": evidence, "node": nodes[5]}


PAGES = [
    ("fleet", "/admin/"),
    ("onboardings", "/admin/onboarding/onboarding/"),
    ("decommissions", "/admin/decommission/decommission/"),
    ("drift", "/admin/reconciliation/driftrecord/"),
    ("tokens", "/admin/maas_domain/apitoken/"),
    ("nodes", "/admin/maas_domain/node/"),
    ("batches", "/admin/onboarding/onboardingbatch/"),
]


def test_every_list_reads_whole_at_1440(
    browser_page: Any,  # noqa: F811
    live_server: Any,
    day: dict[str, Any],
) -> None:
    page, base = browser_page, live_server.url
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    for name, path in PAGES:
        page.goto(base + path)
        shot(page, f"day-{name}")
    page.goto(f"{base}/admin/maas_domain/quarantineevidence/{day['evidence'].pk}/change/")
    shot(page, "day-evidence")
    # the fleet page on a laptop, and on a narrow window: its cards rearrange, nothing is cut
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(f"{base}/admin/")
        shot(page, f"day-fleet-{width}")

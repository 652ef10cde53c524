"""The pages an operator lives in (docs/admin.md): a node's page with its state, SKU,
allocations, every workflow of every kind, the merged timeline (oldest first) and MAAS
diagnostics whose event times are what MAAS stamped, in real time; a finished batch that says
so and offers no cancel; an onboardings list that shows the whole reason."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from decommission.models import Decommission
from decommission.workflow import KIND as DECOMMISSION
from maas_domain.diagnostics import machine_diagnostics
from maas_domain.models import Allocation
from maas_domain.services.allocations import allocation_release
from maas_domain.services.credentials import site_credentials_write
from onboarding.models import OnboardingBatch
from onboarding.workflow import KIND as ONBOARDING
from tests.factories import make_node, make_onboarding, make_profile, make_site, make_sku
from tests.support.maas import API_KEY, make_sim

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def test_node_page_shows_state_sku_allocations_every_workflow_and_the_timeline(
    ops: Any, admin_user: Any
) -> None:
    site = make_site()
    sku = make_sku(code="gpu-8x-h100", name="8x H100 SXM5", gpu_model="H100", gpu_count=8)
    node = make_node(site, hostname="c07u31", sku=sku, state="active", maas_system_id="abc123")
    onboarding = make_onboarding(
        site,
        node=node,
        hostname="c07u31",
        state="succeeded",
        stage="complete",
        maas_system_id="abc123",
    )
    ONBOARDING.add_event(onboarding, "workflow.created", "requested")
    ONBOARDING.add_event(onboarding, "workflow.succeeded", "all stages completed")
    reimage = Decommission.objects.create(
        site=site, node=node, hostname="c07u31", mode="reimage", correlation_id="t",
        state="failed", stage="release", failure_class="erase", reason="erase stuck: see MAAS",
    )  # fmt: skip
    DECOMMISSION.add_event(reimage, "workflow.created", "reimage requested")
    released = Allocation.objects.create(node=node, holder="tenant-a")
    allocation_release(actor=admin_user, allocation_id=released.pk, reason="drained")
    Allocation.objects.create(node=node, holder="tenant-b")

    page = ops.get(f"/admin/maas_domain/node/{node.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="node-state"' in html and ">active</span>" in html
    assert "gpu-8x-h100" in html and "8x H100 SXM5" in html
    allocations = html[html.index('id="node-allocations"') :]
    assert "tenant-a" in allocations and "drained" in allocations and "tenant-b" in allocations
    workflows = html[html.index('id="node-workflows"') : html.index('id="node-timeline"')]
    assert f"/admin/onboarding/onboarding/{onboarding.pk}/change/" in workflows
    assert f"/admin/decommission/decommission/{reimage.pk}/change/" in workflows
    assert "erase stuck: see MAAS" in workflows and "diagnostics" in workflows
    # one timeline of every workflow and the operator's actions, oldest first
    timeline = html[html.index('id="node-timeline"') :]
    kinds = re.findall(r'data-kind="([^"]+)" data-source="([^"]+)"', timeline)
    assert kinds == [
        ("workflow.created", "workflow"),
        ("workflow.succeeded", "workflow"),
        ("workflow.created", "workflow"),
        ("allocation.release", "operator"),
    ]
    assert "oldest first" in html
    # live MAAS diagnostics load after the page; quarantine evidence has its place
    assert f'data-url="/admin/maas_domain/node/{node.pk}/diagnostics/"' in html
    assert 'id="node-quarantine-evidence"' in html
    assert ops.get("/admin/maas_domain/node/999999/change/").status_code == 404
    assert ops.post(f"/admin/maas_domain/node/{node.pk}/change/").status_code == 405


def test_maas_event_times_are_as_maas_stamped_them_in_real_time(ops: Any, admin_user: Any) -> None:
    """The simulator runs its clock fast (make run: 30x); a real MAAS stamps events with its own
    real-time clock, and so does the simulator: diagnostics never show an event in the
    future (they used to, by 15-20 minutes after a demo onboarding)."""
    sim = make_sim({"users": []}, scale=60.0)
    try:
        site = make_site(maas_url=sim.url)
        site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
        sid = sim.add(hostname="c07u31", status="deployed")
        node = make_node(site, hostname="c07u31", state="active", maas_system_id=sid)
        started = datetime.now(UTC)
        sim.model.clock.advance(1200)  # 20 MAAS minutes pass in an instant, as on a fast clock
        with sim.model.lock:
            sim.model.event(sim.model.machines[sid], "INFO", "Deployed", "from the simulator")
        events = machine_diagnostics(site, sid)["events"]
        assert any(e["type"] == "Deployed" for e in events)
        now = datetime.now(UTC)
        for e in events:
            created = datetime.fromisoformat(e["created"])
            assert created <= now, (created, now)  # never in the future
            assert created >= started - timedelta(seconds=5), (created, started)
        fragment = ops.get(f"/admin/maas_domain/node/{node.pk}/diagnostics/").content.decode()
        assert "Deployed" in fragment and "MAAS time" in fragment
        deployed = next(e for e in events if e["type"] == "Deployed")
        assert deployed["created"] in fragment  # shown as MAAS reported it
    finally:
        sim.server.stop()


def test_a_finished_batch_says_so_and_offers_no_cancel(ops: Any, admin_user: Any) -> None:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    profile, sku = make_profile(site), make_sku()
    batch = OnboardingBatch.objects.create(
        site=site, profile=profile, sku=sku, size=2, created_by="ops", correlation_id="c"
    )
    common = {"profile": profile, "sku": sku, "batch": batch}
    make_onboarding(site, state="succeeded", stage="complete", **common)
    make_onboarding(site, state="failed", stage="deploy", reason="curtin", **common)
    html = ops.get(f"/admin/onboarding/onboardingbatch/{batch.pk}/change/").content.decode()
    state = html[html.index('id="batch-state"') :]
    assert "Finished" in state[:200] and "Admission: " not in state[:200]
    assert 'id="batch-actions"' not in html and "Cancel the batch" not in html
    listing = ops.get("/admin/onboarding/onboardingbatch/").content.decode()
    assert "finished: 1 succeeded, 1 failed" in listing
    # the service refuses too (API and page alike): nothing is left to cancel
    answer = ops.post(
        f"/admin/onboarding/onboardingbatch/{batch.pk}/cancel/",
        {"reason": "x", "confirmed": "yes"},
        follow=True,
    )
    assert "has finished" in answer.content.decode()
    batch.refresh_from_db()
    assert batch.state == "running"


def test_onboardings_list_shows_the_whole_reason(ops: Any) -> None:
    site = make_site()
    reason = (
        "deploy failed: " + "curtin said many things " * 12 + "-- retry after fixing the mirror"
    )
    make_onboarding(site, state="failed", stage="deploy", failure_class="curtin", reason=reason)
    html = ops.get("/admin/onboarding/onboarding/").content.decode()
    assert len(reason) > 140 and reason in html

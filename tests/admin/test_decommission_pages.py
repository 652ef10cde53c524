"""Decommission admin: a start always goes through a confirmation page saying what will happen
and asking why; the workflow pages are the generic ones; full decommissions confirm reopening."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from decommission.models import Decommission
from maas_domain.models import Allocation, AuditLog, Node
from tests.factories import make_site, make_sku

pytestmark = pytest.mark.django_db
LIST = "/admin/decommission/decommission/"


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def node(hostname: str = "n01") -> Node:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    return Node.objects.create(
        site=site, sku=make_sku(), hostname=hostname, ipmi_ip="10.9.0.1", state="active"
    )


def test_start_shows_what_will_happen_then_starts_only_when_confirmed(ops: Any) -> None:
    n = node()
    Allocation.objects.create(node=n, holder="tenant-7")
    body = {"node": n.pk, "mode": "full", "force_release": "on", "reason": "end of life"}
    preview = ops.post(f"{LIST}add/", body)
    page = preview.content.decode()
    assert preview.status_code == 200
    assert "deleted from MAAS" in page and "retire" in page and "delete_machine" in page
    assert "tenant-7" in page and "will be force-released" in page
    assert "redeploy" not in page  # not a stage of a full decommission
    assert not Decommission.objects.exists()  # nothing happened yet
    assert Allocation.objects.get().state == "active"
    started = ops.post(f"{LIST}add/", {**body, "confirmed": "yes"})
    assert started.status_code == 302
    wf = Decommission.objects.get()
    assert (wf.mode, wf.request_reason, wf.requested_by) == ("full", "end of life", "ops-admin")
    assert Allocation.objects.get().state == "force_released"
    assert AuditLog.objects.filter(
        action="allocation.force_release", actor_name="ops-admin"
    ).exists()
    detail = ops.get(f"{LIST}{wf.pk}/change/")
    assert detail.context["stages"] == ["preflight", "drain", "release", "retire", "complete"]
    assert "cancel" in detail.content.decode()


def test_start_without_a_reason_or_refused_by_the_service_changes_nothing(ops: Any) -> None:
    n = node()
    Allocation.objects.create(node=n, holder="tenant-8")
    no_reason = ops.post(f"{LIST}add/", {"node": n.pk, "mode": "storage_cleanup"})
    assert no_reason.status_code == 400
    refused = ops.post(
        f"{LIST}add/",
        {"node": n.pk, "mode": "storage_cleanup", "reason": "wipe", "confirmed": "yes"},
    )
    assert refused.status_code == 400
    assert "active allocation" in refused.content.decode()
    assert not Decommission.objects.exists()


def test_reopening_a_failed_full_decommission_asks_first(ops: Any) -> None:
    n = node()
    wf = Decommission.objects.create(
        site=n.site, node=n, hostname=n.hostname, mode="full", state="failed", stage="retire",
        correlation_id="c", reason="MAAS refused delete",
    )  # fmt: skip
    page = ops.get(f"{LIST}{wf.pk}/verb/retry/")
    assert page.status_code == 200 and "Reason" in page.content.decode()
    unconfirmed = ops.post(f"{LIST}{wf.pk}/verb/retry/", {})
    assert unconfirmed.status_code == 400
    assert Decommission.objects.get(pk=wf.pk).state == "failed"


def test_list_queries_do_not_grow_with_page_size(ops: Any) -> None:
    site = make_site()
    sku = make_sku()
    for i in range(60):
        n = Node.objects.create(site=site, sku=sku, hostname=f"h{i:02d}", state="draining")
        Decommission.objects.create(
            site=site, node=n, hostname=n.hostname, mode="reimage", state="failed",
            stage="release", correlation_id="c",
        )  # fmt: skip
    from decommission.admin import DecommissionAdmin

    counts = []
    for per_page in (10, 50):
        DecommissionAdmin.list_per_page = per_page
        try:
            with CaptureQueriesContext(connection) as ctx:
                assert ops.get(LIST, {"mode": "reimage"}).status_code == 200
        finally:
            DecommissionAdmin.list_per_page = 50
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts


def test_node_list_links_to_a_prefilled_decommission_start(ops: Any) -> None:
    n = node("n07")
    retired = Node.objects.create(site=n.site, sku=n.sku, hostname="gone", state="retired")
    listing = ops.get("/admin/maas_domain/node/").content.decode()
    link = f"/admin/decommission/decommission/add/?node={n.pk}"
    assert link in listing
    assert f"?node={retired.pk}" not in listing  # nothing to decommission
    start = ops.get(link)
    assert start.status_code == 200
    assert start.context["form"].initial == {"node": n.pk}

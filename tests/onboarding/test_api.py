"""Onboarding API without running workflows: input rules, guardrails, 409s, batches, reads."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite, Node, SiteProfile, Sku
from onboarding.models import Onboarding, OnboardingBatch
from tests.factories import make_onboarding, make_profile, make_site, make_sku

URL = "/api/v1/admin/onboardings"


@pytest.fixture
def target(db: None) -> tuple[MaasSite, SiteProfile, Sku]:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    return site, make_profile(site), make_sku()


def body(target: tuple[MaasSite, SiteProfile, Sku], **extra: Any) -> dict[str, Any]:
    site, profile, sku = target
    data: dict[str, Any] = {
        "site_id": site.pk,
        "profile_id": profile.pk,
        "sku_id": sku.pk,
        "hostname": "c07u31",
        "ipmi_ip": "10.10.7.31",
    }
    data.update(extra)
    return data


@pytest.mark.django_db
def test_start_answers_202_queued_with_timeline_and_audit(api: APIClient, target: Any) -> None:
    response = api.post(URL, body(target), format="json")
    assert response.status_code == 202, response.json()
    data = response.json()
    assert (data["state"], data["queued"], data["stage"], data["attempt"]) == (
        "pending",
        True,
        "preflight",
        1,
    )
    wf = Onboarding.objects.get(pk=data["id"])
    assert wf.node is not None and wf.node.state == "provisioning"
    assert AuditLog.objects.get(action="onboarding.start").target_id == str(wf.pk)
    detail = api.get(f"{URL}/{wf.pk}", {"diagnostics": "false"}).json()
    assert [e["kind"] for e in detail["timeline"]] == ["workflow.created"]
    assert detail["timeline"][0]["actor_name"] == "ops-admin"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"pxe_mac": "52:54:00:00:00:01"}, "pxe_mac"),
        ({"roce": [{"interface": "eth0"}]}, "roce"),
        ({"deploy_retry_limit": 3}, "deploy_retry_limit"),
        ({"hostname": "Bad_Host"}, "hostname"),
        ({"ipmi_ip": "10.10.7"}, "ipmi_ip"),
        ({"site_id": 424242}, "site_id"),
        ({"profile_id": 424242}, "profile_id"),
        ({"sku_id": 424242}, "sku_id"),
    ],
)
def test_bad_input_is_400_and_creates_nothing(
    api: APIClient, target: Any, extra: dict, field: str
) -> None:
    response = api.post(URL, body(target, **extra), format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"]
    assert not Onboarding.objects.exists()
    assert not Node.objects.exists()
    assert not AuditLog.objects.exists()


@pytest.mark.django_db
def test_profile_of_another_site_is_rejected(api: APIClient, target: Any) -> None:
    other = make_profile(make_site())
    response = api.post(URL, body(target, profile_id=other.pk), format="json")
    assert response.status_code == 400
    assert "profile_id" in response.json()["fields"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            lambda s, p, k: MaasSite.objects.filter(pk=s.pk).update(health="unhealthy"),
            "probe is unhealthy",
        ),
        (
            lambda s, p, k: MaasSite.objects.filter(pk=s.pk).update(
                last_probe_at=timezone.now() - timedelta(days=2)
            ),
            "too old",
        ),
        (lambda s, p, k: SiteProfile.objects.filter(pk=p.pk).update(status="disabled"), "profile"),
        (lambda s, p, k: Sku.objects.filter(pk=k.pk).update(active=False), "SKU"),
        (lambda s, p, k: MaasSite.objects.filter(pk=s.pk).update(status="disabled"), "disabled"),
    ],
)
def test_guardrails_refuse_with_409(
    api: APIClient, target: Any, change: Any, fragment: str
) -> None:
    change(*target)
    response = api.post(URL, body(target), format="json")
    assert response.status_code == 409
    assert response.json()["error"] == "guardrail_failed"
    assert fragment in response.json()["detail"]
    assert not Onboarding.objects.exists()


@pytest.mark.django_db
def test_guarded_site_needs_confirmation_naming_an_approved_host(
    api: APIClient, target: Any
) -> None:
    site = target[0]
    MaasSite.objects.filter(pk=site.pk).update(guarded=True, approved_hosts=["c07u31"])
    assert api.post(URL, body(target), format="json").status_code == 409
    wrong = api.post(URL, body(target, confirm_host="c07u32"), format="json")
    assert "confirm_host must name 'c07u31'" in wrong.json()["detail"]
    unapproved = api.post(
        URL, body(target, hostname="c07u40", confirm_host="c07u40"), format="json"
    )
    assert "not on its approved list" in unapproved.json()["detail"]
    ok = api.post(URL, body(target, confirm_host="c07u31"), format="json")
    assert ok.status_code == 202
    batch = api.post(
        f"{URL}/batch",
        {
            "site_id": site.pk,
            "profile_id": target[1].pk,
            "sku_id": target[2].pk,
            "rows": [
                {"hostname": "c07u41", "ipmi_ip": "10.0.0.41"},
                {"hostname": "c07u42", "ipmi_ip": "10.0.0.42"},
            ],
        },
        format="json",
    )
    assert batch.status_code == 409


@pytest.mark.django_db
def test_second_open_onboarding_is_409_naming_the_open_one(api: APIClient, target: Any) -> None:
    first = api.post(URL, body(target), format="json").json()
    second = api.post(URL, body(target), format="json")
    assert second.status_code == 409
    assert second.json()["open_onboarding"]["id"] == first["id"]


@pytest.mark.django_db(transaction=True)
def test_twenty_simultaneous_starts_create_exactly_one(api: APIClient, target: Any) -> None:
    barrier = threading.Barrier(20)
    codes: list[int] = []

    def start() -> None:
        try:
            barrier.wait()
            codes.append(api.post(URL, body(target), format="json").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [202] + [409] * 19
    assert Onboarding.objects.count() == 1
    assert Node.objects.count() == 1


@pytest.mark.django_db
def test_active_node_cannot_be_onboarded_again(api: APIClient, target: Any) -> None:
    site, _, sku = target
    Node.objects.create(site=site, sku=sku, hostname="c07u31", state="active")
    response = api.post(URL, body(target), format="json")
    assert response.status_code == 409
    assert "is active" in response.json()["detail"]


def batch_body(target: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    site, profile, sku = target
    return {"site_id": site.pk, "profile_id": profile.pk, "sku_id": sku.pk, "rows": rows}


@pytest.mark.django_db
def test_batch_is_all_or_nothing_with_row_reasons(api: APIClient, target: Any) -> None:
    make_onboarding(target[0], hostname="busy01", profile=target[1], sku=target[2])
    rows = [
        {"hostname": "ok01", "ipmi_ip": "10.0.0.1"},
        {"hostname": "ok01", "ipmi_ip": "10.0.0.2"},
        {"hostname": "bad host", "ipmi_ip": "10.0.0.3"},
        {"hostname": "ok04", "ipmi_ip": "10.0.0.1"},
        {"hostname": "ok05", "ipmi_ip": "10.0.0.5", "pxe_mac": "x"},
    ]
    response = api.post(f"{URL}/batch", batch_body(target, rows), format="json")
    assert response.status_code == 400
    assert [(r["index"], r["field"]) for r in response.json()["rows"]] == [
        (1, "hostname"),
        (2, "hostname"),
        (3, "ipmi_ip"),
        (4, "pxe_mac"),
    ]
    busy = api.post(
        f"{URL}/batch",
        batch_body(target, [{"hostname": "busy01", "ipmi_ip": "10.0.9.1"}]),
        format="json",
    )
    assert busy.status_code == 400
    assert "already has an open onboarding" in busy.json()["rows"][0]["reason"]
    assert Onboarding.objects.count() == 1
    assert not OnboardingBatch.objects.exists()


@pytest.mark.django_db
def test_batch_of_1000_in_one_transaction_and_followable(api: APIClient, target: Any) -> None:
    rows = [
        {"hostname": f"gpu{i:04d}", "ipmi_ip": f"10.50.{i // 250}.{i % 250 + 1}"}
        for i in range(1000)
    ]
    response = api.post(f"{URL}/batch", batch_body(target, rows), format="json")
    assert response.status_code == 202, response.json()
    data = response.json()
    assert data["size"] == 1000
    assert data["counts"]["pending"] == 1000 and sum(data["counts"].values()) == 1000
    assert (data["open"], data["queued"]) == (1000, 1000)
    assert Onboarding.objects.filter(batch_id=data["id"]).count() == 1000
    assert Node.objects.filter(state="provisioning").count() == 1000
    assert AuditLog.objects.filter(action="onboarding.start_batch").count() == 1
    follow = api.get(f"{URL}/batches/{data['id']}").json()
    assert follow["counts"] == data["counts"]
    listed = api.get(URL, {"batch": data["id"], "limit": 5}).json()
    assert listed["count"] == 1000


@pytest.mark.django_db
def test_list_filters_search_and_constant_queries(api: APIClient, target: Any) -> None:
    site, profile, sku = target
    for i in range(30):
        make_onboarding(
            site,
            hostname=f"rack{i:02d}",
            profile=profile,
            sku=sku,
            state="failed" if i % 3 == 0 else "succeeded",
        )
    assert api.get(URL, {"state": "failed"}).json()["count"] == 10
    assert api.get(URL, {"search": "rack0"}).json()["count"] == 10
    assert api.get(URL, {"hostname": "rack07"}).json()["results"][0]["hostname"] == "rack07"
    assert api.get(URL, {"site": site.pk, "profile": profile.pk}).json()["count"] == 30
    assert api.get(URL, {"state": "exploded"}).status_code == 400
    api.get(URL)
    counts = []
    for limit in (1, 30):
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(URL, {"limit": limit}).status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


@pytest.mark.django_db
def test_unknown_onboarding_is_404(api: APIClient) -> None:
    assert api.get(f"{URL}/424242").status_code == 404
    assert api.get(f"{URL}/batches/424242").status_code == 404

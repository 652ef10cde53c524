"""One preflight report for the first live run, before anything starts: every guardrail's state,
what MAAS shows for the host, and the stages and MAAS calls the onboarding would make
(``POST /onboardings?dry_run=true``). It changes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, Node
from onboarding.models import Onboarding
from tests.support.stages import Bench

pytestmark = pytest.mark.django_db
URL = "/api/v1/admin/onboardings?dry_run=true"


def body(bench: Bench, hostname: str = "c07u31", **extra: Any) -> dict[str, Any]:
    return {
        "site_id": bench.site.pk,
        "profile_id": bench.profile.pk,
        "sku_id": bench.sku.pk,
        "hostname": hostname,
        "ipmi_ip": "10.10.7.31",
        **extra,
    }


def guardrails(report: dict[str, Any]) -> dict[str, bool]:
    return {g["name"]: g["ok"] for g in report["guardrails"]}


def test_a_clean_first_run_reports_every_guardrail_and_the_plan(
    bench: Bench, api: APIClient
) -> None:
    sid = bench.sim.add(hostname="c07u31", status="ready", power_address="10.10.7.31")
    bench.site.guarded, bench.site.approved_hosts = True, ["c07u31"]
    bench.site.save()
    answer = api.post(URL, body(bench, confirm_host="c07u31"), format="json")
    assert answer.status_code == 200, answer.json()
    report = answer.json()
    assert report["dry_run"] is True and report["allowed"] is True
    assert guardrails(report) == {
        "site_enabled": True,
        "probe_healthy_and_fresh": True,
        "profile_active": True,
        "sku_active": True,
        "no_open_workflow": True,
        "node_onboardable": True,
        "node_trust": True,
        "host_approved_and_confirmed": True,
    }
    assert [s["name"] for s in report["stages"]][:3] == ["preflight", "discover", "commission"]
    assert any(c.startswith("deploy: deploy") for c in report["maas_calls"])
    assert report["policy"]["commission_skip_bmc_config"] is True
    assert report["maas"]["by_hostname"] == [
        {"system_id": sid, "hostname": "c07u31", "status": "Ready"}
    ]
    # nothing was written: no workflow, no node, no audit row, and MAAS saw no change
    assert not Onboarding.objects.exists() and not Node.objects.exists()
    assert not AuditLog.objects.filter(action__startswith="onboarding").exists()
    assert bench.sim.mutations() == []


def test_every_failing_guardrail_is_named_at_once(bench: Bench, api: APIClient) -> None:
    from maas_domain.models import SiteProfile

    bench.site.last_probe_at = timezone.now() - timedelta(days=3)
    bench.site.guarded, bench.site.approved_hosts = True, ["other"]
    bench.site.save()
    SiteProfile.objects.filter(pk=bench.profile.pk).update(status="disabled")
    bench.sku.active = False
    bench.sku.save()
    node = bench.node("c07u31", "10.10.7.31", state="provisioning")
    Onboarding.objects.create(
        site=bench.site,
        profile=bench.profile,
        sku=bench.sku,
        node=node,
        hostname="c07u31",
        ipmi_ip="10.10.7.31",
        correlation_id="x",
    )
    report = api.post(URL, body(bench), format="json").json()
    assert report["allowed"] is False
    failing = sorted(name for name, ok in guardrails(report).items() if not ok)
    assert failing == [
        "host_approved_and_confirmed",
        "no_open_workflow",
        "probe_healthy_and_fresh",
        "profile_active",
        "sku_active",
    ]
    detail = {g["name"]: g["detail"] for g in report["guardrails"]}
    assert "too old" in detail["probe_healthy_and_fresh"]
    assert "confirm_host" in detail["host_approved_and_confirmed"]


def test_an_active_node_is_not_onboardable(bench: Bench, api: APIClient) -> None:
    bench.node("c07u31", "10.10.7.31", state="active")
    report = api.post(URL, body(bench), format="json").json()
    assert guardrails(report)["node_onboardable"] is False


def test_the_plan_follows_policy(bench: Bench, api: APIClient) -> None:
    bench.policy(reachability_script="infra-reach")
    report = api.post(URL, body(bench), format="json").json()
    names = [s["name"] for s in report["stages"]]
    assert names.index("storage_pxe") < names.index("reachability") < names.index("deploy")


def test_maas_unreachable_is_reported_not_a_500(bench: Bench, api: APIClient) -> None:
    bench.sim.faults({"kind": "502", "count": 20})
    answer = api.post(URL, body(bench), format="json")
    assert answer.status_code == 200
    assert "error" in answer.json()["maas"]


def test_a_bad_body_is_a_400_and_an_unknown_site_too(bench: Bench, api: APIClient) -> None:
    bad = api.post(URL, body(bench, hostname="bad host\n"), format="json")
    assert bad.status_code == 400 and "hostname" in bad.json()["fields"]
    unknown = api.post(URL, {**body(bench), "site_id": 99999}, format="json")
    assert unknown.status_code == 400 and "site_id" in unknown.json()["fields"]

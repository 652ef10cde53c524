"""A node's timeline: every workflow of the node (any kind) and the operator actions on it,
merged by time, paginated, with its MAAS events merged in on request; and a workflow's detail
that does not wait on MAAS unless asked."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from decommission.workflow import KIND as DECOMMISSION
from maas_domain.models import Allocation, MaasSite
from maas_domain.services.allocations import allocation_release
from maas_domain.services.credentials import site_credentials_write
from onboarding.models import Onboarding
from onboarding.workflow import KIND as ONBOARDING
from tests.factories import make_node, make_onboarding, make_profile, make_site
from tests.support.maas import API_KEY, Sim

pytestmark = pytest.mark.django_db
BASE = "/api/v1/admin"


def node_with_history(admin: Any, site: MaasSite | None = None) -> tuple[Any, Onboarding]:
    site = site or make_site()
    node = make_node(site, hostname="gpu-9", state="active")
    wf = make_onboarding(site, node=node, hostname="gpu-9")
    ONBOARDING.add_event(wf, "workflow.created", "requested")
    ONBOARDING.add_event(wf, "stage.completed", "preflight ok", stage="preflight")
    from decommission.models import Decommission

    child = Decommission.objects.create(
        site=site, node=node, hostname="gpu-9", mode="reimage", correlation_id="t"
    )
    DECOMMISSION.add_event(child, "workflow.created", "reimage requested")
    allocation = Allocation.objects.create(node=node, holder="tenant-a")
    allocation_release(actor=admin, allocation_id=allocation.pk, reason="drained")
    return node, wf


def test_timeline_merges_kinds_and_operator_actions_oldest_first_paginated(
    api: APIClient, admin_user: Any
) -> None:
    node, wf = node_with_history(admin_user)
    other = make_node(make_site(), hostname="gpu-9")  # same hostname, other site: not merged
    make_onboarding(other.site, node=other, hostname="gpu-9")
    page = api.get(f"{BASE}/nodes/{node.pk}/timeline").json()
    assert page["count"] == 4
    entries = page["results"]
    # one order for every timeline (docs/api.md, "Timelines"): oldest first, as it happened
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    assert [(e["source"], e["kind"]) for e in entries] == [
        ("workflow", "workflow.created"),
        ("workflow", "stage.completed"),
        ("workflow", "workflow.created"),
        ("operator", "allocation.release"),
    ]
    assert [(e["workflow_kind"], e["workflow_id"]) for e in entries[:3]] == [
        ("onboarding", wf.pk),
        ("onboarding", wf.pk),
        ("decommission", node.decommissions.get().pk),
    ]
    assert entries[-1]["actor_name"] == "ops-admin" and entries[-1]["message"] == "drained"
    assert page["maas_events"]["requested"] is False
    first = api.get(f"{BASE}/nodes/{node.pk}/timeline", {"limit": 2}).json()
    second = api.get(first["next"]).json()
    assert [e["kind"] for e in first["results"] + second["results"]] == [e["kind"] for e in entries]
    assert second["next"] is None


def test_maas_events_are_merged_in_on_request_and_a_dead_maas_is_reported(
    api: APIClient, admin_user: Any, sim: Sim
) -> None:
    site = make_site(maas_url=sim.url)
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
    node, _ = node_with_history(admin_user, site)
    sid = sim.add(hostname="gpu-9", status="deployed")
    node.maas_system_id = sid
    node.save()
    with sim.model.lock:
        machine = sim.model.machines[sid]
        sim.model.event(machine, "INFO", "Deployed", "from the simulator")
    page = api.get(f"{BASE}/nodes/{node.pk}/timeline", {"maas_events": "true"}).json()
    assert page["maas_events"]["available"] is True
    maas = [e for e in page["results"] if e["source"] == "maas"]
    assert any(e["kind"] == "Deployed" for e in maas)
    moments = [datetime.fromisoformat(e["at"]) for e in page["results"]]
    assert moments == sorted(moments)  # MAAS stamps whole seconds: compared as times
    assert page["count"] == 4 + page["maas_events"]["fetched"]
    site.maas_url = "http://127.0.0.1:9/MAAS/"  # nothing listens there
    site.save()
    down = api.get(f"{BASE}/nodes/{node.pk}/timeline", {"maas_events": "true"})
    assert down.status_code == 200
    assert down.json()["maas_events"]["available"] is False
    assert down.json()["count"] == 4
    bad = api.get(f"{BASE}/nodes/{node.pk}/timeline", {"maas_events": "sometimes"})
    assert bad.status_code == 400 and "maas_events" in bad.json()["fields"]


def test_workflow_detail_does_not_call_maas_unless_asked_and_shows_the_age(
    api: APIClient, admin_user: Any, sim: Sim
) -> None:
    site = make_site(maas_url=sim.url)
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
    sid = sim.add(hostname="gpu-3", status="deployed")
    wf = make_onboarding(site, hostname="gpu-3", maas_system_id=sid, profile=make_profile(site))
    for i in range(60):
        ONBOARDING.add_event(wf, "maas.observed", f"look {i}")
    url = f"{BASE}/onboardings/{wf.pk}"
    sim.reset_counters()
    cold = api.get(url).json()
    assert cold["diagnostics"]["available"] is False and cold["diagnostics"]["age_seconds"] is None
    assert sim.count("machine.read") == 0
    fresh = api.get(url, {"diagnostics": "refresh"}).json()["diagnostics"]
    assert fresh["status"] == "Deployed" and fresh["age_seconds"] < 5
    reads = sim.count("machine.read")
    assert reads == 1
    cached = api.get(url).json()["diagnostics"]
    assert cached["status"] == "Deployed" and cached["fetched_at"] == fresh["fetched_at"]
    assert sim.count("machine.read") == reads  # served from the cache
    detail = api.get(url, {"diagnostics": "false"}).json()
    assert "diagnostics" not in detail
    assert detail["timeline_count"] == 60 and len(detail["timeline"]) == 50
    assert detail["timeline"][-1]["message"] == "look 59"  # the latest entries
    assert api.get(url, {"diagnostics": "maybe"}).status_code == 400
    page = api.get(f"{url}/timeline", {"limit": 25, "offset": 50}).json()
    assert page["count"] == 60 and page["results"][0]["message"] == "look 50"


def test_diagnostics_refreshes_are_bounded_per_machine_and_per_caller(
    admin_user: Any, sim: Sim, settings: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 refreshes with a read token made 120 MAAS requests in 4 s: a machine is fetched at
    most once per 10 s whoever asks (the workflow API, another workflow of the node, the admin
    pages), and each caller's fetches are limited (a 429 with Retry-After past the limit)."""
    from maas_domain import diagnostics
    from tests.support.tokens import bearer_token

    # the rule, not the machine's speed (raising=False: the code before the rule had none)
    monkeypatch.setattr(diagnostics, "REFRESH_INTERVAL", 3600, raising=False)
    settings.DIAGNOSTICS_REFRESHES_PER_MINUTE = 5
    site = make_site(maas_url=sim.url)
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
    profile = make_profile(site)
    sid = sim.add(hostname="gpu-3", status="deployed")
    first = make_onboarding(site, hostname="gpu-3", maas_system_id=sid, profile=profile)
    again = make_onboarding(site, hostname="gpu-3", maas_system_id=sid, profile=profile,
                            state="failed")  # fmt: skip
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(admin_user, scope='read')}")
    sim.reset_counters()
    answers = [reader.get(f"{BASE}/onboardings/{first.pk}", {"diagnostics": "refresh"})
               for _ in range(30)]  # fmt: skip
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["diagnostics"]["fetched_at"] for a in answers} != {None}
    assert len({a.json()["diagnostics"]["fetched_at"] for a in answers}) == 1
    assert sim.count("machine.read") == 1  # one fetch: 4 MAAS requests, not 120
    shared = reader.get(f"{BASE}/onboardings/{again.pk}", {"diagnostics": "refresh"})
    assert (
        shared.json()["diagnostics"]["fetched_at"] == answers[0].json()["diagnostics"]["fetched_at"]
    )  # the same machine: the same answer
    client.force_login(admin_user)
    page = client.get(f"/admin/onboarding/onboarding/{again.pk}/diagnostics/")
    assert page.status_code == 200 and "Deployed" in page.content.decode()
    assert sim.count("machine.read") == 1
    again.save()  # the workflow moved on since that fetch: it is not shown with the old one
    moved = reader.get(f"{BASE}/onboardings/{again.pk}", {"diagnostics": "refresh"}).json()
    assert moved["diagnostics"]["fetched_at"] != answers[0].json()["diagnostics"]["fetched_at"]
    assert sim.count("machine.read") == 2
    others = []
    for i in range(5):  # other machines: fetches this token has left (5 a minute, 2 used)
        other_sid = sim.add(hostname=f"gpu-{10 + i}", status="deployed")
        others.append(make_onboarding(site, hostname=f"gpu-{10 + i}", maas_system_id=other_sid,
                                      profile=profile))  # fmt: skip
    codes = [reader.get(f"{BASE}/onboardings/{wf.pk}", {"diagnostics": "refresh"})
             for wf in others]  # fmt: skip
    assert [c.status_code for c in codes] == [200, 200, 200, 429, 429]
    assert int(codes[-1]["Retry-After"]) >= 1 and codes[-1].json()["error"] == "throttled"
    assert sim.count("machine.read") == 5
    cached = reader.get(f"{BASE}/onboardings/{others[0].pk}")  # reading what was fetched: free
    assert cached.status_code == 200 and cached.json()["diagnostics"]["available"] is True

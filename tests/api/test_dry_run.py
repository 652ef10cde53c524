"""``?dry_run=true`` on every state-changing route (docs/api.md, "Dry runs").

The walk takes every mutating admin operation of docs/openapi.yaml, sends it a request the
real call would accept, with the flag, and checks that no row of any table changed and that the
simulator saw no mutation. The table of requests must cover the document: a new route without a
row here fails the walk.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone
from rest_framework.test import APIClient

from decommission.models import Decommission
from maas_domain import dryrun
from maas_domain.models import (
    Allocation,
    ApiToken,
    AuditLog,
    MaasSite,
    Node,
    RoceAssignment,
    SiteProfile,
)
from maas_domain.secrets import get_backend
from maas_domain.services import cordons
from maas_domain.services.tokens import api_token_create
from maas_domain.site_client import client_for_site
from onboarding.models import Onboarding, OnboardingBatch
from reconciliation.models import DriftRecord
from repair.models import Repair
from tests.support.flows import Flow, active_node
from tests.support.openapi import openapi_document
from tests.support.tokens import bearer_token

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
MUTATING = ("post", "put", "patch", "delete")
README_SITE = {
    "name": "lab-east",
    "maas_url": "http://maas.lab:5240/MAAS/",
    "policy": {"erase_mode": "secure", "deploy_retry_limit": 1},
}
ROCE_ROW = {"hostname": "dr-held", "interface": "ib1", "ipv4_cidr": "172.30.9.63/31"}
BATCH_ROWS = [
    {"hostname": "dr-b1", "ipmi_ip": "10.20.9.11"},
    {"hostname": "dr-b2", "ipmi_ip": "10.20.9.12"},
]
README_SITE = {
    "name": "lab-east",
    "maas_url": "http://maas.lab:5240/MAAS/",
    "policy": {"erase_mode": "secure", "deploy_retry_limit": 1},
}
ROCE_ROW = {"hostname": "dr-held", "interface": "ib1", "ipv4_cidr": "172.30.9.63/31"}
BATCH_ROWS = [
    {"hostname": "dr-b1", "ipmi_ip": "10.20.9.11"},
    {"hostname": "dr-b2", "ipmi_ip": "10.20.9.12"},
]


def mutating_operations() -> dict[str, tuple[str, str]]:
    """operationId → (method, path) of every state-changing admin operation."""
    paths = openapi_document()["paths"]
    return {
        op["operationId"]: (method, path)
        for path, ops in paths.items()
        if path.startswith("/api/v1/admin/")
        for method, op in ops.items()
        if method in MUTATING
    }


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table the project owns (and Django's auth and beat tables)."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
    }


def changed_tables(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(label for label in before if before[label] != after[label])


class World:
    """Rows every mutating operation can act on, on a probed site whose MAAS is the simulator."""

    def __init__(self, flow: Flow) -> None:
        now = timezone.now()
        self.flow = flow
        site, profile, sku = flow.site, flow.profile, flow.sku
        self.held = active_node(flow, "dr-held", "10.20.9.1")
        self.free = active_node(flow, "dr-free", "10.20.9.2")
        self.allocation = Allocation.objects.create(node=self.held, holder="tenant-a")
        cordons.operator_cordon(actor=None, node_id=self.held.pk, reason="seeded")
        self.broken = active_node(flow, "dr-broken", "10.20.9.6")
        Node.objects.filter(pk=self.broken.pk).update(state="quarantined")
        Onboarding.objects.create(
            site=site, profile=profile, sku=sku, node=self.broken, hostname="dr-broken",
            ipmi_ip="10.20.9.6", state="failed", stage="conformance", correlation_id="t",
        )  # fmt: skip
        fixing = active_node(flow, "dr-fixing", "10.20.9.7")
        self.repair = Repair.objects.create(
            site=site, node=fixing, profile=profile, hostname="dr-fixing",
            maas_system_id=fixing.maas_system_id, state="waiting", stage="in_repair",
            correlation_id="t",
        )  # fmt: skip
        self.failed = Onboarding.objects.create(
            site=site, profile=profile, sku=sku, hostname="dr-failed", ipmi_ip="10.20.9.3",
            state="failed", stage="deploy", failure_class="deploy_failed", correlation_id="t",
        )  # fmt: skip
        self.batch = OnboardingBatch.objects.create(
            site=site, profile=profile, sku=sku, size=1, created_by="t", correlation_id="t",
            state="paused", paused_reason="failure budget", paused_at=now,
        )  # fmt: skip
        Onboarding.objects.create(
            site=site, profile=profile, sku=sku, hostname="dr-queued", ipmi_ip="10.20.9.4",
            batch=self.batch, correlation_id="t",
        )  # fmt: skip
        gone = active_node(flow, "dr-gone", "10.20.9.5")
        self.decommission = Decommission.objects.create(
            site=site, node=gone, hostname="dr-gone", mode="reimage", correlation_id="t"
        )
        self.node_drift = DriftRecord.objects.create(
            site=site, kind="status_mismatch", severity="warning", subject=f"node:{self.free.pk}",
            node=self.free, system_id=self.free.maas_system_id, hostname="dr-free",
            message="seeded", first_seen_at=now, last_seen_at=now,
        )  # fmt: skip
        DriftRecord.objects.create(
            site=site, kind="unknown_machine", severity="info", subject="machine:abc123",
            system_id="abc123", hostname="stray", message="seeded", first_seen_at=now,
            last_seen_at=now,
        )  # fmt: skip
        self.roce = RoceAssignment.objects.create(
            site=site,
            hostname="dr-free",
            interface="ib0",
            ipv4_cidr="172.30.9.61/31",
            ipv4_address="172.30.9.61",
        )
        self.token, _ = api_token_create(actor=None, user=flow.admin, name="old-ci")
        self.spare = SiteProfile.objects.create(site=site, name="spare")
        self.idle_site = MaasSite.objects.create(
            name="idle", maas_url="http://idle.test:5240/MAAS/"
        )

    def requests(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """operationId → (path parameters, body) of a request the real call would accept."""
        f, site = self.flow, self.flow.site
        target = {"site_id": site.pk, "profile_id": f.profile.pk, "sku_id": f.sku.pk}
        return {
            "allocations_create": ({}, {"node_id": self.free.pk, "holder": "tenant-b"}),
            "allocations_release": ({"id": self.allocation.pk}, {"reason": "drained"}),
            "decommissions_verb": (
                {"id": self.decommission.pk, "verb": "cancel"},
                {"reason": "not now"},
            ),
            "sites_create": ({}, README_SITE),
            "sites_update": ({"id": site.pk}, {"policy": {"deploy_retry_limit": 3}}),
            "sites_disable": ({"id": self.idle_site.pk}, {}),
            "sites_set_credentials": (
                {"id": site.pk},
                {"maas_api_key": "ck:tk:secret", "ipmi": {"username": "u", "password": "p"}},
            ),
            "sites_probe": ({"id": site.pk}, {}),
            "profiles_create": ({"site_pk": site.pk}, {"name": "b200"}),
            "profiles_update": (
                {"site_pk": site.pk, "id": self.spare.pk},
                {"distro_series": "noble"},
            ),
            "profiles_disable": ({"site_pk": site.pk, "id": self.spare.pk}, {}),
            "roce_assignments_upsert": ({"site_pk": site.pk}, {"items": [ROCE_ROW]}),
            "roce_assignments_delete": ({"site_pk": site.pk, "id": self.roce.pk}, {}),
            "nodes_cordon": ({"id": self.free.pk}, {"reason": "suspect PSU"}),
            "nodes_uncordon": ({"id": self.held.pk}, {"reason": "PSU replaced"}),
            "nodes_repair": ({"node_pk": self.broken.pk}, {"ticket": "RMA-1"}),
            "repairs_verb": ({"id": self.repair.pk, "verb": "cancel"}, {"reason": "no"}),
            "repairs_requalify": ({"id": self.repair.pk}, {"note": "fixed"}),
            "nodes_decommission": (
                {"node_pk": self.held.pk},
                {"mode": "full", "confirm": True, "force_release": True, "reason": "RMA"},
            ),
            "nodes_storage_cleanup": (
                {"node_pk": self.free.pk},
                {"reason": "wipe", "confirm": True},
            ),
            "onboardings_start": ({}, {**target, "hostname": "dr-new", "ipmi_ip": "10.20.9.9"}),
            "onboardings_verb": ({"id": self.failed.pk, "verb": "retry"}, {"reason": "again"}),
            "onboardings_start_batch": ({}, {**target, "rows": BATCH_ROWS}),
            "onboarding_batches_cancel": ({"id": self.batch.pk}, {"reason": "stop"}),
            "onboarding_batches_resume": ({"id": self.batch.pk}, {"reason": "fixed"}),
            "drift_resolve_node": (
                {"node_id": self.free.pk},
                {"action": "acknowledge", "reason": "known"},
            ),
            "drift_resolve_machine": (
                {"system_id": "abc123"},
                {"action": "acknowledge", "reason": "known"},
            ),
            "reconciliation_run": ({}, {}),
            "leaks_sweep": ({}, {"site_id": site.pk, "reason": "clean-up"}),
            "skus_create": ({}, {"code": "gpu-8x-b200", "name": "8x B200", "gpu_count": 8}),
            "skus_update": ({"id": f.sku.pk}, {"name": "8x H100 SXM"}),
            "skus_delete": ({"id": f.sku.pk}, {}),
            "tokens_create": ({}, {"name": "ci", "scope": "operate"}),
            "tokens_revoke": ({"id": self.token.pk}, {"reason": "rotated"}),
        }


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(user, scope='admin')}")
    client.get("/api/v1/admin/")  # the token's last-use time is written once, before the walk
    return client


def send(
    client: APIClient, method: str, path: str, params: dict[str, Any], body: dict[str, Any], q: str
) -> Any:
    url = path.format(**params) + q
    return client.generic(method.upper(), url, data=_json(body), content_type="application/json")


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body)


@pytest.mark.slow
def test_every_mutating_operation_rehearses_and_changes_nothing(flow_site: Flow) -> None:
    world = World(flow_site)
    table = world.requests()
    operations = mutating_operations()
    assert set(table) == set(operations), "every mutating operation needs a request here"
    client = client_for(flow_site.admin)
    flow_site.sim.reset_counters()
    before = snapshot()
    for op_id, (params, body) in sorted(table.items()):
        method, path = operations[op_id]
        response = send(client, method, path, params, body, "?dry_run=true")
        assert response.status_code == 200, (op_id, response.content)
        assert response.json()["dry_run"] is True, op_id
        assert changed_tables(before, snapshot()) == [], op_id
    assert flow_site.sim.mutations() == []


@pytest.mark.slow
def test_a_full_decommission_dry_run_leaves_the_node_active_and_says_what_would_happen(
    flow_site: Flow,
) -> None:
    node = active_node(flow_site, "dr-full", "10.20.9.21")
    Allocation.objects.create(node=node, holder="tenant-a")
    client = client_for(flow_site.admin)
    before = snapshot()
    response = client.post(
        f"/api/v1/admin/nodes/{node.pk}/decommission?dry_run=true",
        {"mode": "full", "confirm": True, "force_release": True, "reason": "RMA"},
        format="json",
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["status"] == 202
    assert plan["answer"]["mode"] == "full"
    assert plan["answer"]["hostname"] == "dr-full"
    [started] = plan["workflows"]
    assert started["kind"] == "decommission"
    assert started["count"] == 1
    stages = [s["name"] for s in started["stages"]]
    assert "retire" in stages and "release" in stages
    assert any("delete" in call.lower() for call in plan["maas_calls"])
    actions = {c["action"] for c in plan["changes"]}
    assert {"allocation.force_release", "decommission.start.full"} <= actions
    assert changed_tables(before, snapshot()) == []
    node.refresh_from_db()
    assert node.state == "active"
    assert not Decommission.objects.filter(node=node).exists()
    assert flow_site.sim.mutations() == []


@pytest.mark.slow
def test_a_refused_request_is_refused_the_same_way_in_a_dry_run(flow_site: Flow) -> None:
    node = active_node(flow_site, "dr-held2", "10.20.9.22")
    Allocation.objects.create(node=node, holder="tenant-a")
    client = client_for(flow_site.admin)
    url = f"/api/v1/admin/nodes/{node.pk}/decommission"
    body = {"mode": "full", "confirm": True, "reason": "RMA"}  # no force_release: refused
    rehearsed = client.post(url + "?dry_run=true", body, format="json")
    real = client.post(url, body, format="json")
    assert rehearsed.status_code == real.status_code >= 400
    assert rehearsed.json()["error"] == real.json()["error"]
    assert not Decommission.objects.filter(node=node).exists()


@pytest.mark.slow
def test_dry_run_values(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    url = "/api/v1/admin/skus"
    for bad in ("maybe", "TRUE ", "2"):
        response = client.post(f"{url}?dry_run={bad}", {"code": "x1", "name": "X"}, format="json")
        assert response.status_code == 400, bad
        assert "dry_run" in response.json()["fields"]
    for yes in ("", "true", "1", "yes", "True"):
        response = client.post(f"{url}?dry_run={yes}", {"code": "x2", "name": "X"}, format="json")
        assert response.status_code == 200 and response.json()["dry_run"] is True, yes
    bare = client.post(f"{url}?dry_run", {"code": "x3", "name": "X"}, format="json")
    assert bare.status_code == 200 and bare.json()["dry_run"] is True
    assert not apps.get_model("maas_domain", "Sku").objects.filter(code__startswith="x").exists()
    real = client.post(f"{url}?dry_run=false", {"code": "x4", "name": "X"}, format="json")
    assert real.status_code == 201


@pytest.mark.slow
def test_a_token_dry_run_shows_no_token_value(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    count = ApiToken.objects.count()
    response = client.post(
        "/api/v1/admin/tokens?dry_run=true", {"name": "ci", "scope": "read"}, format="json"
    )
    assert response.status_code == 200
    plan = response.json()
    assert plan["status"] == 201
    assert "token" not in plan["answer"]
    prefix = plan["answer"]["prefix"]  # the public first characters that name a token
    assert {t for t in re.findall(r"mcp_[\w-]+", response.content.decode())} == {prefix}
    assert ApiToken.objects.count() == count


@pytest.mark.slow
def test_routes_that_cannot_plan_refuse_the_flag(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    for url in (
        "/api/v1/node/enroll?dry_run=true",
        "/api/v1/node/report?dry_run=true",
        "/api/v1/node/checkin?dry_run=true",
    ):
        response = APIClient().post(url, {}, format="json")
        assert response.status_code == 400, url
        assert "dry_run" in response.json()["fields"], url
    response = client.get("/api/v1/admin/nodes?dry_run=true")
    assert response.status_code == 400
    assert "dry_run" in response.json()["fields"]


@pytest.mark.slow
def test_dry_runs_use_their_own_rate_limit_bucket(flow_site: Flow, settings: Any) -> None:
    settings.API_MUTATIONS_PER_MINUTE = 3
    client = client_for(flow_site.admin)
    body = {"code": "rl", "name": "Rate"}
    for _ in range(3):
        assert (
            client.post("/api/v1/admin/skus?dry_run=true", body, format="json").status_code == 200
        )
    assert client.post("/api/v1/admin/skus?dry_run=true", body, format="json").status_code == 429
    # the three mutations an operator is allowed are still there
    for i in range(3):
        answer = client.post("/api/v1/admin/skus", {"code": f"rl{i}", "name": "R"}, format="json")
        assert answer.status_code == 201
    assert (
        client.post("/api/v1/admin/skus", {"code": "rl9", "name": "R"}, format="json").status_code
        == 429
    )


@pytest.mark.slow
def test_a_dry_run_with_an_idempotency_key_is_not_replayed_later(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    node = active_node(flow_site, "dr-idem", "10.20.9.23")
    url = f"/api/v1/admin/nodes/{node.pk}/storage-cleanup"
    body = {"reason": "wipe", "confirm": True}
    headers: dict[str, Any] = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    assert client.post(url + "?dry_run=true", body, format="json", **headers).status_code == 200
    real = client.post(url, body, format="json", **headers)
    assert real.status_code == 202, real.content
    assert Decommission.objects.filter(node=node, mode="storage_cleanup").count() == 1


@pytest.mark.slow
def test_credentials_dry_run_writes_no_secret(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    site = flow_site.site
    path = f"regions/{site.region}/sites/{site.pk}/maas-api-key"
    version_before = get_backend().read(path)
    response = client.post(
        f"/api/v1/admin/maas-sites/{site.pk}/credentials?dry_run=true",
        {"maas_api_key": "ck:tk:newsecret"},
        format="json",
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["answer"]["maas_api_key"]["pending_version"] is not None
    assert "newsecret" not in response.content.decode()
    assert get_backend().read(path) == version_before
    assert [c["action"] for c in plan["changes"]] == ["maas_site.credentials.write"]


@pytest.mark.slow
def test_probe_dry_run_stores_nothing(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    site = flow_site.site
    audits = AuditLog.objects.count()
    checked = site.last_probe_at
    response = client.post(
        f"/api/v1/admin/maas-sites/{site.pk}/probe?dry_run=true", {}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["dry_run"] is True
    assert response.json()["health"] == "healthy"
    site.refresh_from_db()
    assert site.last_probe_at == checked
    assert AuditLog.objects.count() == audits


@pytest.mark.slow
def test_probe_dry_run_never_sends_the_key_to_an_unconfirmed_address(flow_site: Flow) -> None:
    client = client_for(flow_site.admin)
    site = flow_site.site
    moved = flow_site.sim.url.replace("127.0.0.1", "localhost")
    assert (
        client.patch(
            f"/api/v1/admin/maas-sites/{site.pk}", {"maas_url": moved}, format="json"
        ).status_code
        == 200
    )
    flow_site.sim.reset_counters()
    response = client.post(
        f"/api/v1/admin/maas-sites/{site.pk}/probe?dry_run=true",
        {"confirm_maas_url": moved},
        format="json",
    )
    assert response.status_code == 200, response.content
    checks = {c["name"]: c for c in response.json()["checks"]}
    assert checks["authentication"]["ok"] is False
    assert "dry run" in checks["authentication"]["detail"]
    assert flow_site.sim.count("users.whoami") == 0
    site.refresh_from_db()
    from maas_domain.models import SiteCredential

    ref = SiteCredential.objects.get(site=site, kind="maas_api_key")
    assert not ref.bound_to(site)


@pytest.mark.django_db
def test_a_maas_mutation_during_a_dry_run_is_refused(sim: Any) -> None:
    from maas_domain.services.credentials import site_credentials_write
    from tests.factories import make_site
    from tests.support.maas import API_KEY

    site = make_site(maas_url=sim.url)
    site_credentials_write(actor=None, site=site, payload={"maas_api_key": API_KEY})
    sid = sim.add(hostname="dr-guard", status="ready")
    client = client_for_site(site)
    with dryrun.rehearsing(), pytest.raises(dryrun.DryRunViolation):
        client.power_off(sid)
    assert client.get_machine(sid).hostname == "dr-guard"  # reads are fine outside
    assert sim.mutations() == []
    with dryrun.rehearsing(), pytest.raises(dryrun.DryRunViolation):
        get_backend().write("sites/x/y", {"a": "b"})

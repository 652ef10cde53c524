"""The fleet page, the admin's home (docs/admin.md, "The fleet page"): per site, nodes by
state, open drift by severity, workflows running, waiting or waiting for an operator, batches
in flight; every number the API's own count for the same filter and a link to the list it
counts; node states read from the state machine, so a new state shows by itself."""

from __future__ import annotations

import re
from html import unescape as html_unescape
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from decommission.models import Decommission
from maas_domain.models import Node
from maas_domain.services import cordons
from onboarding.models import OnboardingBatch
from reconciliation.models import DriftRecord
from tests.factories import make_node, make_onboarding, make_profile, make_site, make_sku

pytestmark = pytest.mark.django_db
CARD = re.compile(
    r'<section class="fleet-card[^"]*" data-site="(?P<site>\w+)">(?P<card>.*?)</section>', re.S
)  # a site's card (or every site's: "all")
COUNT = re.compile(
    r'data-count="(?P<key>[\w.]+)"(?: data-n="(?P<n>\d+)")?[^>]*>'
    r'<span class="fleet-label">[^<]*</span> (?:<a href="(?P<href>[^"]+)")?'
)


def drift(site: Any, severity: str, n: int, **extra: Any) -> None:
    now = timezone.now()
    for i in range(n):
        DriftRecord.objects.create(
            site=site, kind="unknown_machine", severity=severity, subject=f"machine:{severity}{i}",
            system_id=f"{severity[:2]}{i}", message="seen", first_seen_at=now, last_seen_at=now,
            **extra,
        )  # fmt: skip


@pytest.fixture
def world() -> dict[str, Any]:
    east, west = make_site(name="east"), make_site(name="west", health="healthy")
    sku = make_sku()
    for state, n in (("active", 3), ("quarantined", 1), ("provisioning", 2), ("retired", 1)):
        for _ in range(n):
            make_node(east, sku=sku, state=state)
    make_node(west, sku=sku, state="active")
    draining = make_node(west, sku=sku, state="draining")
    cordons.operator_cordon(actor=None, node_id=draining.pk, reason="suspect PSU")
    cordons.operator_cordon(actor=None, node_id=make_node(east, sku=sku, state="active").pk,
                            reason="fans")  # fmt: skip
    drift(east, "critical", 2)
    drift(east, "warning", 1)
    drift(west, "info", 1)
    DriftRecord.objects.create(
        site=west,
        kind="leak",
        severity="critical",
        subject="machine:ack",
        state="acknowledged",
        message="seen",
        first_seen_at=timezone.now(),
        last_seen_at=timezone.now(),
    )  # fmt: skip  (acknowledged: not open)
    profile = make_profile(east)
    batch = OnboardingBatch.objects.create(site=east, profile=profile, sku=sku, size=3,
                                           created_by="t", correlation_id="t")  # fmt: skip
    make_onboarding(east, profile=profile, sku=sku, batch=batch, state="running")
    make_onboarding(east, profile=profile, sku=sku, batch=batch, state="waiting")
    make_onboarding(east, profile=profile, sku=sku, batch=batch, state="succeeded")
    done = OnboardingBatch.objects.create(site=east, profile=profile, sku=sku, size=1,
                                          created_by="t", correlation_id="t")  # fmt: skip
    make_onboarding(east, profile=profile, sku=sku, batch=done, state="failed")
    make_onboarding(west, state="manual_intervention")
    Decommission.objects.create(site=west, node=draining, hostname=draining.hostname,
                                mode="reimage", correlation_id="t", state="running")  # fmt: skip
    return {"east": east, "west": west}


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def page_counts(html: str) -> dict[str, dict[str, tuple[int | None, str]]]:
    """site id (or "all") -> column key -> (count, link) as the page shows them."""
    found: dict[str, dict[str, tuple[int | None, str]]] = {}
    for row in CARD.finditer(html):
        found[row["site"]] = {
            m["key"]: (
                int(m["n"]) if m["n"] is not None else None,
                html_unescape(m["href"] or ""),
            )
            for m in COUNT.finditer(row["card"])
        }
    return found


def api_count(api: APIClient, key: str, site: int | None) -> int:
    """The API's answer for the same question as a fleet cell (its own filters)."""
    where: dict[str, Any] = {"site": site} if site is not None else {}
    group, rest = key.split(".", 1)
    if key == "nodes.cordoned":
        return int(api.get("/api/v1/admin/nodes", {**where, "cordoned": "true"}).json()["count"])
    if group == "nodes":
        return int(api.get("/api/v1/admin/nodes", {**where, "state": rest}).json()["count"])
    if group == "drift":
        query = {**where, "severity": rest, "state": "open"}
        return int(api.get("/api/v1/admin/reconciliation/drift", query).json()["count"])
    if group == "workflows":
        kind, state = rest.split(".")
        return int(api.get(f"/api/v1/admin/{kind}s", {**where, "state": state}).json()["count"])
    if group == "batches":
        rows = api.get("/api/v1/admin/onboardings/batches", {**where, "limit": 500}).json()
        return sum(1 for b in rows["results"] if b["phase"] != "finished")
    raise AssertionError(f"no API question for {key}")


def test_every_count_is_the_api_s_and_links_to_its_filtered_list(
    ops: Any, api: APIClient, world: dict[str, Any]
) -> None:
    response = ops.get("/admin/")
    assert response.status_code == 200
    counts = page_counts(response.content.decode())
    sites = {str(world["east"].pk): world["east"].pk, str(world["west"].pk): world["west"].pk}
    assert set(counts) == {*sites, "all"}
    checked = 0
    for row, cells in counts.items():
        site = sites.get(row)
        for key, (n, link) in cells.items():
            if n is None:
                continue  # not counted yet (below)
            assert n == api_count(api, key, site), (row, key)
            listed = ops.get(link)  # the list the number opens shows those rows
            assert listed.status_code == 200, link
            assert listed.context["cl"].result_count == n, (row, key, link)
            if site is not None:
                assert ("site__id__exact", str(site)) in parse_qsl(urlsplit(link).query)
            checked += 1
    assert checked > 30
    east = counts[str(world["east"].pk)]
    assert east["nodes.active"][0] == 4 and east["nodes.quarantined"][0] == 1
    assert east["nodes.cordoned"][0] == 1 and counts["all"]["nodes.cordoned"][0] == 2
    assert east["drift.critical"][0] == 2 and east["batches.in_flight"][0] == 1
    west = counts[str(world["west"].pk)]
    assert west["drift.critical"][0] == 0  # acknowledged is not open
    assert west["workflows.onboarding.manual_intervention"][0] == 1
    assert west["workflows.decommission.running"][0] == 1
    assert counts["all"]["nodes.active"][0] == 5


def test_node_columns_come_from_the_state_machine(
    ops: Any, world: dict[str, Any], monkeypatch: Any
) -> None:
    """A state the node state machine declares gets its column with nothing else to change
    (issue 33's in_repair will)."""
    field = Node._meta.get_field("state")
    declared = [value for value, _ in field.choices or []]
    cells = page_counts(ops.get("/admin/").content.decode())["all"]
    assert [k for k in cells if k.startswith("nodes.") and k != "nodes.cordoned"] == [
        f"nodes.{s}" for s in declared
    ]
    monkeypatch.setattr(field, "choices", [*(field.choices or []), ("in_repair", "in_repair")])
    cells = page_counts(ops.get("/admin/").content.decode())["all"]
    assert cells["nodes.in_repair"][0] == 0


def test_counts_not_built_yet_have_their_place_and_say_which_issue_brings_them(
    ops: Any, world: dict[str, Any]
) -> None:
    html = ops.get("/admin/").content.decode()
    cells = page_counts(html)["all"]
    assert cells["workflows.over_time_limit"] == (None, "")
    assert "arrives with issue 35 (workflow time limits)" in html


def test_the_page_costs_the_same_queries_for_two_sites_or_twenty(
    ops: Any, world: dict[str, Any]
) -> None:
    ops.get("/admin/")  # warm (sessions, content types)
    with CaptureQueriesContext(connection) as two:
        ops.get("/admin/")
    for i in range(18):
        site = make_site(name=f"more-{i}")
        node = make_node(site, state="active")
        cordons.operator_cordon(actor=None, node_id=node.pk, reason="x")
        drift(site, "warning", 1)
    with CaptureQueriesContext(connection) as twenty:
        ops.get("/admin/")
    assert len(twenty) == len(two), [q["sql"][:120] for q in twenty.captured_queries]


def test_a_user_without_the_read_role_sees_no_counts(client: Any, world: dict[str, Any]) -> None:
    client.force_login(get_user_model().objects.create_user("nobody", password="x",
                                                             is_staff=True))  # fmt: skip
    html = client.get("/admin/").content.decode()
    assert 'id="fleet"' not in html and "east" not in html

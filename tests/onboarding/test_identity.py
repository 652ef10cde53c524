"""One visible name, one BMC and one MAAS machine per live node (docs/security.md, T4).

Identifier validators match the whole string: ``"c07u40\\n"`` is not ``c07u40``. The database
holds at most one live (non-retired) node per site for each IPMI address and each MAAS system
id, and the services answer a clash with a 409 or a row error, never a 500.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from maas_domain import validators
from maas_domain.models import MaasSite, Node, SiteProfile, Sku
from onboarding.models import Onboarding
from tests.factories import make_node, make_profile, make_site, make_sku
from tests.support.flows import Flow, settle, start

URL = "/api/v1/admin/onboardings"


@pytest.fixture
def target(db: None) -> tuple[MaasSite, SiteProfile, Sku]:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    return site, make_profile(site), make_sku()


def ids(target: tuple[MaasSite, SiteProfile, Sku]) -> dict[str, Any]:
    site, profile, sku = target
    return {"site_id": site.pk, "profile_id": profile.pk, "sku_id": sku.pk}


@pytest.mark.parametrize(
    ("name", "good"),
    [
        ("hostname_error", "c07u40"),
        ("interface_error", "ens1f0"),
        ("version_error", "2.3.0+rack7"),
        ("digest_error", "sha256:" + "a" * 64),
        ("ipv4_error", "10.0.0.1"),
        ("ipv4_cidr_error", "172.30.9.61/31"),
    ],
)
@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\x00", "\t"])
def test_every_identifier_validator_matches_the_whole_string(
    name: str, good: str, tail: str
) -> None:
    check = getattr(validators, name)
    assert check(good) is None
    assert check(good + tail) is not None
    assert check(tail + good) is not None


@pytest.mark.django_db
def test_a_trailing_newline_hostname_is_refused_in_a_batch_row(api: APIClient, target: Any) -> None:
    Node.objects.create(site=target[0], sku=target[2], hostname="c07u40", state="active")
    response = api.post(
        f"{URL}/batch",
        {**ids(target), "rows": [{"hostname": "c07u40\n", "ipmi_ip": "10.10.7.40"}]},
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert response.json()["rows"][0]["field"] == "hostname"
    assert Node.objects.filter(hostname__startswith="c07u40").count() == 1
    assert not Onboarding.objects.exists()


@pytest.mark.django_db
def test_a_trailing_newline_hostname_is_refused_on_a_single_start(
    api: APIClient, target: Any
) -> None:
    response = api.post(
        URL, {**ids(target), "hostname": "c07u40\n", "ipmi_ip": "10.10.7.40"}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert "hostname" in response.json()["fields"]
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_database_allows_one_live_node_per_ipmi_address_and_system_id(target: Any) -> None:
    site, _, sku = target
    first = make_node(site, sku=sku, ipmi_ip="10.9.0.1", maas_system_id="abc123", state="active")
    for clash in ({"ipmi_ip": "10.9.0.1"}, {"maas_system_id": "abc123"}):
        with pytest.raises(IntegrityError), transaction.atomic():
            make_node(site, sku=sku, state="active", **clash)
    # another site has its own BMC network and its own MAAS
    make_node(make_site(), sku=sku, ipmi_ip="10.9.0.1", maas_system_id="abc123")
    # a retired node keeps its history and frees both
    Node.objects.filter(pk=first.pk).update(state="retired")
    make_node(site, sku=sku, ipmi_ip="10.9.0.1", maas_system_id="abc123", state="active")
    # many nodes may have no BMC address or no machine yet
    make_node(site, sku=sku, ipmi_ip=None, maas_system_id="")
    make_node(site, sku=sku, ipmi_ip=None, maas_system_id="")


@pytest.mark.django_db
def test_starting_a_host_on_another_nodes_bmc_is_409(api: APIClient, target: Any) -> None:
    site, _, sku = target
    Node.objects.create(site=site, sku=sku, hostname="c07u41", ipmi_ip="10.10.7.41", state="active")
    response = api.post(
        URL, {**ids(target), "hostname": "c07u99", "ipmi_ip": "10.10.7.41"}, format="json"
    )
    assert response.status_code == 409, response.json()
    assert "c07u41" in response.json()["detail"]
    assert not Onboarding.objects.exists()
    assert not Node.objects.filter(hostname="c07u99").exists()


@pytest.mark.django_db
def test_a_batch_row_on_another_nodes_bmc_is_a_row_error(api: APIClient, target: Any) -> None:
    site, _, sku = target
    Node.objects.create(site=site, sku=sku, hostname="c07u41", ipmi_ip="10.10.7.41", state="active")
    rows = [
        {"hostname": "c07u98", "ipmi_ip": "10.10.7.98"},
        {"hostname": "c07u99", "ipmi_ip": "10.10.7.41"},
    ]
    response = api.post(f"{URL}/batch", {**ids(target), "rows": rows}, format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["rows"]
    assert [(e["index"], e["field"]) for e in errors] == [(1, "ipmi_ip")]
    assert "c07u41" in errors[0]["reason"]
    assert not Onboarding.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_discover_refuses_a_machine_another_live_node_holds(flow: Flow) -> None:
    """The hostname matches a MAAS machine that our inventory already has as another live node
    (renamed in MAAS): taking it would give two nodes one machine. Fail closed, touch nothing."""
    sid = flow.sim.add(hostname="c07u60", status="ready", power_address="10.10.7.61")
    Node.objects.create(
        site=flow.site,
        sku=flow.sku,
        hostname="c07u61",
        ipmi_ip="10.10.7.61",
        maas_system_id=sid,
        state="active",
    )
    wf = settle(start(flow, "c07u60", "10.10.7.60").pk)
    assert (wf.state, wf.stage, wf.failure_class) == ("failed", "discover", "ambiguous")
    assert "c07u61" in wf.reason
    assert flow.sim.mutations(sid) == []
    assert list(Node.objects.filter(maas_system_id=sid).values_list("hostname", flat=True)) == [
        "c07u61"
    ]


@pytest.mark.django_db
def test_a_batch_names_every_node_another_kind_holds_not_only_the_first_fifty(
    api: APIClient, target: Any
) -> None:
    from decommission.models import Decommission

    site = target[0]
    hosts = [f"h{i:03d}" for i in range(70)]
    for host in hosts:
        node = make_node(site, hostname=host, state="registered")
        Decommission.objects.create(
            site=site, node=node, hostname=host, mode="storage_cleanup", state="running",
            stage="release", correlation_id="c",
        )  # fmt: skip
    rows = [{"hostname": h, "ipmi_ip": f"10.20.0.{i + 1}"} for i, h in enumerate(hosts)]
    response = api.post(f"{URL}/batch", {**ids(target), "rows": rows}, format="json")
    assert response.status_code == 400, response.json()
    held = {e["index"] for e in response.json()["rows"] if "open decommission" in e["reason"]}
    assert held == set(range(70))
    assert not Onboarding.objects.exists()

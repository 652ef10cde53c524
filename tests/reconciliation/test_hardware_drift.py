"""Hardware drift after deploy (reconciliation/hardware.py, docs/hardware.md): a reconcile run
judges what MAAS's hardware sync reports of an in-service node's machine against its SKU, and
sees a sync that stopped. Made real in the simulator: a GPU lost after deploy shows at its next
sync; a sync that stops reporting goes stale on MAAS's own clock."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_client.client import MaasClient
from maas_domain.models import Allocation, MaasSite, Node
from reconciliation import hardware
from reconciliation.models import DriftRecord, NodeMaasState
from tests.factories import make_node, make_sku
from tests.reconciliation.conftest import reconcile
from tests.support.maas import Sim

pytestmark = pytest.mark.django_db
SYNC = 900  # MAAS's default hardware sync interval (seconds)


def deployed(sim: Sim, maas: MaasClient, site: MaasSite, host: str, ip: str, **faults: Any) -> Node:
    """An active node whose machine was deployed with hardware sync and synced once since."""
    sid = sim.add(hostname=host, status="ready", power_address=ip, faults=faults)
    maas.deploy(sid, distro_series="jammy", enable_hw_sync=True)
    sim.advance(300 + SYNC + 60)  # deployed, then its first sync after deploy
    sku = make_sku(gpu_count=8, gpu_model="H100", hardware={"gpu": {"pci_ids": ["10de:2330"]}})
    return make_node(site, sku=sku, hostname=host, ipmi_ip=ip, maas_system_id=sid, state="active")


def drift(site: MaasSite, kind: str) -> list[DriftRecord]:
    return list(DriftRecord.objects.filter(site=site, kind=kind).order_by("id"))


def test_a_gpu_lost_after_deploy_is_critical_hardware_drift_naming_it(
    sim: Sim, maas: MaasClient, site: MaasSite
) -> None:
    good = deployed(sim, maas, site, "hw-ok", "10.10.1.1")
    lost = deployed(sim, maas, site, "hw-lost", "10.10.1.2", gpu_lost_after_deploy=1)
    run = reconcile(site)
    assert run.state == "succeeded", run.maas_errors
    found = drift(site, "hardware_nonconformant")
    assert [(r.node_id, r.severity, r.state) for r in found] == [(lost.pk, "critical", "open")]
    assert "gpu.count: expected 8 x 10de:2330, observed 7" in found[0].message
    assert found[0].detail["failed"][0]["requirement"] == "gpu.count"
    # the verdict is kept with the node's MAAS picture, the good one judged conformant
    states = {s.node_id: s for s in NodeMaasState.objects.all()}
    assert (states[good.pk].hw_conformant, states[lost.pk].hw_conformant) == (True, False)
    # two reads per judged machine (its facts and its PCI devices), beside the listing's three
    assert run.maas_requests == 3 + 2 * 2


def test_a_node_whose_gpu_vanished_takes_no_new_tenant_after_one_run(
    sim: Sim, maas: MaasClient, site: MaasSite, api: APIClient
) -> None:
    """The fleet loop's first step (docs/operations.md, "Cordons"): the critical drift cordons
    the node in the same run, so a new allocation is refused naming why; the node it replaces
    in the pool, the one that conforms, still takes one. An operator who lifts the cordon with a
    reason is not overruled by the next run seeing the same drift."""
    good = deployed(sim, maas, site, "hw-pool", "10.10.1.8")
    lost = deployed(sim, maas, site, "hw-gone", "10.10.1.9", gpu_lost_after_deploy=1)
    assert api.post("/api/v1/admin/allocations", {"node_id": lost.pk, "holder": "before"},
                    format="json").status_code == 201  # fmt: skip
    api.post(f"/api/v1/admin/allocations/{Allocation.objects.get().pk}/release", {"reason": "x"},
             format="json")  # fmt: skip
    reconcile(site)
    refused = api.post(
        "/api/v1/admin/allocations", {"node_id": lost.pk, "holder": "t"}, format="json"
    )
    assert refused.status_code == 409, refused.json()
    [why] = refused.json()["cordons"]
    assert why["reason"] == "drift" and "gpu.count" in why["detail"]
    assert why["source"] == f"drift:{drift(site, 'hardware_nonconformant')[0].pk}"
    ok = api.post("/api/v1/admin/allocations", {"node_id": good.pk, "holder": "t"}, format="json")
    assert ok.status_code == 201
    lifted = api.post(f"/api/v1/admin/nodes/{lost.pk}/uncordon",
                      {"reason": "tenant accepts 7 GPUs until the RMA"}, format="json")  # fmt: skip
    assert lifted.status_code == 200
    sim.advance(SYNC + 60)  # another sync, still 7 GPUs: judged again, the drift stays open
    reconcile(site)
    assert api.get(f"/api/v1/admin/nodes/{lost.pk}").json()["schedulable"] is True


def test_a_run_without_a_new_sync_reads_nothing_more_and_keeps_the_drift(
    sim: Sim, maas: MaasClient, site: MaasSite
) -> None:
    deployed(sim, maas, site, "hw-keep", "10.10.1.3", gpu_lost_after_deploy=1)
    reconcile(site)
    again = reconcile(site)  # no sync since: nothing judged again, the drift stays open
    assert again.maas_requests == 3
    (rec,) = drift(site, "hardware_nonconformant")
    assert (rec.state, rec.occurrences) == ("open", 2)


def test_a_sync_that_stopped_is_stale_drift_on_maas_clock(
    sim: Sim, maas: MaasClient, site: MaasSite
) -> None:
    node = deployed(sim, maas, site, "hw-stale", "10.10.1.4", hw_sync_stops=True)
    fresh = deployed(sim, maas, site, "hw-fresh", "10.10.1.5")
    sim.advance(2 * SYNC)  # past 1.5 x the interval since the stopped one last reported
    reconcile(site)
    stale = drift(site, "hardware_sync_stale")
    assert [(r.node_id, r.severity) for r in stale] == [(node.pk, "warning")]
    assert stale[0].detail["sync_interval"] == SYNC
    assert fresh.pk not in {r.node_id for r in stale}


def test_hardware_drift_is_acknowledged_never_adopted(
    sim: Sim, maas: MaasClient, site: MaasSite, api: APIClient
) -> None:
    node = deployed(sim, maas, site, "hw-ack", "10.10.1.6", gpu_lost_after_deploy=1)
    reconcile(site)
    # the filter docs/operations.md tells the operator to use, and a mistyped kind refused
    listed = api.get("/api/v1/admin/reconciliation/drift?kind=hardware_nonconformant")
    assert listed.status_code == 200, listed.json()
    assert [r["kind"] for r in listed.json()["results"]] == ["hardware_nonconformant"]
    wrong = api.get("/api/v1/admin/reconciliation/drift?kind=hardware_nonconformant%0A")
    assert wrong.status_code == 400, wrong.json()
    url = f"/api/v1/admin/reconciliation/drift/{node.pk}/resolve"
    body = {"action": "acknowledge", "kind": "hardware_nonconformant", "reason": "RMA"}
    rehearsal = api.post(f"{url}?dry_run=true", body, format="json")
    assert rehearsal.status_code == 200, rehearsal.json()
    assert drift(site, "hardware_nonconformant")[0].state == "open"  # the dry run changed nothing
    adopt = api.post(url, {"action": "adopt", "kind": "hardware_nonconformant"}, format="json")
    assert adopt.status_code == 409 and "cannot be adopted" in adopt.json()["detail"]
    ack = api.post(url, {"action": "acknowledge", "kind": "hardware_nonconformant",
                         "reason": "RMA opened"}, format="json")  # fmt: skip
    assert ack.status_code == 200, ack.json()
    assert drift(site, "hardware_nonconformant")[0].state == "acknowledged"
    assert maas.get_machine(node.maas_system_id).status_name == "Deployed"  # MAAS untouched


def test_at_most_the_per_run_cap_is_judged_oldest_judgements_first() -> None:
    from datetime import UTC, datetime

    from maas_client.types import MachineSummary

    def candidate(i: int, checked: datetime | None) -> hardware.Candidate:
        return hardware.Candidate(i, f"h{i}", f"s{i}", 8, "", {}, "old", checked)

    machines = {
        f"s{i}": MachineSummary(f"s{i}", f"h{i}", 6, "Deployed", "on", "a", True, "new", 900)
        for i in range(hardware.MAX_CHECKS_PER_RUN + 10)
    }
    older, newer = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)
    cands = [candidate(i, older if i >= 50 else newer) for i in range(len(machines))]
    due = hardware.to_judge(cands, machines)
    assert len(due) == hardware.MAX_CHECKS_PER_RUN
    assert {c.node_id for c in due} >= set(range(50, 60))  # the oldest judgements first
    # a machine whose sync did not move, or that does not sync, is never judged
    same = [hardware.Candidate(1, "h1", "s1", 8, "", {}, "new", None)]
    assert hardware.to_judge(same, machines) == []
    off = {"s1": machines["s1"]._replace(enable_hw_sync=False)}
    assert hardware.to_judge([candidate(1, None)], off) == []

"""The fleet loop on real parts (a Celery worker on Redis, PostgreSQL, the MAAS simulator and
its node side): a node whose hardware failed is handed to repair with its RMA packet, its
machine Broken in MAAS, and comes back only through a new commissioning, a new judgement and
the onboarding's own deploy; a repair that did not fix it leaves it in quarantine with new
evidence (docs/repair.md)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain import events
from maas_domain.models import Cordon, Node, OutboxEvent, QuarantineEvidence
from maas_simulator.node import NodeSide
from onboarding.models import Onboarding
from repair.models import Repair
from tests.support.asyncapi import validate
from tests.support.flows import Flow, settle, start
from workflows import family

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
API = "/api/v1/admin"


def quarantined_for_a_gpu(flow: Flow, node_side: NodeSide, host: str, ip: str) -> Node:
    """A node whose onboarding found 7 of its SKU's 8 GPUs: quarantined, cordoned, evidence."""
    flow.sim.add(hostname=host, status="new", power_address=ip, faults={"gpu_missing": 1})
    wf = settle(start(flow, host, ip).pk)
    assert (wf.state, wf.failure_class) == ("failed", "hardware_nonconformant"), wf.reason
    node = Node.objects.get(pk=wf.node_id)
    assert node.state == "quarantined"
    return node


def admin_api(flow: Flow) -> APIClient:
    client = APIClient()
    client.force_authenticate(flow.admin)
    return client


def settle_repair(pk: int, *states: str) -> Repair:
    found: Repair = settle(pk, states or ("succeeded", "failed", "cancelled"), model=Repair)
    return found


def outbox(wf: Any) -> list[str]:
    rows = OutboxEvent.objects.filter(payload__workflow_kind="repair", payload__workflow_id=wf.pk)
    for row in rows:
        validate(events.envelope(row))
    return sorted(row.type for row in rows)


def test_a_repaired_node_returns_only_through_a_new_commissioning(
    flow: Flow, node_side: NodeSide
) -> None:
    node = quarantined_for_a_gpu(flow, node_side, "rp01", "10.41.0.1")
    sid = node.maas_system_id
    api = admin_api(flow)
    body = {"ticket": "RMA-4411", "reason": "GPU 7 off the bus"}
    started = api.post(f"{API}/nodes/{node.pk}/repair", body, format="json")
    assert started.status_code == 202, started.json()
    wf = settle_repair(started.json()["id"], "waiting")
    assert wf.stage == "in_repair", (wf.stage, wf.reason)
    # out of service: Broken in MAAS with the reason, in_repair here, nothing allocates it
    machine = flow.sim.model.machines[sid]
    assert machine.status.label == "Broken"
    assert "RMA-4411" in machine.error_description
    # MAAS marks broken only for the owner: the Ready machine was allocated to us first
    assert flow.sim.mutations()[-2:] == ["machines.allocate", "machine.mark_broken"]
    node.refresh_from_db()
    assert node.state == "in_repair"
    refused = api.post(f"{API}/allocations", {"node_id": node.pk, "holder": "t"}, format="json")
    assert refused.status_code == 409
    # the packet: the fault, the failing requirement, the GPUs MAAS saw with their addresses
    packet = wf.packet
    assert (packet["hostname"], packet["system_id"], packet["ticket"]) == ("rp01", sid, "RMA-4411")
    assert packet["fault_class"] == "hardware_nonconformant"
    assert [f["requirement"] for f in packet["failing"]] == ["gpu.count"]
    gpus = [p for p in packet["parts"] if p["category"] == "gpu" and p["pci_id"] == "10de:2330"]
    assert len(gpus) == 7 and all(p["pci_address"] for p in gpus)
    assert packet["evidence"]["kind"] == "hardware_nonconformant"
    assert packet["system"]["system_serial"] and packet["maas_events"]
    # the vendor replaces the GPU; MAAS does not know until it commissions the machine again
    flow.sim.repair(sid)
    before = len(flow.sim.mutations(sid))
    done = api.post(f"{API}/repairs/{wf.pk}/requalify", {"note": "GPU replaced"}, format="json")
    assert done.status_code == 202, done.json()
    wf = settle_repair(wf.pk)
    assert wf.state == "succeeded", (wf.stage, wf.reason)
    child = family.latest_child(wf)
    assert isinstance(child, Onboarding) and child.state == "succeeded"
    assert child.commissioned_attempt == child.attempt  # judged on the new commissioning
    assert flow.sim.mutations(sid)[before:] == [
        "machine.mark_fixed",
        "machine.commission",  # although MAAS showed it Ready
        "machine.set_storage_layout",
        "machine.deploy",
    ]
    assert child.hardware_report["conformant"] is True
    node.refresh_from_db()
    assert node.state == "active"
    assert not Cordon.objects.filter(node=node, lifted_at__isnull=True).exists()
    ok = api.post(f"{API}/allocations", {"node_id": node.pk, "holder": "t"}, format="json")
    assert ok.status_code == 201
    assert outbox(wf) == ["node.repair.completed", "node.repair.started"]


def test_a_repair_that_did_not_fix_it_leaves_the_node_quarantined_with_new_evidence(
    flow: Flow, node_side: NodeSide
) -> None:
    node = quarantined_for_a_gpu(flow, node_side, "rp02", "10.41.0.2")
    api = admin_api(flow)
    started = api.post(f"{API}/nodes/{node.pk}/repair", {"reason": "GPU"}, format="json")
    wf = settle_repair(started.json()["id"], "waiting")
    before = QuarantineEvidence.objects.filter(node=node).count()
    api.post(f"{API}/repairs/{wf.pk}/requalify", {"note": "reseated"}, format="json")
    wf = settle_repair(wf.pk)
    assert (wf.state, wf.failure_class) == ("failed", "requalification")
    assert "hardware does not conform" in wf.reason
    node.refresh_from_db()
    assert node.state == "quarantined"
    assert QuarantineEvidence.objects.filter(node=node).count() == before + 1
    assert Cordon.objects.filter(node=node, lifted_at__isnull=True).exists()
    assert "machine.deploy" not in flow.sim.mutations(node.maas_system_id)


def test_a_rerun_of_an_onboarding_its_hardware_failed_commissions_again(
    flow: Flow, node_side: NodeSide
) -> None:
    """Repaired in MAAS by hand, then rerun: judged on a new commissioning's facts, not on the
    inventory that failed (MAAS refreshes PCI devices only when it commissions)."""
    node = quarantined_for_a_gpu(flow, node_side, "rp03", "10.41.0.3")
    sid = node.maas_system_id
    flow.sim.repair(sid)
    wf = Onboarding.objects.get(node=node)
    before = len(flow.sim.mutations(sid))
    assert admin_api(flow).post(f"{API}/onboardings/{wf.pk}/rerun", {},
                                format="json").status_code == 202  # fmt: skip
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.stage, wf.reason)
    assert flow.sim.mutations(sid)[before] == "machine.commission"
    node.refresh_from_db()
    assert node.state == "active"
    assert not Cordon.objects.filter(node=node, lifted_at__isnull=True).exists()

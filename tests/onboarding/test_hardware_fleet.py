"""A fleet batch proves hardware truth end to end (docs/hardware.md): 40 machines onboarded as
one batch through a real worker and the simulator, three of them defective in the ways a GPU
fleet is (a GPU off the bus, a NIC linking slow, a failed burn-in). The 37 good ones go active;
the three are quarantined, each with its report and its frozen evidence, readable through the
API, the admin page and maasctl."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_domain.models import Node, QuarantineEvidence
from maas_simulator.node import NodeSide
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding
from tests.support.flows import Flow, footprint, maas_footprint, wait_progressing

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NODES = 40
BURN_IN = "infra-gpu-burn"
FAULTS = {
    3: ({"gpu_missing": 1}, "hardware_nonconformant", "gpu.count"),
    17: ({"nic_slow": {"eno2": 10000}}, "hardware_nonconformant", "nics.data"),
    29: ({"script_fails": [BURN_IN]}, "acceptance_failed", BURN_IN),
}
PROFILE = {
    "gpu": {"pci_ids": ["10de:2330"], "per_numa_node": {"0": 4, "1": 4}},
    "nics": [
        {"role": "pxe", "pxe": True, "count": 1, "min_speed_mbps": 25000},
        {"role": "data", "count": 1, "min_speed_mbps": 25000},
    ],
    "disks": [{"count": 2, "type": "nvme", "min_size_gb": 900}],
}


def register_script(flow: Flow, name: str, **spec: object) -> None:
    model = flow.sim.model
    with model.lock:
        model.scripts.add_testing(
            {"name": name, "title": "GPU burn-in", "tags": ["infra-gpu"], "hardware_type": "gpu",
             "timeout": "0:30:00", "parameters": {"duration": {"type": "runtime"}}, **spec},
            model.now(),
        )  # fmt: skip


def host(i: int) -> tuple[str, str]:
    return f"f{i:02d}", f"10.80.0.{i + 1}"


@pytest.fixture
def fleet(flow: Flow, node_side: NodeSide, settings: Any) -> Flow:
    # 40 workflows on one in-process worker: production's lease and re-send grace, not the
    # sweeper fixture's 3 s (made for kill tests), and a site slot count that keeps the
    # worker's queue short
    settings.WORKFLOW_LEASE_SECONDS = 90
    settings.WORKFLOW_DISPATCH_GRACE_SECONDS = 60
    register_script(flow, BURN_IN)  # infra registered its burn-in in MAAS
    flow.sku.hardware, flow.sku.gpu_model = PROFILE, "H100"
    flow.sku.save()
    flow.site.policy = {**flow.site.policy, "acceptance_scripts": [BURN_IN],
                        "max_concurrent_workflows": 10,
                        "acceptance_parameters": {f"{BURN_IN}_duration": "600"}}  # fmt: skip
    flow.site.save()
    for i in range(NODES):
        name, ipmi = host(i)
        faults = FAULTS[i][0] if i in FAULTS else {}
        flow.sim.add(hostname=name, status="new", power_address=ipmi, faults=faults)
    return flow


def test_a_batch_of_40_with_three_defective_machines(fleet: Flow, api: APIClient) -> None:
    flow = fleet
    batch = onboarding_start_batch(
        actor=flow.admin, site_id=flow.site.pk, profile_id=flow.profile.pk, sku_id=flow.sku.pk,
        rows=[dict(zip(("hostname", "ipmi_ip"), host(i), strict=True)) for i in range(NODES)],
    )  # fmt: skip
    rows = Onboarding.objects.filter(batch=batch)
    wait_progressing(
        lambda: not rows.filter(state__in=("pending", "running", "waiting")).exists(),
        lambda: (footprint(Onboarding, batch=batch), maas_footprint(flow.sim)),
        what="the batch to finish",
    )
    states = dict(rows.values_list("hostname", "state"))
    failed = {h: s for h, s in states.items() if s != "succeeded"}
    why = dict(rows.filter(hostname__in=failed).values_list("hostname", "reason"))
    assert set(failed) == {host(i)[0] for i in FAULTS}, why
    assert Node.objects.filter(state="active").count() == NODES - len(FAULTS)

    for i, (_, failure_class, named) in FAULTS.items():
        wf = rows.get(hostname=host(i)[0])
        assert (wf.state, wf.failure_class) == ("failed", failure_class), wf.reason
        assert named in wf.reason
        node = Node.objects.get(pk=wf.node_id or 0)
        assert node.state == "quarantined"
        # the report through the API, and the evidence frozen with it
        got = api.get(f"/api/v1/admin/onboardings/{wf.pk}").json()
        report = got[
            "acceptance_report" if failure_class == "acceptance_failed" else "hardware_report"
        ]
        assert report and report.get("conformant", report.get("passed")) is False
        evidence = QuarantineEvidence.objects.get(node=node)
        assert evidence.kind == failure_class
        listed = api.get(f"/api/v1/admin/nodes/{node.pk}/evidence").json()["results"]
        assert [e["id"] for e in listed] == [evidence.pk]
        # the admin page of the node links its evidence; the workflow page shows the report
        page = flow_admin_page(api, f"/admin/maas_domain/node/{node.pk}/change/")
        assert f"/admin/maas_domain/quarantineevidence/{evidence.pk}/change/" in page
        table = "wf-acceptance" if failure_class == "acceptance_failed" else "wf-hardware"
        assert f'id="{table}"' in flow_admin_page(
            api, f"/admin/onboarding/onboarding/{wf.pk}/change/"
        )
    burn = rows.get(hostname=host(29)[0]).acceptance_report
    failing = [r for r in burn["results"] if not r["passed"]]
    assert failing and failing[0]["script"] == BURN_IN and failing[0]["output_excerpt"]
    good = rows.get(hostname=host(0)[0])
    assert good.hardware_report["conformant"] is True and good.acceptance_report["passed"] is True


def flow_admin_page(api: APIClient, path: str) -> str:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="flow-admin"))
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()

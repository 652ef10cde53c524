"""maasctl's cordon, uncordon and repair commands against the live API (docs/cli.md, "Cordons
and repairs"): they say what they did, ask before what returns a node to tenants or marks a
machine broken, and change nothing on a dry run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone

from maas_domain.models import Cordon
from repair.models import Repair
from tests.factories import make_node, make_onboarding, make_site
from tests.test_cli import cli  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_cordon_then_uncordon_a_node(cli: Any) -> None:  # noqa: F811
    node = make_node(make_site(), hostname="mc01", state="active")
    done = cli("nodes", "cordon", "mc01", "--reason", "fans loud")  # by hostname
    assert done.exit_code == 0, done.output
    assert "operator: fans loud" in done.output and "schedulable │ no" in done.output
    missing = cli("nodes", "uncordon", str(node.pk))
    assert missing.exit_code != 0 and "--reason" in missing.output
    refused = cli("nodes", "uncordon", str(node.pk), "--reason", "ok", input="n\n")
    assert refused.exit_code != 0 and Cordon.objects.filter(lifted_at=None).count() == 1
    lifted = cli("nodes", "uncordon", str(node.pk), "--reason", "fans replaced", "--yes")
    assert lifted.exit_code == 0, lifted.output
    assert not Cordon.objects.filter(lifted_at=None).exists()


def test_repair_a_node_dry_run_then_for_real_and_read_its_packet(cli: Any) -> None:  # noqa: F811
    site = make_site(health="healthy", last_probe_at=timezone.now())
    node = make_node(site, hostname="mc02", state="quarantined", maas_system_id="abc123")
    make_onboarding(site, node=node, hostname="mc02", state="failed")
    plan = cli("nodes", "repair", str(node.pk), "--ticket", "RMA-7", "--dry-run")
    assert plan.exit_code == 0, plan.output
    assert not Repair.objects.exists()
    started = cli("nodes", "repair", str(node.pk), "--ticket", "RMA-7", "--yes")
    assert started.exit_code == 0, started.output
    wf = Repair.objects.get()
    assert wf.ticket == "RMA-7"
    assert "not frozen" in cli("repairs", "packet", str(wf.pk)).output
    Repair.objects.filter(pk=wf.pk).update(packet={
        "hostname": "mc02", "failing": [{"category": "gpu", "requirement": "gpu.count",
                                         "expected": "8", "observed": "7"}],
        "parts": [{"category": "gpu", "pci_address": "0000:db:00.0", "pci_id": "10de:2330"}],
    })  # fmt: skip
    table = cli("repairs", "packet", str(wf.pk))
    assert "gpu.count" in table.output and "0000:db:00.0" in table.output
    raw = cli("repairs", "packet", str(wf.pk), "-o", "json")
    assert json.loads(raw.output)["failing"][0]["observed"] == "7"
    early = cli("repairs", "requalify", str(wf.pk))
    assert early.exit_code != 0 and "in_repair" in early.output

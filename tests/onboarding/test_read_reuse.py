"""Reads of MAAS one execution does not repeat (workflows/kinds.py ``StageContext.machine``),
and the look before a mutation they never replace. Counted on the simulator; no MAAS client is
stubbed."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from onboarding.models import Onboarding
from tests.support.stages import Bench
from workflows import step
from workflows.kinds import KINDS, StageContext

pytestmark = pytest.mark.django_db


def running(bench: Bench, hostname: str, ipmi_ip: str, stage: str, **fields: Any) -> Onboarding:
    """An onboarding whose next step runs ``stage`` (dispatch 1, not yet claimed)."""
    node = bench.node(hostname, ipmi_ip, state="provisioning")
    wf = Onboarding.objects.create(
        site=bench.site,
        profile=bench.profile,
        sku=bench.sku,
        node=node,
        hostname=hostname,
        ipmi_ip=ipmi_ip,
        correlation_id="reuse-test",
        **fields,
    )
    Onboarding.objects.filter(pk=wf.pk).update(
        state="running", stage=stage, dispatch=1, started_at=timezone.now()
    )
    wf.refresh_from_db()
    return wf


def test_commission_looks_at_the_machine_discover_just_listed(bench: Bench) -> None:
    """discover matched the machine by a listing of this execution, and nothing was sent to
    MAAS since: commission, chained next, decides on that answer instead of a GET."""
    sid = bench.sim.add(hostname="r1", status="new")
    wf = running(bench, "r1", "10.78.0.1", "discover")
    bench.sim.reset_counters()
    assert step.run("onboarding", wf.pk, 1) == "wait"
    wf.refresh_from_db()
    assert (wf.checkpoint, wf.stage, wf.maas_system_id) == ("discover", "commission", sid)
    assert bench.sim.count("machine.read") == 0
    assert bench.sim.mutations(sid) == ["machine.commission"]


def test_a_mutation_ends_the_reuse_the_next_stage_reads_maas(bench: Bench) -> None:
    """storage_pxe reads the machine and sets the layout (a mutation); deploy, chained after
    payload, must look at MAAS again before deploying: two reads, not one."""
    sid = bench.sim.add(hostname="r2", status="ready")
    wf = running(bench, "r2", "10.78.0.2", "storage_pxe", maas_system_id=sid)
    bench.sim.reset_counters()
    assert step.run("onboarding", wf.pk, 1) == "wait"
    wf.refresh_from_db()
    assert wf.stage == "deploy"
    assert bench.sim.mutations(sid) == ["machine.set_storage_layout", "machine.deploy"]
    assert bench.sim.count("machine.read") == 2


def test_a_stage_reading_twice_without_a_mutation_reads_once_then_again(bench: Bench) -> None:
    sid = bench.sim.add(hostname="r3", status="ready")
    wf = running(bench, "r3", "10.78.0.3", "commission", maas_system_id=sid)
    claimed = step.claim(KINDS["onboarding"], wf.pk, 1)
    assert claimed is not None
    ctx = StageContext(KINDS["onboarding"], *claimed)
    bench.sim.reset_counters()
    try:
        ctx.machine(sid)
        ctx.machine(sid)  # the first answer, once
        ctx.machine(sid)  # read again
    finally:
        ctx.close()
    assert bench.sim.count("machine.read") == 2

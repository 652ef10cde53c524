"""Reads of MAAS one execution does not repeat (workflows/kinds.py ``StageContext.machine``,
onboarding/stages/storage_pxe.py ``site_subnets``), and the look before a mutation they never
replace. Counted on the simulator; no MAAS client is stubbed."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from onboarding.models import Onboarding
from onboarding.stages.storage_pxe import forget_subnets
from tests.support.stages import Bench, run_stage
from workflows import step
from workflows.kinds import KINDS, StageContext

pytestmark = pytest.mark.django_db


def running(bench: Bench, hostname: str, ipmi_ip: str, stage: str, **fields: Any) -> Onboarding:
    """An onboarding whose next step runs ``stage`` (dispatch 1, not yet claimed)."""
    wf = bench.onboarding(hostname, ipmi_ip, **fields)
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


# -- the site's subnets -------------------------------------------------------------------------


def test_storage_pxe_reads_the_sites_subnets_once_for_many_nodes(bench: Bench) -> None:
    forget_subnets()
    for n in range(3):
        sid = bench.sim.add(hostname=f"r4{n}", status="ready")
        wf = running(bench, f"r4{n}", f"10.78.0.1{n}", "storage_pxe", maas_system_id=sid)
        result, _ = run_stage("onboarding", wf, "storage_pxe")
        assert type(result).__name__ == "Done", result
    assert bench.sim.count("subnets.read") == 1


def test_a_pxe_subnet_created_since_the_copy_is_read_again(bench: Bench) -> None:
    """The copy lacks the profile's PXE subnet: read MAAS again before failing on it."""
    forget_subnets()
    sid = bench.sim.add(hostname="r5", status="ready")
    run_stage("onboarding", running(bench, "r5", "10.78.0.5", "storage_pxe", maas_system_id=sid))
    bench.profile.pxe_subnet = "10.99.0.0/16"
    bench.profile.save()
    sid = bench.sim.add(hostname="r6", status="ready")
    wf = running(bench, "r6", "10.78.0.6", "storage_pxe", maas_system_id=sid)
    bench.sim.reset_counters()
    result, _ = run_stage("onboarding", wf, "storage_pxe")
    assert (type(result).__name__, result.failure_class) == ("Fail", "pxe")
    assert bench.sim.count("subnets.read") == 1  # looked again before saying it is missing

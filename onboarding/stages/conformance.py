"""Stage 3b, hardware conformance: the machine MAAS commissioned is the machine its SKU promises
(docs/hardware.md). Two reads (the machine's hardware facts and, when GPUs are stated, its PCI
devices) judged against the SKU's hardware profile (``maas_domain/hardware.py``); the report is
stored with the onboarding and its verdict goes on the timeline.

Fail closed: a nonconformant machine fails the onboarding (``hardware_nonconformant``; the node
is quarantined with the evidence) unless policy ``hardware_conformance`` is ``warn``; a machine
MAAS has no hardware facts for is never judged conformant (``hardware_unknown``).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from maas_domain import hardware
from onboarding.stages.common import COMMISSIONING, Ctx, S, recent_maas_events
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Fail, Result, StageFailed


@stage(
    timeout=600,
    calls=(
        C("machine_hardware", "CPUs, memory, NICs, disks, firmware strings"),
        C("node_devices", "only if the SKU states GPUs"),
        C("events", "on a failure, for the evidence"),
    ),
    expects=COMMISSIONING | {S.READY},
)
def conformance(ctx: Ctx) -> Result:
    wf, sku = ctx.wf, ctx.wf.sku
    profile = sku.hardware or {}
    facts: dict[str, Any] = {
        "sku": sku.code,
        "sku_revision": sku.revision,
        "mode": ctx.policy.hardware_conformance,
        "checked_at": timezone.now().isoformat(),
        "attempt": wf.attempt,
    }
    if not hardware.states_requirements(sku.gpu_count, profile):
        report = {**facts, "conformant": True, "checks": [], "note": "the SKU states no hardware"}
        return Done(f"SKU {sku.code} states no hardware requirements", {"hardware_report": report})
    sid = wf.maas_system_id
    if not sid:
        raise StageFailed("internal", "no MAAS machine recorded; rerun from discover")
    facts["maas_system_id"] = sid
    machine = ctx.maas.machine_hardware(sid)
    devices = ctx.maas.node_devices(sid) if hardware.needs_devices(sku.gpu_count) else None
    missing = _missing(machine.known, devices)
    if missing:
        report = {**facts, "conformant": False, "checks": [], "missing": missing}
        return Fail(
            "hardware_unknown",
            f"MAAS has no {missing} for {sid}: nothing was judged conformant; commission the "
            "machine again (rerun after a recommission, or restart-clean)",
            updates={"hardware_report": report},
        )
    checks = hardware.judge(
        gpu_count=sku.gpu_count,
        gpu_model=sku.gpu_model,
        hardware=profile,
        machine=machine,
        devices=devices,
    )
    report = hardware.report(checks, **facts)
    failed = [c.requirement for c in checks if not c.passed]
    if not failed:
        ctx.event(
            "hardware.conformant",
            f"hardware conforms to SKU {sku.code} ({len(checks)} requirements held)",
            checks=len(checks),
        )
        return Done(f"hardware conforms to SKU {sku.code}", {"hardware_report": report})
    summary = hardware.failed_summary(checks)
    if ctx.policy.hardware_conformance == "warn":
        ctx.event(
            "hardware.nonconformant",
            f"continuing (policy hardware_conformance is warn): {summary}",
            failed=failed,
            enforced=False,
        )
        return Done(
            f"hardware does not conform to SKU {sku.code} (warn)", {"hardware_report": report}
        )
    ctx.event("hardware.nonconformant", summary, failed=failed, enforced=True)
    report["maas_events"] = recent_maas_events(ctx, sid)
    return Fail(
        "hardware_nonconformant",
        f"hardware does not conform to SKU {sku.code}: {summary}",
        {"failed": failed},
        updates={"hardware_report": report},
    )


def _missing(known: bool, devices: list[Any] | None) -> str:
    if not known:
        return "hardware facts (CPUs, memory, NICs, disks)"
    if devices is not None and not devices:
        return "PCI device data"
    return ""

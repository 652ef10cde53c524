"""Stage 2, packet: the RMA packet frozen once, from the quarantine evidence, the critical drift
that cordoned the node, and one read of what MAAS knows of the machine (docs/repair.md)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from maas_client.errors import MaasError
from maas_domain.models import QuarantineEvidence
from maas_domain.services import cordons
from reconciliation.models import DriftRecord
from workflows.kinds import Call as C
from workflows.kinds import stage
from workflows.results import Done, Result

from .. import packet as rma
from .common import Ctx

MAAS_EVENTS_KEPT = 50


@stage(
    timeout=600,
    calls=(
        C("machine_hardware", "serials, firmware, NICs, disks"),
        C("node_devices", "GPUs with their PCI addresses"),
        C("events", "MAAS's latest events for the machine"),
    ),
)
def packet(ctx: Ctx) -> Result:
    wf = ctx.wf
    if wf.packet:
        return Done("RMA packet already frozen")
    sid, node = wf.maas_system_id, wf.node
    held = cordons.reasons(node)
    evidence = QuarantineEvidence.objects.filter(node=node).order_by("-id").first()
    findings: list[tuple[str, dict[str, Any]]] = []
    summary = None
    if evidence is not None:
        findings.append((evidence.kind, evidence.report))
        summary = {"id": evidence.pk, "kind": evidence.kind, "reason": evidence.reason,
                   "workflow": f"{evidence.workflow_kind} {evidence.workflow_id}",
                   "created_at": evidence.created_at.isoformat()}  # fmt: skip
    drift_ids = [int(c["source"][6:]) for c in held if c["source"].startswith("drift:")]
    for drift in DriftRecord.objects.filter(pk__in=drift_ids).order_by("id"):
        findings.append((drift.kind, drift.detail or {}))
    built = rma.build(
        hostname=wf.hostname,
        system_id=sid,
        site=wf.site.name,
        sku={
            "code": node.sku.code,
            "name": node.sku.name,
            "gpu_model": node.sku.gpu_model,
            "gpu_count": node.sku.gpu_count,
        },
        fault_class=wf.fault_class,
        evidence=summary,
        findings=findings,
        cordons=held,
        machine=ctx.maas.machine_hardware(sid),
        devices=ctx.maas.node_devices(sid),
        maas_events=_events(ctx, sid),
        ticket=wf.ticket,
        reason=wf.request_reason,
    )
    built["frozen_at"] = timezone.now().isoformat()
    ctx.event(
        "repair.packet",
        f"RMA packet frozen: {len(built['failing'])} failing item(s), {len(built['parts'])} "
        f"part(s) listed",
        failing=len(built["failing"]),
        parts=len(built["parts"]),
    )
    return Done("RMA packet frozen", {"packet": built})


def _events(ctx: Ctx, sid: str) -> list[dict[str, str]]:
    try:
        page = ctx.maas.events(system_ids=[sid], limit=MAAS_EVENTS_KEPT)
    except MaasError as exc:  # the packet says so; the hand-over does not wait on MAAS's log
        return [{"created": "", "level": "", "type": "", "message": f"unavailable: {exc.message}"}]
    return [
        {"created": e.created.isoformat(), "level": e.level, "type": e.type, "message": e.message}
        for e in page.events
    ]

"""Hardware drift on deployed machines (docs/reconciliation.md, "Hardware drift";
docs/hardware.md): what MAAS's hardware sync reports of an in-service node's machine, judged
against its SKU's hardware profile, and whether that sync is still alive.

A deployed machine with hardware sync on reports its hardware every ``sync_interval`` seconds;
MAAS then shows a new ``last_sync``. Each reconcile run judges, for the nodes whose machine
synced since their last judgement (at most ``MAX_CHECKS_PER_RUN`` per site and run, the oldest
judgements first), the machine's facts and PCI devices (two reads each), and keeps the verdict
with the node's MAAS picture (``node_maas_state``). Every run turns the kept verdicts into
``hardware_nonconformant`` drift, and a sync older than 1.5 x its interval (MAAS's own rule,
judged against MAAS's clock) into ``hardware_sync_stale`` drift. Never destructive: an operator
resolves them like every drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from maas_client.client import MaasClient
from maas_client.errors import MaasError
from maas_client.status import NodeStatus
from maas_client.types import MachineSummary
from maas_domain import hardware
from reconciliation.compare import Finding
from reconciliation.models import DriftKind, Severity

MAX_CHECKS_PER_RUN = 50  # machines judged per site and run (two MAAS reads each)
STALE_FACTOR = 1.5  # MAAS's UI rule: a sync is unhealthy past 1.5 x its interval


@dataclass(frozen=True)
class Candidate:
    """An in-service node whose deployed machine syncs its hardware, with its SKU."""

    node_id: int
    hostname: str
    system_id: str
    gpu_count: int
    gpu_model: str
    profile: dict[str, Any]
    judged_sync: str  # the MAAS last_sync its kept verdict was judged at ("" never)
    checked_at: datetime | None


@dataclass(frozen=True)
class Verdict:
    node_id: int
    sync: str  # the MAAS last_sync judged
    conformant: bool | None  # None: MAAS could not be read
    failed: list[dict[str, Any]]
    summary: str


def syncing(m: MachineSummary | None) -> bool:
    return m is not None and m.status == NodeStatus.DEPLOYED and m.enable_hw_sync


def to_judge(
    candidates: Iterable[Candidate], machines: dict[str, MachineSummary]
) -> list[Candidate]:
    """The candidates whose machine synced since their last judgement, the oldest judgements
    first, at most ``MAX_CHECKS_PER_RUN``."""
    due = [
        c
        for c in candidates
        if syncing(m := machines.get(c.system_id))
        and m is not None
        and m.last_sync
        and m.last_sync != c.judged_sync
        and hardware.states_requirements(c.gpu_count, c.profile)
    ]
    due.sort(key=lambda c: (c.checked_at is not None, c.checked_at or datetime.min))
    return due[:MAX_CHECKS_PER_RUN]


def judge(client: MaasClient, c: Candidate, sync: str) -> Verdict:
    """Two reads: the machine's facts and, when GPUs are stated, its PCI devices."""
    try:
        machine = client.machine_hardware(c.system_id)
        devices = client.node_devices(c.system_id) if hardware.needs_devices(c.gpu_count) else None
    except MaasError as exc:
        return Verdict(c.node_id, c.judged_sync, None, [], f"MAAS could not be read: {exc}")
    checks = hardware.judge(
        gpu_count=c.gpu_count,
        gpu_model=c.gpu_model,
        hardware=c.profile,
        machine=machine,
        devices=devices,
    )
    failed = [{"requirement": x.requirement, "expected": x.expected, "observed": x.observed}
              for x in checks if not x.passed]  # fmt: skip
    return Verdict(c.node_id, sync, not failed, failed, hardware.failed_summary(checks))


def findings(
    candidates: Sequence[Candidate],
    kept: dict[int, tuple[bool | None, list[dict[str, Any]]]],
    machines: dict[str, MachineSummary],
    maas_now: datetime | None,
) -> list[Finding]:
    """The hardware drift of every candidate: its kept verdict (nonconformant), and a sync that
    stopped (judged against MAAS's clock; without it, none is judged stale)."""
    out: list[Finding] = []
    for c in candidates:
        base: dict[str, Any] = {"node_id": c.node_id, "system_id": c.system_id,
                                "hostname": c.hostname}  # fmt: skip
        subject = f"node:{c.node_id}"
        conformant, failed = kept.get(c.node_id, (None, []))
        if conformant is False:
            what = "; ".join(f"{f['requirement']}: expected {f['expected']}, observed "
                             f"{f['observed']}" for f in failed)  # fmt: skip
            out.append(
                Finding(
                    subject,
                    DriftKind.HARDWARE_NONCONFORMANT,
                    Severity.CRITICAL,
                    f"{c.hostname}'s hardware sync shows it no longer conforms to its SKU: {what}",
                    {"failed": failed},
                    **base,
                )
            )
        m = machines.get(c.system_id)
        if syncing(m) and m is not None and maas_now is not None:
            stale = _stale(m, maas_now)
            if stale is not None:
                out.append(
                    Finding(
                        subject,
                        DriftKind.HARDWARE_SYNC_STALE,
                        Severity.WARNING,
                        f"{c.hostname}'s hardware sync last reported {stale}: its hardware "
                        "is no longer watched",
                        {
                            "last_sync": m.last_sync,
                            "sync_interval": m.sync_interval,
                            "maas_time": maas_now.isoformat(),
                        },
                        **base,
                    )
                )
    return out


def _stale(m: MachineSummary, maas_now: datetime) -> str | None:
    """How long ago the sync last reported, if that is past 1.5 x its interval; else None."""
    if not m.last_sync or not m.sync_interval:
        return None
    last = datetime.fromisoformat(m.last_sync).replace(tzinfo=maas_now.tzinfo)
    late = maas_now - last
    if late <= timedelta(seconds=STALE_FACTOR * m.sync_interval):
        return None
    return f"{int(late.total_seconds())} s ago (interval {m.sync_interval} s)"


# -- a run's hardware step (called by reconciliation/services.py) ---------------------------------


@dataclass
class Seen:
    """What one run learned: the candidates, the verdicts it reached, MAAS's clock."""

    candidates: list[Candidate]
    verdicts: list[Verdict]
    maas_now: datetime | None
    requests: int = 0


def candidates(site_id: int) -> list[Candidate]:
    """In-service nodes of the site with a MAAS machine and a SKU that states hardware, with
    their last judgement (one query)."""
    from maas_domain.models import Node, NodeState

    rows = (
        Node.objects.filter(site_id=site_id, state=NodeState.ACTIVE)
        .exclude(maas_system_id="")
        .values_list(
            "id", "hostname", "maas_system_id", "sku__gpu_count", "sku__gpu_model",
            "sku__hardware", "maas_state__hw_judged_sync", "maas_state__hw_checked_at",
        )
    )  # fmt: skip
    return [
        Candidate(pk, host, sid, gpus, model, profile or {}, judged or "", checked)
        for pk, host, sid, gpus, model, profile, judged, checked in rows
        if hardware.states_requirements(gpus, profile or {})
    ]


def check(site_id: int, client: MaasClient, machines: Sequence[MachineSummary]) -> Seen:
    """Judge the machines that synced since their node's last judgement (outside any
    transaction: these are MAAS reads)."""
    found = candidates(site_id)
    by_sid = {m.system_id: m for m in machines}
    seen = Seen(found, [], None)
    for c in to_judge(found, by_sid):
        seen.requests += 1 + int(hardware.needs_devices(c.gpu_count))
        seen.verdicts.append(judge(client, c, by_sid[c.system_id].last_sync))
    seen.maas_now = client.maas_time
    return seen


def record(
    seen: Seen,
    kept: dict[int, tuple[bool | None, list[dict[str, Any]]]],
    machines: Sequence[MachineSummary],
    now: datetime,
) -> list[Finding]:
    """Store the new verdicts with the nodes' MAAS pictures (in the run's transaction, after
    the pictures were written) and return every candidate's hardware drift."""
    from reconciliation.models import NodeMaasState

    kept = dict(kept)
    judged = {v.node_id: v for v in seen.verdicts if v.conformant is not None}  # None: MAAS
    states = list(NodeMaasState.objects.filter(node_id__in=judged))  # unread, judged next run
    for state in states:
        v = judged[state.node_id]
        state.hw_judged_sync, state.hw_conformant, state.hw_failed = v.sync, v.conformant, v.failed
        state.hw_checked_at = now
    NodeMaasState.objects.bulk_update(
        states, ["hw_judged_sync", "hw_conformant", "hw_failed", "hw_checked_at"]
    )
    kept.update({pk: (v.conformant, v.failed) for pk, v in judged.items()})
    return findings(seen.candidates, kept, {m.system_id: m for m in machines}, seen.maas_now)

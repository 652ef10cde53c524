"""Comparing one MAAS listing with our records: plain functions over plain data, no I/O.

The service loads everything in bulk (one MAAS listing, one power-parameters read, a fixed
number of SQL queries) and hands it here; this module decides what is drift. Keeping it pure
keeps it fast (10,000 machines in a few tens of milliseconds) and testable without a database.

Motion is not drift: MAAS is read at ``read_at`` and our rows a moment later. A node or
workflow whose row changed after ``read_at`` is not judged this run (its subject is
``skipped``, so its existing drift records are neither updated nor cleared).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from maas_client.status import LABELS, NodeStatus
from maas_client.types import MachineSummary
from maas_domain.models.inventory import NodeState
from maas_domain.work import ACTIVE_STATES
from reconciliation.models import DriftKind, Severity

S = NodeStatus
OWNED = {S.ALLOCATED, S.DEPLOYING, S.DEPLOYED}  # "allocated or deployed": a leak when unclaimed
# A failure MAAS leaves the machine in, still held by the user that asked (MAAS keeps the owner
# of a failed deployment, commissioning, test or erase): a leak when unclaimed too, and the
# ones the ``sweep`` verb takes (reconciliation/sweep.py; docs/reconciliation.md, "Leaks").
FAILED_HELD = frozenset(
    {S.FAILED_DEPLOYMENT, S.FAILED_COMMISSIONING, S.FAILED_TESTING, S.FAILED_DISK_ERASING}
)
LEAKABLE = OWNED | FAILED_HELD
# Workflow states whose stage is judged (pending has not started; manual_intervention is frozen
# on purpose and already in front of an operator).
JUDGED_WORKFLOW_STATES = ACTIVE_STATES
SEVERITY = {
    DriftKind.MISSING_IN_MAAS: Severity.CRITICAL,
    DriftKind.STATUS_MISMATCH: Severity.WARNING,
    DriftKind.POWER_STATE_UNEXPECTED: Severity.WARNING,
    DriftKind.HOSTNAME_MISMATCH: Severity.WARNING,
    DriftKind.POWER_ADDRESS_MISMATCH: Severity.WARNING,
    DriftKind.UNKNOWN_MACHINE: Severity.INFO,
    DriftKind.WORKFLOW_STUCK: Severity.CRITICAL,
    DriftKind.LEAK: Severity.CRITICAL,
}


def label(status: int | None) -> str:
    try:
        return LABELS[NodeStatus(status if status is not None else -1)]
    except (ValueError, KeyError):
        return str(status)


@dataclass(frozen=True)
class NodeRow:
    id: int
    hostname: str
    ipmi_ip: str
    maas_system_id: str
    state: str
    updated_at: datetime


@dataclass(frozen=True)
class WorkflowRow:
    kind: str
    id: int
    state: str
    stage: str
    node_id: int | None
    hostname: str
    system_id: str
    stage_started_at: datetime | None
    updated_at: datetime
    stage_timeout: int | None
    # From the stage's declaration (workflows/kinds.py, ``Stage``): the MAAS statuses
    # the machine may show in this stage (None: no expectation), and whether the stage may
    # delete the machine (its absence is then not drift).
    expected: frozenset[NodeStatus] | None = None
    machine_may_vanish: bool = False


@dataclass(frozen=True)
class StateRow:
    """The parts of a NodeMaasState row the comparison reads."""

    system_id: str
    accepted_status: int | None
    accepted_power_state: str


@dataclass(frozen=True)
class Finding:
    subject: str
    kind: str
    severity: str
    message: str
    detail: dict[str, Any]
    node_id: int | None = None
    system_id: str = ""
    hostname: str = ""


@dataclass
class Observation:
    """What to write to node_maas_state for one node matched to a machine (or missing)."""

    node_id: int
    system_id: str
    machine: MachineSummary | None
    power_address: str


@dataclass
class Outcome:
    findings: list[Finding] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)
    observations: list[Observation] = field(default_factory=list)
    nodes_checked: int = 0

    def counts(self) -> Counter[str]:
        return Counter(f.kind for f in self.findings)


def compare(
    *,
    machines: list[MachineSummary],
    power_addresses: dict[str, str],
    our_user: str,
    nodes: list[NodeRow],
    retired_system_ids: set[str],
    states: dict[int, StateRow],
    workflows: list[WorkflowRow],
    read_at: datetime,
    now: datetime,
    stuck_grace: timedelta,
) -> Outcome:
    out = Outcome()
    by_sid = {m.system_id: m for m in machines}
    by_host: dict[str, list[MachineSummary]] = {}
    for m in machines:
        by_host.setdefault(m.hostname, []).append(m)

    open_wf_by_node: dict[int, WorkflowRow] = {}
    claimed_sids: set[str] = set()
    claimed_hosts: set[str] = set()
    for row in workflows:
        if row.node_id is not None:
            open_wf_by_node.setdefault(row.node_id, row)
        if row.system_id:
            claimed_sids.add(row.system_id)
        claimed_hosts.add(row.hostname)
        _stuck(out, row, now, stuck_grace)

    matched_sids: set[str] = set()
    for node in nodes:
        subject = f"node:{node.id}"
        wf = open_wf_by_node.get(node.id)
        state = states.get(node.id)
        sid = (
            node.maas_system_id
            or (wf.system_id if wf else "")
            or (state.system_id if state else "")
        )
        machine = by_sid.get(sid) if sid else None
        if machine is None and not sid:
            candidates = by_host.get(node.hostname, [])
            if len(candidates) == 1:
                machine = candidates[0]
                sid = machine.system_id
        if sid:
            matched_sids.add(sid)
        if node.updated_at >= read_at or (wf is not None and wf.updated_at >= read_at):
            out.skipped.add(subject)  # in motion: judged next run
            continue
        if not sid:
            continue  # not in MAAS yet (registered, or a workflow still discovering)
        out.nodes_checked += 1
        power_address = power_addresses.get(sid, "")
        out.observations.append(Observation(node.id, sid, machine, power_address))
        base: dict[str, Any] = {"node_id": node.id, "system_id": sid, "hostname": node.hostname}
        if machine is None and wf is not None and wf.machine_may_vanish:
            continue  # a workflow is deleting it (restart-clean's reset, full decommission)
        if machine is None:
            out.findings.append(
                Finding(
                    subject,
                    DriftKind.MISSING_IN_MAAS,
                    Severity.CRITICAL if node.state == NodeState.ACTIVE else Severity.WARNING,
                    f"MAAS has no machine {sid} for node {node.hostname}",
                    {"expected": sid, "observed": None, "node_state": node.state},
                    **base,
                )
            )
            continue
        _judge_node(out, subject, base, node, machine, wf, state, power_address, our_user)

    for m in machines:
        if m.system_id in matched_sids or m.system_id in claimed_sids:
            continue
        if m.system_id in retired_system_ids or m.hostname in claimed_hosts:
            continue
        subject = f"machine:{m.system_id}"
        base2: dict[str, Any] = {"system_id": m.system_id, "hostname": m.hostname}
        observed = {"status": m.status_name or label(m.status), "owner": m.owner or None}
        if held_by_us(m, our_user):
            out.findings.append(
                Finding(
                    subject,
                    DriftKind.LEAK,
                    Severity.CRITICAL,
                    f"{m.hostname} ({m.system_id}) is {_held(m, str(observed['status']))} "
                    "with no node or open workflow of ours",
                    {"observed": observed},
                    **base2,
                )
            )
        else:
            out.findings.append(
                Finding(
                    subject,
                    DriftKind.UNKNOWN_MACHINE,
                    Severity.INFO,
                    f"MAAS machine {m.hostname} ({m.system_id}) is not known to us",
                    {"observed": observed},
                    **base2,
                )
            )
    return out


def held_by_us(m: MachineSummary, our_user: str) -> bool:
    """MAAS shows the machine held by our MAAS user: allocated or deployed to it, or left failed
    while it held it. Unclaimed by a node in service or an open workflow, that is a leak."""
    return bool(our_user) and m.owner == our_user and m.status in LEAKABLE


def _held(m: MachineSummary, status: str) -> str:
    """'Deployed to maascp', 'Failed deployment, held by maascp'."""
    return f"{status} to {m.owner}" if m.status in OWNED else f"{status}, held by {m.owner},"


def _judge_node(
    out: Outcome,
    subject: str,
    base: dict[str, Any],
    node: NodeRow,
    m: MachineSummary,
    wf: WorkflowRow | None,
    state: StateRow | None,
    power_address: str,
    our_user: str,
) -> None:
    add = out.findings.append
    accepted_status = state.accepted_status if state else None
    accepted_power = state.accepted_power_state if state else ""
    status_label = m.status_name or label(m.status)
    unclaimed = wf is None and node.state != NodeState.ACTIVE
    if unclaimed and held_by_us(m, our_user):
        add(
            Finding(
                subject,
                DriftKind.LEAK,
                Severity.CRITICAL,
                f"{m.hostname} ({m.system_id}) is {_held(m, status_label)} but node "
                f"{node.hostname} is {node.state} with no open workflow",
                {
                    "observed": {"status": status_label, "owner": m.owner},
                    "node_state": node.state,
                },
                **base,
            )
        )
    expected: frozenset[NodeStatus] | None = None
    because = ""
    if wf is not None and wf.state in JUDGED_WORKFLOW_STATES:
        expected = wf.expected
        because = f"{wf.kind} {wf.id} in stage {wf.stage}"
    elif wf is None and node.state == NodeState.ACTIVE:
        expected = frozenset({S.DEPLOYED})
        because = "node is active"
    if expected is not None and m.status not in expected and m.status != accepted_status:
        add(
            Finding(
                subject,
                DriftKind.STATUS_MISMATCH,
                Severity.CRITICAL if wf is None else Severity.WARNING,
                f"MAAS shows {m.hostname} {status_label}; expected "
                f"{' or '.join(sorted(label(s) for s in expected))} ({because})",
                {
                    "expected": sorted(label(s) for s in expected),
                    "observed": status_label,
                    "observed_status": m.status,
                    "because": because,
                },
                **base,
            )
        )
    power_reason = ""
    if m.power_state == "error":
        power_reason = "the BMC reports an error"
    elif (
        wf is None
        and node.state == NodeState.ACTIVE
        and m.status == S.DEPLOYED
        and m.power_state == "off"
    ):
        power_reason = "an active, deployed node is powered off"
    if power_reason and m.power_state != accepted_power:
        add(
            Finding(
                subject,
                DriftKind.POWER_STATE_UNEXPECTED,
                SEVERITY[DriftKind.POWER_STATE_UNEXPECTED],
                f"{m.hostname} power is {m.power_state}: {power_reason}",
                {"observed": m.power_state, "because": power_reason},
                **base,
            )
        )
    if m.hostname != node.hostname:
        add(
            Finding(
                subject,
                DriftKind.HOSTNAME_MISMATCH,
                SEVERITY[DriftKind.HOSTNAME_MISMATCH],
                f"MAAS calls {m.system_id} {m.hostname!r}, our node is {node.hostname!r}",
                {"expected": node.hostname, "observed": m.hostname},
                **base,
            )
        )
    if node.ipmi_ip and power_address and power_address != node.ipmi_ip:
        add(
            Finding(
                subject,
                DriftKind.POWER_ADDRESS_MISMATCH,
                SEVERITY[DriftKind.POWER_ADDRESS_MISMATCH],
                f"MAAS power address of {m.hostname} is {power_address}, ours {node.ipmi_ip}",
                {"expected": node.ipmi_ip, "observed": power_address},
                **base,
            )
        )


def _stuck(out: Outcome, wf: WorkflowRow, now: datetime, grace: timedelta) -> None:
    if wf.state not in JUDGED_WORKFLOW_STATES or not wf.stage_timeout or not wf.stage_started_at:
        return
    overdue = now - wf.stage_started_at - timedelta(seconds=wf.stage_timeout)
    if overdue <= grace:
        return
    if wf.node_id is not None:
        subject, node_id = f"node:{wf.node_id}", wf.node_id
    else:
        subject, node_id = f"workflow:{wf.kind}:{wf.id}", None
    out.findings.append(
        Finding(
            subject,
            DriftKind.WORKFLOW_STUCK,
            Severity.CRITICAL,
            f"{wf.kind} {wf.id} has been in stage {wf.stage} ({wf.state}) for "
            f"{int((now - wf.stage_started_at).total_seconds())}s; its timeout is "
            f"{wf.stage_timeout}s",
            {
                "workflow_kind": wf.kind,
                "workflow_id": wf.id,
                "workflow_state": wf.state,
                "stage": wf.stage,
                "stage_started_at": wf.stage_started_at.isoformat(),
                "stage_timeout": wf.stage_timeout,
            },
            node_id=node_id,
            system_id=wf.system_id,
            hostname=wf.hostname,
        )
    )

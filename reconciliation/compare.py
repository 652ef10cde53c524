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
from collections.abc import Callable
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
    """Every drift of one site: stuck workflows, then each node against its machine, then the
    machines no node, open workflow or retired node claims (a leak or an unknown machine)."""
    out = Outcome()
    by_sid = {m.system_id: m for m in machines}
    by_host: dict[str, list[MachineSummary]] = {}
    for m in machines:
        by_host.setdefault(m.hostname, []).append(m)
    claims = _Claims.of(workflows)
    for row in workflows:
        _stuck(out, row, now, stuck_grace)
    matched_sids: set[str] = set()
    for node in nodes:
        wf = claims.open_by_node.get(node.id)
        state = states.get(node.id)
        sid, machine = _match(node, wf, state, by_sid, by_host)
        if sid:
            matched_sids.add(sid)
        judged = _Judged(node, wf, state, sid, machine, power_addresses.get(sid, ""), our_user)
        _judge_matched(out, judged, read_at)
    for m in machines:
        if m.system_id in matched_sids or claims.claim(m) or m.system_id in retired_system_ids:
            continue
        out.findings.append(_unclaimed_machine(m, our_user))
    return out


@dataclass
class _Claims:
    """What the open workflows claim: one per node (the first), their machines and hostnames."""

    open_by_node: dict[int, WorkflowRow] = field(default_factory=dict)
    system_ids: set[str] = field(default_factory=set)
    hostnames: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, workflows: list[WorkflowRow]) -> _Claims:
        claims = cls()
        for row in workflows:
            if row.node_id is not None:
                claims.open_by_node.setdefault(row.node_id, row)
            if row.system_id:
                claims.system_ids.add(row.system_id)
            claims.hostnames.add(row.hostname)
        return claims

    def claim(self, m: MachineSummary) -> bool:
        return m.system_id in self.system_ids or m.hostname in self.hostnames


def _match(
    node: NodeRow,
    wf: WorkflowRow | None,
    state: StateRow | None,
    by_sid: dict[str, MachineSummary],
    by_host: dict[str, list[MachineSummary]],
) -> tuple[str, MachineSummary | None]:
    """The node's machine id (ours, its open workflow's, the last one seen, else the one machine
    of its hostname when nothing names one) and that machine, if MAAS lists it."""
    sid = node.maas_system_id or (wf.system_id if wf else "") or (state.system_id if state else "")
    if sid:
        return sid, by_sid.get(sid)
    candidates = by_host.get(node.hostname, [])
    if len(candidates) == 1:
        return candidates[0].system_id, candidates[0]
    return "", None


@dataclass(frozen=True)
class _Judged:
    """One node matched to a machine id, with what its drift rules read."""

    node: NodeRow
    wf: WorkflowRow | None
    state: StateRow | None
    sid: str
    machine: MachineSummary | None
    power_address: str
    our_user: str

    @property
    def subject(self) -> str:
        return f"node:{self.node.id}"

    @property
    def base(self) -> dict[str, Any]:
        return {"node_id": self.node.id, "system_id": self.sid, "hostname": self.node.hostname}

    def finding(self, kind: str, severity: str, message: str, detail: dict[str, Any]) -> Finding:
        return Finding(self.subject, kind, severity, message, detail, **self.base)


def _judge_matched(out: Outcome, j: _Judged, read_at: datetime) -> None:
    """A node whose row (or open workflow) moved since MAAS was read is skipped; one not in MAAS
    yet is not judged; the rest are observed, and judged by the missing rule or, with their
    machine listed, by every rule of ``NODE_RULES``."""
    if j.node.updated_at >= read_at or (j.wf is not None and j.wf.updated_at >= read_at):
        out.skipped.add(j.subject)  # in motion: judged next run
        return
    if not j.sid:
        return  # not in MAAS yet (registered, or a workflow still discovering)
    out.nodes_checked += 1
    out.observations.append(Observation(j.node.id, j.sid, j.machine, j.power_address))
    if j.machine is None and j.wf is not None and j.wf.machine_may_vanish:
        return  # a workflow is deleting it (restart-clean's reset, full decommission)
    if j.machine is None:
        out.findings.append(_missing_in_maas(j))
        return
    _judge_node(out, j, j.machine)


def _missing_in_maas(j: _Judged) -> Finding:
    return j.finding(
        DriftKind.MISSING_IN_MAAS,
        Severity.CRITICAL if j.node.state == NodeState.ACTIVE else Severity.WARNING,
        f"MAAS has no machine {j.sid} for node {j.node.hostname}",
        {"expected": j.sid, "observed": None, "node_state": j.node.state},
    )


def _unclaimed_machine(m: MachineSummary, our_user: str) -> Finding:
    """A machine nothing of ours claims: a leak when our MAAS user holds it, else unknown."""
    subject = f"machine:{m.system_id}"
    base: dict[str, Any] = {"system_id": m.system_id, "hostname": m.hostname}
    observed = {"status": m.status_name or label(m.status), "owner": m.owner or None}
    if held_by_us(m, our_user):
        return Finding(
            subject,
            DriftKind.LEAK,
            Severity.CRITICAL,
            f"{m.hostname} ({m.system_id}) is {_held(m, str(observed['status']))} "
            "with no node or open workflow of ours",
            {"observed": observed},
            **base,
        )
    return Finding(
        subject,
        DriftKind.UNKNOWN_MACHINE,
        Severity.INFO,
        f"MAAS machine {m.hostname} ({m.system_id}) is not known to us",
        {"observed": observed},
        **base,
    )


def held_by_us(m: MachineSummary, our_user: str) -> bool:
    """MAAS shows the machine held by our MAAS user: allocated or deployed to it, or left failed
    while it held it. Unclaimed by a node in service or an open workflow, that is a leak."""
    return bool(our_user) and m.owner == our_user and m.status in LEAKABLE


def _held(m: MachineSummary, status: str) -> str:
    """'Deployed to maascp', 'Failed deployment, held by maascp'."""
    return f"{status} to {m.owner}" if m.status in OWNED else f"{status}, held by {m.owner},"


def _judge_node(out: Outcome, j: _Judged, m: MachineSummary) -> None:
    """A node and the machine MAAS lists for it, by every rule of ``NODE_RULES`` in turn."""
    for rule in NODE_RULES:
        if (found := rule(j, m)) is not None:
            out.findings.append(found)


# -- one rule per drift kind of a node with its machine -------------------------------------------


def _leak_of_node(j: _Judged, m: MachineSummary) -> Finding | None:
    """Our MAAS user holds the machine of a node out of service with no open workflow."""
    if j.wf is not None or j.node.state == NodeState.ACTIVE or not held_by_us(m, j.our_user):
        return None
    status_label = m.status_name or label(m.status)
    return j.finding(
        DriftKind.LEAK,
        Severity.CRITICAL,
        f"{m.hostname} ({m.system_id}) is {_held(m, status_label)} but node "
        f"{j.node.hostname} is {j.node.state} with no open workflow",
        {"observed": {"status": status_label, "owner": m.owner}, "node_state": j.node.state},
    )


def _status_mismatch(j: _Judged, m: MachineSummary) -> Finding | None:
    """The machine's status is not one the open workflow's stage expects (or Deployed, for an
    active node with none), unless an operator accepted that status."""
    expected: frozenset[NodeStatus] | None = None
    because = ""
    if j.wf is not None and j.wf.state in JUDGED_WORKFLOW_STATES:
        expected = j.wf.expected
        because = f"{j.wf.kind} {j.wf.id} in stage {j.wf.stage}"
    elif j.wf is None and j.node.state == NodeState.ACTIVE:
        expected = frozenset({S.DEPLOYED})
        because = "node is active"
    accepted = j.state.accepted_status if j.state else None
    if expected is None or m.status in expected or m.status == accepted:
        return None
    status_label = m.status_name or label(m.status)
    return j.finding(
        DriftKind.STATUS_MISMATCH,
        Severity.CRITICAL if j.wf is None else Severity.WARNING,
        f"MAAS shows {m.hostname} {status_label}; expected "
        f"{' or '.join(sorted(label(s) for s in expected))} ({because})",
        {
            "expected": sorted(label(s) for s in expected),
            "observed": status_label,
            "observed_status": m.status,
            "because": because,
        },
    )


def _power_state_unexpected(j: _Judged, m: MachineSummary) -> Finding | None:
    """The BMC reports an error, or an active, deployed node is off, unless accepted."""
    power_reason = ""
    if m.power_state == "error":
        power_reason = "the BMC reports an error"
    elif (
        j.wf is None
        and j.node.state == NodeState.ACTIVE
        and m.status == S.DEPLOYED
        and m.power_state == "off"
    ):
        power_reason = "an active, deployed node is powered off"
    accepted = j.state.accepted_power_state if j.state else ""
    if not power_reason or m.power_state == accepted:
        return None
    return j.finding(
        DriftKind.POWER_STATE_UNEXPECTED,
        SEVERITY[DriftKind.POWER_STATE_UNEXPECTED],
        f"{m.hostname} power is {m.power_state}: {power_reason}",
        {"observed": m.power_state, "because": power_reason},
    )


def _hostname_mismatch(j: _Judged, m: MachineSummary) -> Finding | None:
    if m.hostname == j.node.hostname:
        return None
    return j.finding(
        DriftKind.HOSTNAME_MISMATCH,
        SEVERITY[DriftKind.HOSTNAME_MISMATCH],
        f"MAAS calls {m.system_id} {m.hostname!r}, our node is {j.node.hostname!r}",
        {"expected": j.node.hostname, "observed": m.hostname},
    )


def _power_address_mismatch(j: _Judged, m: MachineSummary) -> Finding | None:
    if not (j.node.ipmi_ip and j.power_address and j.power_address != j.node.ipmi_ip):
        return None
    return j.finding(
        DriftKind.POWER_ADDRESS_MISMATCH,
        SEVERITY[DriftKind.POWER_ADDRESS_MISMATCH],
        f"MAAS power address of {m.hostname} is {j.power_address}, ours {j.node.ipmi_ip}",
        {"expected": j.node.ipmi_ip, "observed": j.power_address},
    )


NODE_RULES: tuple[Callable[[_Judged, MachineSummary], Finding | None], ...] = (
    _leak_of_node,
    _status_mismatch,
    _power_state_unexpected,
    _hostname_mismatch,
    _power_address_mismatch,
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

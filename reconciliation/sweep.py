"""Leaks we own, and the ``sweep`` verb that gives them back (docs/reconciliation.md, "Leaks").

A leak is a machine MAAS shows held by our MAAS user with nothing of ours claiming it
(``compare.held_by_us``). The ones MAAS left failed (Failed deployment, commissioning, testing,
disk erasing: ``compare.FAILED_HELD``) are ours to give back: ``sweep`` reads MAAS and our
records again, decides per machine (``plan``) and sends one MAAS call, audited. Every other
state is refused with the state named.

Who may have written to the machine decides the erase (``tenant_history``): a machine that ever
served a tenant is released with the erase its policy asks for; one that never did may be
released without. MAAS refuses to release from Failed commissioning or Failed testing: those are
marked Broken instead (owner cleared, nobody can allocate them; docs/reconciliation.md says why
not commission, override or delete).

The workflow that left a machine is the latest of any kind on its system id, node or hostname,
found through the registry of kinds (``workflows.kinds.KINDS``), never an app.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q

from maas_client.client import MaasClient
from maas_client.errors import MaasError, MaasNotFound, MaasStateConflict, MaasTransient
from maas_client.status import LABELS, NodeStatus
from maas_client.types import Machine, MachineSummary
from maas_domain import audit
from maas_domain.errors import Conflict, NotFound, ServiceUnavailable
from maas_domain.models import Allocation, MaasSite, Node, SiteProfile
from maas_domain.models.inventory import NodeState
from maas_domain.models.sites import SiteStatus
from maas_domain.policy import Policy
from maas_domain.site_client import client_for_site
from maas_domain.work import OPEN_STATES, WorkflowState
from reconciliation import compare
from reconciliation.models import DriftKind, DriftRecord, DriftState, ReconcileRun
from workflows.kinds import KINDS

log = logging.getLogger("reconciliation")
S = NodeStatus
SWEEPABLE = compare.FAILED_HELD
NOT_RELEASABLE = frozenset({S.FAILED_COMMISSIONING, S.FAILED_TESTING})  # MAAS: mark_broken
# Reconciliation's own sweeps (policy ``leak_auto_sweep``): a leak seen by this many runs in a
# row (a moment after a failure an operator may still be acting), at most this many a run.
AUTO_AFTER_RUNS = 2
AUTO_PER_RUN = 10
_WORKFLOW_FIELDS = ("id", "state", "stage", "attempt", "failure_class", "reason",
                    "maas_system_id", "hostname", "updated_at")  # fmt: skip


def sweepable_states() -> str:
    return ", ".join(sorted(LABELS[s] for s in SWEEPABLE))


# -- the workflow that left a machine ---------------------------------------------------------


def workflows_on(
    site_id: int, *, system_ids: Iterable[str], hostnames: Iterable[str], node_ids: Iterable[int]
) -> list[dict[str, Any]]:
    """Every workflow of every registered kind on these machines (by system id, node or
    hostname) of the site, as small dicts with their kind: one query per kind."""
    sids, hosts = {s for s in system_ids if s}, {h for h in hostnames if h}
    nodes = {n for n in node_ids if n}
    found: list[dict[str, Any]] = []
    for kind in KINDS.values():
        match = Q(maas_system_id__in=sids) | Q(hostname__in=hosts)
        has_node = any(f.name == "node" for f in kind.model._meta.get_fields())
        if has_node:
            match |= Q(node_id__in=nodes)
        rows = kind.model._default_manager.filter(match, site_id=site_id).values(
            *_WORKFLOW_FIELDS, *(("node_id",) if has_node else ())
        )
        found += [{"kind": kind.name, "node_id": None, **row} for row in rows]
    return found


def on_machine(
    rows: list[dict[str, Any]], system_id: str, hostname: str, node_id: int | None
) -> list[dict[str, Any]]:
    """The workflows of ``rows`` on this machine: those that name its system id or its node,
    else (a machine whose system id no workflow recorded) those on its hostname."""
    precise = [
        r
        for r in rows
        if (system_id and r["maas_system_id"] == system_id) or (node_id and r["node_id"] == node_id)
    ]
    return precise or [r for r in rows if r["hostname"] == hostname]


def latest(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The workflow that touched the machine last, as the ledger and the sweep name it."""
    last = max(rows, key=lambda r: (r["updated_at"], r["id"]), default=None)
    if last is None:
        return None
    return {
        "kind": last["kind"],
        "id": last["id"],
        "state": last["state"],
        "stage": last["stage"],
        "attempt": last["attempt"],
        "failure_class": last["failure_class"],
        "reason": last["reason"][:200],
    }


def describe(left_by: dict[str, Any] | None) -> str:
    if left_by is None:
        return "no workflow of ours has touched it"
    what = f"{left_by['kind']} {left_by['id']} ({left_by['state']}"
    if left_by["state"] == WorkflowState.FAILED:
        what += f" at {left_by['stage']}"
        if left_by["failure_class"]:
            what += f": {left_by['failure_class']}"
    return f"left by {what})"


def name_leavers(site_id: int, findings: list[compare.Finding]) -> list[compare.Finding]:
    """Each leak finding with the workflow that left its machine (``detail.left_by``, and in
    its message). One query per registered kind, only when a run found leaks."""
    leaks = [f for f in findings if f.kind == DriftKind.LEAK]
    if not leaks:
        return findings
    rows = workflows_on(
        site_id,
        system_ids=(f.system_id for f in leaks),
        hostnames=(f.hostname for f in leaks),
        node_ids=(f.node_id or 0 for f in leaks),
    )
    named: list[compare.Finding] = []
    for f in findings:
        if f.kind == DriftKind.LEAK:
            left_by = latest(on_machine(rows, f.system_id, f.hostname, f.node_id))
            f = dataclasses.replace(
                f,
                message=f"{f.message}; {describe(left_by)}",
                detail={**f.detail, "left_by": left_by},
            )
        named.append(f)
    return named


# -- who may have written to it ---------------------------------------------------------------

IN_SERVICE = (NodeState.ACTIVE, NodeState.DRAINING)


def tenant_history(nodes: list[Node], rows: list[dict[str, Any]]) -> tuple[bool, str]:
    """May a tenant have written to the machine? (docs/reconciliation.md, "Leaks": the rule.)
    From our records: a node of it in service (active, or draining out of service), a node of it
    ever allocated, or any workflow on it that succeeded (an onboarding's success is what puts a
    node in service; every other kind's follows one) says yes; a machine we have no record of
    at all says yes too (its history is unknown). Only a machine whose every record shows it
    never served may be released without its erase. MAAS cannot tell: every deployment is our
    one user's, whoever the tenant."""
    for node in nodes:
        if node.state in IN_SERVICE:
            return True, f"node {node.hostname} is {node.state}: it served tenants"
    held = Allocation.objects.filter(node__in=nodes).count() if nodes else 0
    if held:
        return True, f"its node was allocated to tenants ({held} allocation(s))"
    done = [r for r in rows if r["state"] == WorkflowState.SUCCEEDED]
    if done:
        last = max(done, key=lambda r: (r["updated_at"], r["id"]))
        return True, f"{last['kind']} {last['id']} succeeded on it: it was in service"
    if not nodes and not rows:
        return True, "no node or workflow of ours ever had it: its history is unknown"
    return False, (
        "it never reached a tenant: no workflow of ours on it succeeded and no node of it was "
        "ever in service or allocated"
    )


# -- deciding -----------------------------------------------------------------------------------


@dataclass
class Plan:
    """What the sweep does to one machine, and why."""

    system_id: str
    hostname: str
    status: str  # MAAS's label when it was read
    action: str  # release | mark_broken
    erase: str  # the erase the release asks for: none | quick | secure
    erase_owed: str  # marked Broken although it may hold a tenant's data: the policy's mode
    tenant_data: bool
    why: str
    policy_from: str
    left_by: dict[str, Any] | None
    node_id: int | None
    auto_sweep: bool  # the machine's policy lets reconciliation sweep it by itself
    node_state: str = ""
    outcome: str = "planned"  # planned | swept | failed
    maas_status: str = ""  # what MAAS answered
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def decide(status: NodeStatus, tenant: bool, policy: Policy) -> tuple[str, str, str]:
    """(action, erase asked, erase owed) for a sweepable machine (the table in
    docs/reconciliation.md, "Leaks")."""
    mode = policy.erase_mode
    if status in NOT_RELEASABLE:
        # MAAS refuses release here; Broken takes it out of our hands and out of every pool
        return "mark_broken", "none", mode if tenant and mode != "none" else ""
    if status == S.FAILED_DISK_ERASING:
        return "release", mode, ""  # an erase was asked for and never finished: ask again
    return "release", mode if tenant else "none", ""


def _kind_policy(left_by: dict[str, Any] | None, site: MaasSite) -> tuple[Policy, str]:
    """The erase policy of the workflow that left the machine (its profile's), else the
    site's."""
    if left_by is not None and (kind := KINDS.get(left_by["kind"])) is not None:
        return kind.policy(kind.load(left_by["id"])), f"{left_by['kind']} {left_by['id']}"
    return site.effective_policy(), "the site"


def _nodes(site: MaasSite, system_id: str, hostname: str) -> list[Node]:
    """Our nodes of the machine: by its system id (retired ones too), else the live node of its
    hostname."""
    found = list(Node.objects.filter(site=site, maas_system_id=system_id))
    if not any(n.state != NodeState.RETIRED for n in found):
        found += list(
            Node.objects.filter(site=site, hostname=hostname).exclude(state=NodeState.RETIRED)
        )
    return found


def _claimed(site: MaasSite, system_id: str, hostname: str) -> list[dict[str, Any]]:
    """Open workflows (any kind) that claim the machine by system id or hostname."""
    found: list[dict[str, Any]] = []
    for kind in KINDS.values():
        rows = kind.model._default_manager.filter(
            Q(maas_system_id=system_id) | Q(wait_system_id=system_id) | Q(hostname=hostname),
            site=site,
            state__in=OPEN_STATES,
        ).values("id", "state", "stage")
        found += [{"kind": kind.name, **row} for row in rows]
    return found


class NotALeak(Conflict):
    """The machine is not ours to sweep (the reason names what MAAS or our records show)."""


def plan(site: MaasSite, machine: Machine | MachineSummary, our_user: str) -> Plan:
    """Judge one machine as MAAS just showed it; ``NotALeak`` (409) when it is not a sweepable
    leak: the state, the holder or what claims it named."""
    sid, host, status = machine.system_id, machine.hostname, machine.status
    label = machine.status_name or compare.label(int(status))
    if status not in SWEEPABLE:
        raise NotALeak(
            f"{host} ({sid}) is {label} in MAAS; sweep takes a machine in {sweepable_states()}",
            maas_status=label,
            sweepable_states=sorted(LABELS[s] for s in SWEEPABLE),
        )
    if not our_user or machine.owner != our_user:
        raise NotALeak(
            f"{host} ({sid}) is {label} but held by {machine.owner or 'nobody'}, not by our "
            f"MAAS user {our_user!r}: not ours to sweep",
            maas_status=label,
            owner=machine.owner,
        )
    if claimed := _claimed(site, sid, host):
        first = claimed[0]
        raise NotALeak(
            f"{host} ({sid}) is claimed by the open {first['kind']} {first['id']} "
            f"({first['state']} at {first['stage']}): use that workflow's verbs",
            maas_status=label,
            open_workflows=claimed,
        )
    nodes = _nodes(site, sid, host)
    live = next((n for n in nodes if n.state != NodeState.RETIRED), None)
    if live is not None and live.state == NodeState.ACTIVE:
        raise NotALeak(
            f"node {live.hostname} is active: MAAS showing it {label} is a status mismatch of a "
            "node in service, not a leak; take the node out of service first",
            maas_status=label,
            node={"id": live.pk, "state": live.state},
        )
    rows = on_machine(
        workflows_on(site.pk, system_ids=[sid], hostnames=[host], node_ids=[n.pk for n in nodes]),
        sid,
        host,
        live.pk if live else None,
    )
    left_by = latest(rows)
    tenant, why = tenant_history(nodes, rows)
    policy, policy_from = _kind_policy(left_by, site)
    action, erase, owed = decide(S(status), tenant, policy)
    return Plan(
        system_id=sid,
        hostname=host,
        status=label,
        action=action,
        erase=erase,
        erase_owed=owed,
        tenant_data=tenant,
        why=why,
        policy_from=policy_from,
        left_by=left_by,
        node_id=live.pk if live else None,
        node_state=live.state if live else "",
        auto_sweep=policy.leak_auto_sweep,
    )


# -- doing -------------------------------------------------------------------------------------


def _comment(plan: Plan, reason: str) -> str:
    text = f"maascp sweep of a leak ({describe(plan.left_by)})"
    if reason:
        text += f": {reason}"
    return "".join(c for c in text if c.isprintable())[:240]


def _send(client: MaasClient, plan: Plan, reason: str) -> Machine:
    comment = _comment(plan, reason)
    if plan.action == "mark_broken":
        return client.mark_broken(plan.system_id, comment=comment)
    return client.release(
        plan.system_id,
        erase=plan.erase != "none",
        secure_erase=plan.erase == "secure",
        quick_erase=plan.erase == "quick",
        comment=comment,
    )


def _record(plan: Plan, *, actor: audit.Actor, site: MaasSite, reason: str, owner: str) -> None:
    """The audit row, and an entry on the timeline of the workflow that left the machine."""
    name = audit.actor_name(actor)
    with transaction.atomic():
        audit.record(
            actor=actor,
            action="leak.sweep",
            target=("maas.machine", plan.system_id),
            before={"site_id": site.pk, "status": plan.status, "owner": owner},
            after=plan.as_dict(),
            reason=reason,
        )
        if plan.left_by is not None and (kind := KINDS.get(plan.left_by["kind"])) is not None:
            wf = kind.load(plan.left_by["id"])
            erase = f", {plan.erase} erase" if plan.erase != "none" else ", no erase"
            kind.add_event(
                wf,
                "leak.swept",
                f"the machine it left {plan.status} was swept by {name}: {plan.action}"
                + (erase if plan.action == "release" else "")
                + f" (MAAS: {plan.maas_status})",
                actor=name,
                system_id=plan.system_id,
                action=plan.action,
                erase=plan.erase,
                erase_owed=plan.erase_owed,
                tenant_data=plan.tenant_data,
            )


def _maas_down(exc: MaasError) -> ServiceUnavailable:
    return ServiceUnavailable(f"MAAS is unavailable ({exc.message}); nothing was swept.",
                              dependency="maas")  # fmt: skip


def _our_user(site: MaasSite, client: MaasClient) -> str:
    return site.maas_user or client.whoami().username


def _apply(
    client: MaasClient,
    site: MaasSite,
    plan: Plan,
    *,
    actor: audit.Actor,
    reason: str,
    owner: str,
    raising: bool,
) -> Plan:
    """Send the plan's one MAAS call and record it; a MAAS refusal is the plan's error (or,
    with ``raising``, the request's 409/503)."""
    try:
        answer = _send(client, plan, reason)
    except MaasError as exc:
        maybe = isinstance(exc, MaasTransient) and exc.maybe_applied
        plan.outcome = "failed"
        plan.error = f"{exc.kind}: {exc.message}"[:300]
        if maybe:
            plan.error += " (it may have reached MAAS: the next run or sweep reads it first)"
        if raising and isinstance(exc, MaasStateConflict):
            raise Conflict(
                f"MAAS refused to {plan.action} {plan.hostname} ({plan.status}): {exc.message}",
                maas_status=plan.status,
            ) from exc
        if raising:
            raise ServiceUnavailable(
                f"MAAS did not take the {plan.action} of {plan.hostname}: {plan.error}",
                dependency="maas",
            ) from exc
        return plan
    plan.outcome, plan.maas_status = "swept", answer.status_name
    _record(plan, actor=actor, site=site, reason=reason, owner=owner)
    log.info(
        "swept leaked machine %s (%s) of %s: %s, erase %s",
        plan.hostname,
        plan.system_id,
        site.name,
        plan.action,
        plan.erase,
        extra={"site": site.name, "maas_system_id": plan.system_id, "hostname": plan.hostname},
    )
    return plan


def sweep(
    *,
    actor: audit.Actor,
    site: MaasSite,
    system_id: str = "",
    reason: str = "",
    dry_run: bool = False,
) -> dict[str, Any]:
    """Give back one leaked machine (``system_id``: 409 naming its state when it is not a
    sweepable leak) or every one of the site. With ``dry_run``: the plans, nothing sent."""
    if site.status != SiteStatus.ACTIVE:
        raise Conflict(f"site {site.name!r} is disabled", site_status=site.status)
    client = client_for_site(site)
    try:
        try:
            our_user = _our_user(site, client)
            if system_id:
                candidates: list[Machine | MachineSummary] = [client.get_machine(system_id)]
            else:
                candidates = [
                    m
                    for m in client.machine_summaries()
                    if m.status in SWEEPABLE and our_user and m.owner == our_user
                ]
        except MaasNotFound as exc:
            raise NotFound(f"MAAS has no machine {system_id}") from exc
        except MaasError as exc:
            raise _maas_down(exc) from exc
        plans: list[Plan] = []
        skipped: list[dict[str, Any]] = []
        for machine in candidates:
            try:
                plans.append(plan(site, machine, our_user))
            except NotALeak as exc:
                if system_id:
                    raise
                skipped.append(
                    {
                        "system_id": machine.system_id,
                        "hostname": machine.hostname,
                        "reason": exc.message,
                    }
                )
        if not dry_run:
            plans = [
                _apply(
                    client,
                    site,
                    p,
                    actor=actor,
                    reason=reason,
                    owner=our_user,
                    raising=bool(system_id),
                )
                for p in plans
            ]
    finally:
        client.close()
    return {
        "dry_run": dry_run,
        "site_id": site.pk,
        "swept": [p.as_dict() for p in plans if p.outcome != "failed"],
        "failed": [p.as_dict() for p in plans if p.outcome == "failed"],
        "skipped": skipped,
    }


def auto_sweep(run: ReconcileRun, machines: list[MachineSummary], our_user: str) -> int:
    """Reconciliation's own sweeps (policy ``leak_auto_sweep``), after a run wrote the ledger:
    an open leak seen by ``AUTO_AFTER_RUNS`` runs, still held by us failed as this run's listing
    shows it, that never reached a tenant and whose node is not quarantined (its repair decides),
    at most ``AUTO_PER_RUN`` a run. Each machine is read again before it is swept. A MAAS
    failure is the run's error, not its failure. Returns how many were swept."""
    site = run.site
    if not _auto_enabled(site):
        return 0
    records = list(
        DriftRecord.objects.filter(
            site_id=site.pk,
            kind=DriftKind.LEAK,
            state=DriftState.OPEN,
            occurrences__gte=AUTO_AFTER_RUNS,
        ).order_by("first_seen_at", "id")[: AUTO_PER_RUN * 5]
    )
    if not records:
        return 0
    listed = {m.system_id: m for m in machines}
    swept = 0
    client = client_for_site(site)
    try:
        for rec in records:
            seen = listed.get(rec.system_id)
            if seen is None or seen.status not in SWEEPABLE or seen.owner != our_user:
                continue
            try:
                if not _auto(plan(site, seen, our_user)):
                    continue
                run.maas_requests += 1
                machine = client.get_machine(rec.system_id)  # look before acting
                decided = plan(site, machine, our_user)
            except NotALeak:
                continue
            except MaasError as exc:
                run.maas_errors = [*run.maas_errors, _error(exc)]
                continue
            if not _auto(decided):
                continue
            run.maas_requests += 1
            done = _apply(
                client,
                site,
                decided,
                actor=None,
                reason=f"automatic: policy leak_auto_sweep (reconcile run {run.pk})",
                owner=our_user,
                raising=False,
            )
            if done.outcome == "swept":
                swept += 1
            else:
                run.maas_errors = [
                    *run.maas_errors,
                    {"operation": done.action, "kind": "sweep", "message": done.error[:300]},
                ]
            if swept >= AUTO_PER_RUN:
                break
    finally:
        client.close()
    return swept


def _auto(decided: Plan) -> bool:
    """May reconciliation sweep this leak by itself? Its policy says so, no tenant ever had it,
    and its node is not quarantined (the node's repair decides what happens to its machine)."""
    return (
        decided.auto_sweep
        and not decided.tenant_data
        and decided.node_state != NodeState.QUARANTINED
    )


def _auto_enabled(site: MaasSite) -> bool:
    """Does the site, or any of its profiles, turn ``leak_auto_sweep`` on? (One query; each
    machine's own policy decides after.)"""
    return (
        bool(site.policy.get("leak_auto_sweep"))
        or SiteProfile.objects.filter(site=site, policy_overrides__leak_auto_sweep=True).exists()
    )


def _error(exc: MaasError) -> dict[str, Any]:
    return {
        "operation": exc.operation,
        "kind": exc.kind,
        "status": exc.status,
        "message": exc.message[:300],
    }

"""Reconciliation services: request a run, dispatch scheduled runs, execute a run, resolve drift.

A run reads MAAS in bulk (one machine listing and one power-parameters read per site, plus a
``whoami`` when the site row does not name its MAAS user), then compares and writes in one short
transaction with a constant number of SQL queries. It changes MAAS only where a policy asks it to
sweep a leak that never reached a tenant (``sweep.auto_sweep``). A MAAS (or secrets) failure
fails the run with a reason and leaves the ledger untouched: no false drift, nothing cleared.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from maas_client.errors import MaasError
from maas_domain import audit, context, regions
from maas_domain.errors import Conflict, InvalidInput, NotFound
from maas_domain.fsm import sources, target
from maas_domain.locks import try_lock
from maas_domain.models import CordonReason, MaasSite, Node
from maas_domain.models.inventory import NodeState
from maas_domain.models.sites import SiteStatus
from maas_domain.observability import metrics
from maas_domain.secrets import SecretsError
from maas_domain.services import cordons
from maas_domain.site_client import client_for_site
from maas_domain.validators import hostname_error, ipv4_error
from reconciliation import compare, hardware, sweep
from reconciliation.models import (
    ACTIVE_DRIFT,
    ACTIVE_RUN,
    DriftKind,
    DriftRecord,
    DriftState,
    NodeMaasState,
    ReconcileRun,
    Severity,
)
from workflows.kinds import KINDS

log = logging.getLogger("reconciliation")
ACTIONS = ("acknowledge", "adopt", "mark-manual-intervention")
# Kinds whose MAAS value can be taken into our record, and which field it lands in.
ADOPTABLE: dict[str, str] = {
    DriftKind.HOSTNAME_MISMATCH: "node.hostname",
    DriftKind.POWER_ADDRESS_MISMATCH: "node.ipmi_ip",
    DriftKind.STATUS_MISMATCH: "node_maas_state.accepted_status",
    DriftKind.POWER_STATE_UNEXPECTED: "node_maas_state.accepted_power_state",
}
# The MAAS picture of a node, in the order compared and stored.
_PICTURE = (
    "system_id",
    "hostname",
    "status",
    "status_name",
    "power_state",
    "power_address",
    "owner",
    "missing_since",
)
_STATE_FIELDS = [
    "site",
    "system_id",
    "hostname",
    "status",
    "status_name",
    "power_state",
    "power_address",
    "owner",
    "last_seen_at",
    "missing_since",
    "updated_at",
]
_DRIFT_FIELDS = [
    "severity",
    "state",
    "message",
    "detail",
    "last_seen_at",
    "occurrences",
    "cleared_at",
    "node",
    "system_id",
    "hostname",
]


@contextmanager
def site_lock(site_id: int) -> Iterator[None]:
    """A transaction holding the site's reconciliation lock (blocking, PostgreSQL advisory,
    released at commit). Serialises a run's write phase with drift resolutions of the same
    site. SQLite (embedded) serialises writers itself."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            key = zlib.crc32(f"reconcile-site-{site_id}".encode()) - (1 << 31)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        yield


# -- requesting and dispatching runs ---------------------------------------------------------


def _expire_stale_runs(site_id: int, now: datetime) -> None:
    """A queued or running run older than RECONCILE_STALE_SECONDS lost its worker or message:
    fail it so the site can be reconciled again."""
    limit = now - timedelta(seconds=settings.RECONCILE_STALE_SECONDS)
    ReconcileRun.objects.filter(
        site_id=site_id, state__in=sources(ReconcileRun.fail), queued_at__lt=limit
    ).update(
        state=target(ReconcileRun.fail),
        finished_at=now,
        reason="stale: no worker finished the run in time",
    )


def reconcile_request(
    *, site: MaasSite, trigger: str, actor: audit.Actor = None
) -> tuple[ReconcileRun, bool]:
    """Queue a run of ``site`` (sent to a worker after commit). Returns ``(run, created)``: a
    run already queued or running for the site is returned instead of a second one."""
    if site.status != SiteStatus.ACTIVE:
        raise Conflict(f"site {site.name!r} is disabled", site_status=site.status)
    now = timezone.now()
    with transaction.atomic():
        # the site's region, read under its row lock: a region change (which refuses while a
        # run is queued or running) and this request are serialised, so the run goes to the
        # queue of the region the site is in when it commits
        region = (
            MaasSite.objects.select_for_update()
            .filter(pk=site.pk)
            .values_list("region", flat=True)
            .first()
        ) or regions.DEFAULT_REGION
        _expire_stale_runs(site.pk, now)
        existing = ReconcileRun.objects.filter(site=site, state__in=ACTIVE_RUN).first()
        if existing is not None:
            return existing, False
        try:
            with transaction.atomic():
                run = ReconcileRun.objects.create(
                    site=site,
                    trigger=trigger,
                    requested_by=audit.actor_name(actor),
                    correlation_id=context.current_correlation_id() or "",
                )
        except IntegrityError:  # a concurrent request won
            return ReconcileRun.objects.get(site=site, state__in=ACTIVE_RUN), False
        if trigger != "schedule":
            audit.record(
                actor=actor,
                action="reconciliation.run",
                target=run,
                after={"site_id": site.pk, "run_id": run.pk, "trigger": trigger},
            )
        run_id = run.pk

        transaction.on_commit(
            lambda: regions.send(RECONCILE_SITE, (run_id,), region=region), robust=True
        )
    return run, True


def reconcile_dispatch() -> dict[str, int]:
    """The beat entry: queue a run per active site. Under a database lock, and a site whose run
    was queued less than RECONCILE_MIN_GAP_SECONDS ago is skipped, so two beats firing the same
    tick queue each site once."""
    counts = {"queued": 0, "skipped": 0, "unserved": 0}
    with try_lock("reconcile-dispatch") as got:
        if not got:
            return counts
        # a region no live worker serves gets no scheduled runs: they would only wait there and
        # expire as stale (an operator may still ask for one; it waits for the region's worker)
        live = regions.live_queues() if regions.routed() else None
        gap = timezone.now() - timedelta(seconds=settings.RECONCILE_MIN_GAP_SECONDS)
        recent = set(
            ReconcileRun.objects.filter(queued_at__gte=gap).values_list("site_id", flat=True)
        )
        for site in MaasSite.objects.filter(status=SiteStatus.ACTIVE).order_by("id"):
            if site.pk in recent:
                counts["skipped"] += 1
                continue
            if regions.hold_back(site.region, live):
                counts["unserved"] += 1
                continue
            _, created = reconcile_request(site=site, trigger="schedule")
            counts["queued" if created else "skipped"] += 1
    return counts


# -- executing a run --------------------------------------------------------------------------


def reconcile_execute(run_id: int) -> ReconcileRun | None:
    """Claim a queued run (compare-and-swap; a duplicate message finds nothing to claim), read
    MAAS, compare, write. Always ends the run as succeeded or failed."""
    started = timezone.now()
    claimed = ReconcileRun.objects.filter(pk=run_id, state__in=sources(ReconcileRun.start)).update(
        state=target(ReconcileRun.start), started_at=started
    )
    if not claimed:
        return None
    run = ReconcileRun.objects.select_related("site").get(pk=run_id)
    clock = time.perf_counter()
    try:
        _reconcile(run)
    except (MaasError, SecretsError) as exc:
        run.fail()
        what = "MAAS unavailable" if isinstance(exc, MaasError) else "MAAS credentials unavailable"
        run.reason = f"{what}: {exc}"[:500]
        run.maas_errors = [*run.maas_errors, _error(exc)]
    except Exception as exc:  # the run row must not stay "running"
        log.exception("reconcile run %s of %s crashed", run.pk, run.site.name)
        run.fail()
        run.reason = f"internal error: {type(exc).__name__}"
    else:
        run.succeed()
    run.finished_at = timezone.now()
    run.duration_ms = int((time.perf_counter() - clock) * 1000)
    run.save()
    metrics.reconcile_finished(run.site.name, run.duration_ms / 1000, run.state)
    log.info(
        "reconcile of %s: %s in %d ms, %d machines, drift +%d -%d (%d open)",
        run.site.name,
        run.state,
        run.duration_ms,
        run.machines_seen,
        run.drift_opened,
        run.drift_cleared,
        run.drift_open,
        extra={"site": run.site.name, "run_id": run.pk},
    )
    return run


def _error(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, MaasError):
        return {
            "operation": exc.operation,
            "kind": exc.kind,
            "status": exc.status,
            "message": exc.message[:300],
        }
    return {"operation": "secrets", "kind": type(exc).__name__, "message": str(exc)[:300]}


def _reconcile(run: ReconcileRun) -> None:
    site = run.site
    read_at = timezone.now()
    client = client_for_site(site)
    try:
        run.maas_requests += 1
        machines = client.machine_summaries()
        run.maas_requests += 1
        power = client.power_addresses()
        our_user = site.maas_user
        if not our_user:
            run.maas_requests += 1
            our_user = client.whoami().username
        seen = hardware.check(site.pk, client, machines)
        run.maas_requests += seen.requests
    finally:
        client.close()
    run.machines_seen = len(machines)
    apply_listing(
        run=run, site=site, machines=machines, power=power, our_user=our_user, read_at=read_at,
        hardware_seen=seen,
    )  # fmt: skip
    # the policy's own sweeps of leaks that never reached a tenant (docs/reconciliation.md,
    # "Leaks"): after the ledger is written, outside its transaction
    run.leaks_swept = sweep.auto_sweep(run, machines, our_user)


def _workflow_rows(site_id: int) -> list[compare.WorkflowRow]:
    """Open workflows of every registered kind (one query per kind, whatever the count), with
    what their stage's declaration says MAAS should show."""
    rows: list[compare.WorkflowRow] = []
    for kind in KINDS.values():
        qs = kind.model._default_manager.filter(kind.model.open_filter(), site_id=site_id)
        for wf in qs.select_related(*kind.select_related):
            stage = kind.find(wf.stage)
            timeout = None
            if wf.state in compare.JUDGED_WORKFLOW_STATES and wf.stage:
                timeout = kind.timeout(wf.stage, kind.policy(wf))
            rows.append(
                compare.WorkflowRow(
                    kind=kind.name,
                    id=wf.pk,
                    state=wf.state,
                    stage=wf.stage,
                    node_id=wf.node_id,
                    hostname=wf.hostname,
                    system_id=wf.maas_system_id or wf.wait_system_id or "",
                    stage_started_at=wf.stage_started_at,
                    updated_at=wf.updated_at,
                    stage_timeout=timeout,
                    expected=stage.expects if stage else None,
                    machine_may_vanish=bool(stage and stage.machine_may_vanish),
                )
            )
    return rows


def apply_listing(
    *,
    run: ReconcileRun,
    site: MaasSite,
    machines: list[Any],
    power: dict[str, str],
    our_user: str,
    read_at: datetime,
    hardware_seen: hardware.Seen | None = None,
) -> None:
    """Compare a MAAS listing with our rows and write node_maas_state and the drift ledger, in
    one transaction with a constant number of queries (and one more per new hardware verdict,
    at most reconciliation/hardware.py's MAX_CHECKS_PER_RUN)."""
    with site_lock(site.pk):
        now = timezone.now()
        node_rows = list(
            Node.objects.filter(site_id=site.pk).values_list(
                "id", "hostname", "ipmi_ip", "maas_system_id", "state", "updated_at"
            )
        )
        nodes = [
            compare.NodeRow(pk, host, ip or "", sid, state, updated)
            for pk, host, ip, sid, state, updated in node_rows
            if state != NodeState.RETIRED
        ]
        retired = {
            sid for _, _, _, sid, state, _ in node_rows if state == NodeState.RETIRED and sid
        }
        # Plain tuples, not model instances: 10,000 rows load in a third of the time.
        states = {
            row[0]: row[1:]
            for row in NodeMaasState.objects.filter(site_id=site.pk).values_list(
                "node_id",
                *_PICTURE,
                "last_seen_at",
                "accepted_status",
                "accepted_power_state",
                "hw_conformant",
                "hw_failed",
            )
        }
        workflows = _workflow_rows(site.pk)
        outcome = compare.compare(
            machines=machines,
            power_addresses=power,
            our_user=our_user,
            nodes=nodes,
            retired_system_ids=retired,
            states={k: compare.StateRow(s[0], s[-4], s[-3]) for k, s in states.items()},
            workflows=workflows,
            read_at=read_at,
            now=now,
            stuck_grace=timedelta(seconds=settings.RECONCILE_STUCK_GRACE_SECONDS),
        )
        _write_states(site, outcome, states, now)
        outcome.findings = sweep.name_leavers(site.pk, outcome.findings)
        if hardware_seen is not None:
            kept = {k: (s[-2], s[-1]) for k, s in states.items()}
            outcome.findings += hardware.record(hardware_seen, kept, machines, now)
        opened, cleared, open_now = _write_ledger(site, outcome, now)
    run.nodes_checked = outcome.nodes_checked
    run.drift_opened, run.drift_cleared, run.drift_open = opened, cleared, open_now


def _write_states(
    site: MaasSite, outcome: compare.Outcome, states: dict[int, tuple[Any, ...]], now: datetime
) -> None:
    """Upsert the rows whose MAAS picture changed (one query), then stamp last_seen_at on every
    row whose machine was seen (one query)."""
    changed: list[tuple[Any, ...]] = []
    width = len(_PICTURE)
    for obs in outcome.observations:
        stored = states.get(obs.node_id)
        old = stored[:width] if stored else None
        last_seen = stored[width] if stored else None
        m = obs.machine
        new: tuple[Any, ...]
        if m is None:
            base = old or (obs.system_id, "", None, "", "", "", "", None)
            new = (obs.system_id, *base[1:7], base[7] or now)
        else:
            new = (m.system_id, m.hostname, m.status, m.status_name, m.power_state,
                   obs.power_address, m.owner, None)  # fmt: skip
            last_seen = now
        if new != old:
            changed.append((obs.node_id, *new, last_seen))
    if changed:
        _upsert_states(site.pk, changed, now)
    NodeMaasState.objects.filter(site_id=site.pk, missing_since__isnull=True).exclude(
        system_id=""
    ).update(last_seen_at=now)


_UPSERT_STATES = """
INSERT INTO node_maas_state (node_id, system_id, hostname, status, status_name, power_state,
    power_address, owner, missing_since, last_seen_at, site_id, updated_at, accepted_power_state,
    hw_judged_sync, hw_failed)
SELECT u.*, %s, %s, '', '', '[]'::jsonb
FROM unnest(%s::bigint[], %s::varchar[], %s::varchar[], %s::smallint[], %s::varchar[],
    %s::varchar[], %s::varchar[], %s::varchar[], %s::timestamptz[], %s::timestamptz[]) AS u
ON CONFLICT (node_id) DO UPDATE SET system_id = EXCLUDED.system_id,
    hostname = EXCLUDED.hostname, status = EXCLUDED.status, status_name = EXCLUDED.status_name,
    power_state = EXCLUDED.power_state, power_address = EXCLUDED.power_address,
    owner = EXCLUDED.owner, missing_since = EXCLUDED.missing_since,
    last_seen_at = EXCLUDED.last_seen_at, site_id = EXCLUDED.site_id,
    updated_at = EXCLUDED.updated_at
"""


def _upsert_states(site_id: int, rows: list[tuple[Any, ...]], now: datetime) -> None:
    """One statement for any number of rows. PostgreSQL: ``INSERT … SELECT FROM unnest(arrays)
    ON CONFLICT``, which skips building 10,000 model instances and their SQL parameters (the
    first run of a 10,000-node site goes from ~1.2 s to ~0.2 s of writing). Elsewhere (SQLite,
    embedded): ``bulk_create`` with the same upsert."""
    if connection.vendor == "postgresql":
        columns = [list(c) for c in zip(*rows, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(_UPSERT_STATES, [site_id, now, *columns])
        return
    objs = []
    for node_id, *picture, last_seen in rows:
        obj = NodeMaasState(
            node_id=node_id, site_id=site_id, last_seen_at=last_seen, updated_at=now
        )
        for name, value in zip(_PICTURE, picture, strict=True):
            setattr(obj, name, value)
        objs.append(obj)
    NodeMaasState.objects.bulk_create(
        objs, update_conflicts=True, unique_fields=["node"], update_fields=_STATE_FIELDS
    )


def _write_ledger(site: MaasSite, outcome: compare.Outcome, now: datetime) -> tuple[int, int, int]:
    """Open, refresh, reopen (expired acknowledgement) and clear drift records: one read, one
    insert of new records, one upsert of changed ones."""
    active = {
        (r.subject, r.kind): r
        for r in DriftRecord.objects.filter(site_id=site.pk, state__in=ACTIVE_DRIFT)
    }
    new: list[DriftRecord] = []
    changed: list[DriftRecord] = []
    seen: set[tuple[str, str]] = set()
    for f in outcome.findings:
        key = (f.subject, f.kind)
        if key in seen:
            continue
        seen.add(key)
        rec = active.get(key)
        if rec is None:
            new.append(
                DriftRecord(
                    site_id=site.pk,
                    kind=f.kind,
                    subject=f.subject,
                    node_id=f.node_id,
                    system_id=f.system_id,
                    hostname=f.hostname,
                    severity=f.severity,
                    message=f.message[:500],
                    detail=f.detail,
                    first_seen_at=now,
                    last_seen_at=now,
                )
            )
            continue
        rec.last_seen_at = now
        rec.occurrences += 1
        rec.severity, rec.message, rec.detail = f.severity, f.message[:500], f.detail
        rec.system_id, rec.hostname = f.system_id or rec.system_id, f.hostname or rec.hostname
        if (
            rec.state == DriftState.ACKNOWLEDGED
            and rec.acknowledged_until is not None
            and rec.acknowledged_until <= now
        ):
            rec.reopen()  # the acknowledgement expired and it is still there
        changed.append(rec)
    cleared = 0
    for key, rec in active.items():
        if key in seen or rec.subject in outcome.skipped:
            continue
        rec.clear()
        rec.cleared_at = now
        changed.append(rec)
        cleared += 1
    if new:
        DriftRecord.objects.bulk_create(new)
    if changed:
        DriftRecord.objects.bulk_create(
            changed,
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=_DRIFT_FIELDS,
        )
    _cordon_for_critical_drift([r for r in new + changed if r.state in ACTIVE_DRIFT])
    open_now = len(active) - cleared + len(new)
    return len(new), cleared, open_now


def _cordon_for_critical_drift(records: list[DriftRecord]) -> None:
    """A node whose machine shows critical drift takes no new work from this run on
    (docs/operations.md, "Cordons"): each critical record cordons its node once (one read of
    the nodes, one of their cordons, one insert)."""
    critical = [r for r in records if r.severity == Severity.CRITICAL and r.node_id]
    if not critical:
        return
    nodes = Node.objects.in_bulk({r.node_id for r in critical})
    cordons.cordon_many(
        [
            (nodes[r.node_id], CordonReason.DRIFT, f"{r.kind}: {r.message}", f"drift:{r.pk}")
            for r in critical
            if r.node_id in nodes and nodes[r.node_id].state != NodeState.RETIRED
        ]
    )


# -- resolving drift --------------------------------------------------------------------------


def drift_resolve(
    *,
    actor: audit.Actor,
    action: str,
    node_id: int | None = None,
    system_id: str = "",
    site_id: int | None = None,
    kind: str | None = None,
    drift_id: int | None = None,
    reason: str = "",
    expires_at: datetime | None = None,
) -> list[DriftRecord]:
    """Resolve the active drift of one node (or one machine we have no node for): all of it, or
    the record of one ``kind``, or one record by ``drift_id``. Every record resolved gets an
    audit row in this transaction; ``adopt`` also changes our record (never MAAS)."""
    _check_resolution(action, expires_at)
    scope, site_pk = _drift_scope(node_id, system_id, site_id)
    with site_lock(site_pk):
        records = _active_records(scope, site_pk, kind=kind, drift_id=drift_id)
        if action == "adopt":
            _refuse_unadoptable(records)
        now = timezone.now()
        name = audit.actor_name(actor)
        for rec in records:
            before = _drift_snapshot(rec)
            adopted = _adopt(rec) if action == "adopt" else None
            rec.resolution = action
            rec.resolved_by = name
            rec.resolved_at = now
            rec.resolution_reason = reason[:500]
            if action == "acknowledge":
                rec.acknowledge()
                rec.acknowledged_until = expires_at
            elif action == "adopt":
                rec.resolve()
            else:
                rec.hold()
            rec.save()
            after = _drift_snapshot(rec)
            if adopted:
                after["adopted"] = adopted
            audit.record(
                actor=actor,
                action=f"drift.{action.replace('-', '_')}",
                target=rec,
                before=before,
                after=after,
                reason=reason,
            )
    return records


def _check_resolution(action: str, expires_at: datetime | None) -> None:
    """A known action; an expiry only on an acknowledgement, and in the future."""
    if action not in ACTIONS:
        raise InvalidInput(
            "Invalid input.", fields={"action": [f"Must be one of: {', '.join(ACTIONS)}."]}
        )
    if expires_at is not None and action != "acknowledge":
        raise InvalidInput(
            "Invalid input.", fields={"expires_at": ["Only an acknowledgement can expire."]}
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput("Invalid input.", fields={"expires_at": ["Must be in the future."]})


def _drift_scope(node_id: int | None, system_id: str, site_id: int | None) -> tuple[Q, int]:
    """The records of one node, or of one machine we have no node for (on the one site that
    knows it, or the site named), and that site."""
    if node_id is not None:
        node = Node.objects.filter(pk=node_id).first()
        if node is None:
            raise NotFound(f"node {node_id} not found")
        return Q(node_id=node_id), node.site_id
    sites = list(
        DriftRecord.objects.filter(system_id=system_id, node__isnull=True)
        .filter(**({"site_id": site_id} if site_id is not None else {}))
        .values_list("site_id", flat=True)
        .distinct()
    )
    if not sites:
        raise NotFound(f"no drift recorded for machine {system_id}")
    if len(sites) > 1:
        raise InvalidInput(
            "Invalid input.",
            fields={"site_id": ["The machine id is known on several sites: name the site."]},
        )
    return Q(system_id=system_id, node__isnull=True), sites[0]


def _active_records(
    scope: Q, site_pk: int, *, kind: str | None, drift_id: int | None
) -> list[DriftRecord]:
    """The scope's active records on site ``site_pk`` (of one kind, or one record), locked; a
    Conflict listing the active drift when none matches."""
    qs = DriftRecord.objects.select_for_update().filter(
        scope, site_id=site_pk, state__in=ACTIVE_DRIFT
    )
    if kind:
        qs = qs.filter(kind=kind)
    if drift_id is not None:
        qs = qs.filter(pk=drift_id)
    records = list(qs.order_by("id"))
    if not records:
        raise Conflict(
            "No active drift matches.",
            active_drift=list(
                DriftRecord.objects.filter(scope, state__in=ACTIVE_DRIFT).values("id", "kind")
            ),
        )
    return records


def _refuse_unadoptable(records: list[DriftRecord]) -> None:
    refused = sorted({r.kind for r in records if r.kind not in ADOPTABLE})
    if refused:
        raise Conflict(
            "MAAS's value cannot be adopted for this drift: "
            + ", ".join(refused)
            + " (acknowledge it, mark it for manual intervention, or fix it at the source)",
            adoptable_kinds=sorted(ADOPTABLE),
        )


def _drift_snapshot(rec: DriftRecord) -> dict[str, Any]:
    return {
        "kind": rec.kind,
        "subject": rec.subject,
        "state": rec.state,
        "severity": rec.severity,
        "acknowledged_until": rec.acknowledged_until,
        "resolution": rec.resolution,
    }


def _adopt(rec: DriftRecord) -> dict[str, Any]:
    """Take MAAS's value, as the last run observed it, into our record."""
    observed = rec.detail.get("observed")
    if rec.node_id is None:
        raise Conflict("This drift has no node to adopt into.")
    node = Node.objects.select_for_update().get(pk=rec.node_id)
    if rec.kind == DriftKind.HOSTNAME_MISMATCH:
        if not isinstance(observed, str) or hostname_error(observed):
            raise Conflict(f"MAAS's hostname {observed!r} is not a valid hostname for a node.")
        clash = (
            Node.objects.filter(site_id=node.site_id, hostname=observed)
            .exclude(state=NodeState.RETIRED)
            .exclude(pk=node.pk)
            .exists()
        )
        if clash:
            raise Conflict(f"Another live node on the site is called {observed!r}.")
        change: dict[str, Any] = {"field": "node.hostname", "from": node.hostname, "to": observed}
        node.hostname = observed
        node.save(update_fields=["hostname", "updated_at"])
        return change
    if rec.kind == DriftKind.POWER_ADDRESS_MISMATCH:
        if not isinstance(observed, str) or ipv4_error(observed):
            raise Conflict(f"MAAS's power address {observed!r} is not an IPv4 address.")
        change = {"field": "node.ipmi_ip", "from": node.ipmi_ip, "to": observed}
        node.ipmi_ip = observed
        node.save(update_fields=["ipmi_ip", "updated_at"])
        return change
    state = NodeMaasState.objects.select_for_update().filter(node_id=node.pk).first()
    if state is None:
        raise Conflict("No MAAS state has been recorded for this node yet.")
    if rec.kind == DriftKind.STATUS_MISMATCH:
        value = rec.detail.get("observed_status")
        change = {"field": ADOPTABLE[rec.kind], "from": state.accepted_status, "to": value}
        state.accepted_status = value
        state.save(update_fields=["accepted_status"])
        return change
    change = {"field": ADOPTABLE[rec.kind], "from": state.accepted_power_state, "to": observed}
    state.accepted_power_state = str(observed or "")
    state.save(update_fields=["accepted_power_state"])
    return change


# -- Celery tasks (arguments are ids only) ---------------------------------------------------------


@shared_task(name="reconciliation.dispatch")
def dispatch() -> dict[str, int]:
    """Beat entry (schedule in the ``reconciliation-dispatch`` periodic task, editable in the
    admin): queue one run per active site."""
    return reconcile_dispatch()


RECONCILE_SITE = "reconciliation.reconcile_site"


@shared_task(name=RECONCILE_SITE)
def reconcile_site(run_id: int) -> str:
    run = reconcile_execute(run_id)
    return run.state if run is not None else "not claimed"

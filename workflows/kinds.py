"""A workflow kind and its stages: the one declaration of everything the engine, the verbs,
reconciliation, the policy catalogue, the event catalogue and the admin pages know about a kind;
and ``StageContext``, what a stage gets when it runs (the two refer to each other, so they live
together).

A kind registers itself from its app's ``ready()`` (``register``); code in this package reads the
registry (``KINDS``) and never imports the apps. docs/architecture.md ("Workflows") walks through
how a kind plugs in.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any, Generic, TypeVar, cast

from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import Q, QuerySet
from django.db.models.sql.subqueries import UpdateQuery
from django.utils import timezone

from maas_client.client import MaasClient
from maas_client.status import NodeStatus
from maas_client.types import Machine
from maas_domain import compiled, policy, work
from maas_domain.policy import Policy
from maas_domain.site_client import client_for_site
from workflows import hints, rowsql
from workflows.models import Workflow, WorkflowEvent
from workflows.results import LeaseLost, LookedThroughHint, Result, RowChanged

M = TypeVar("M", bound=Workflow)


@dataclass(frozen=True)
class Call:
    """A MAAS call a stage may make: a ``MaasClient`` method by name (checked when declared)
    and when the stage makes it ("unless Ready"), for plans and docs. The stage tests run every
    stage through a recording client and fail on a call its declaration lacks
    (tests/support/stages.py)."""

    method: str
    when: str = ""
    # sent by a child workflow this stage runs (a reimage's redeploy onboarding), not by the
    # stage itself: shown in its plan, checked against the child's stages
    by_child: bool = False

    def __post_init__(self) -> None:
        if not callable(getattr(MaasClient, self.method, None)) or self.method.startswith("_"):
            raise ValueError(f"{self.method!r} is not a MaasClient method")

    def __str__(self) -> str:
        return f"{self.method} ({self.when})" if self.when else self.method


@dataclass(frozen=True)
class Stage(Generic[M]):
    """One stage of a kind, with every fact about it in one place.

    ``timeout``: seconds the stage may take before it fails with ``timeout`` (a site or profile
    policy may override it: ``stage_timeouts``); None for operator-driven stages (reset,
    cancel). ``maas_calls``: the MAAS client methods the stage may call (``Call``: dry-run
    plans, the admin, docs; the stage tests hold every stage to them).
    ``expects``: the MAAS statuses the machine may legitimately show while a workflow is in
    this stage (reconciliation reports anything else as drift); None: no expectation.
    ``machine_may_vanish``: the stage may delete the machine from MAAS, so its absence is not
    drift. ``applies``: whether the stage is part of a given workflow (a decommission mode).
    """

    name: str
    run: Callable[[StageContext[M]], Result]
    timeout: int | None
    maas_calls: tuple[Call, ...] = ()
    expects: frozenset[NodeStatus] | None = None
    machine_may_vanish: bool = False
    applies: Callable[[M], bool] | None = None

    retry: RetryPolicy | None = None

    def applies_to(self, wf: M) -> bool:
        return self.applies is None or self.applies(wf)

    def __call__(self, ctx: StageContext[M]) -> Result:
        """A stage is still its function: a stage (or a test) may call another one."""
        return self.run(ctx)


@dataclass(frozen=True)
class RetryPolicy:
    """How a stage retries a transient failure (MAAS or the secrets backend unavailable), where
    it differs from the engine's: at most ``max_retries`` retries before it fails (None: the
    deployment's ``MAASCP_WORKFLOW_MAX_STAGE_TRIES``), waiting a jittered backoff that doubles
    from 2 s up to ``max_backoff`` seconds between them (a ``Retry-After`` from MAAS wins)."""

    max_retries: int | None = None
    max_backoff: float = 60.0


class stage:
    """Declare a stage where its function is: ``@stage(timeout=…, calls=(…))`` above the
    function makes it a ``Stage`` named after it (or ``name``); the kind's package lists its
    stages in order (docs/architecture.md, "Adding a workflow kind")."""

    def __init__(
        self,
        name: str = "",
        *,
        timeout: int | None,
        calls: Iterable[Call] = (),
        expects: Iterable[NodeStatus] | None = None,
        machine_may_vanish: bool = False,
        applies: Callable[[Any], bool] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.name, self.timeout, self.calls = name, timeout, tuple(calls)
        self.expects = None if expects is None else frozenset(expects)
        self.machine_may_vanish, self.applies, self.retry = machine_may_vanish, applies, retry

    def __call__(self, run: Callable[[StageContext[M]], Result]) -> Stage[M]:
        return Stage(
            self.name or run.__name__,
            run,
            self.timeout,
            self.calls,
            self.expects,
            self.machine_may_vanish,
            self.applies,
            self.retry,
        )


def _nothing(wf: object) -> None:
    return None


@dataclass
class WorkflowKind(Generic[M]):
    """How one kind of workflow plugs into the engine.

    Hooks run inside the transaction that records the outcome: ``on_success``, ``on_failure``,
    ``on_cancelled``, ``on_hold`` (a stage ended the workflow in manual_intervention);
    ``on_reopen`` runs in the verb's transaction when a recovery verb puts the workflow back to
    pending (the row's attempt is already the new one), to drop facts of an earlier run. ``reset``
    runs before the first stage on restart-clean; ``cancel`` runs instead of the current stage
    while cancelling; ``adopt`` reads MAAS and names the stage that matches what it shows (the
    adopt verb). A workflow run on behalf of another links to it (workflows/family.py).
    ``admission_filter`` returns a Q matching the pending rows that
    must keep waiting although a slot is free (an onboarding batch paused or waiting for its
    canary); admission excludes them.
    """

    name: str
    model: type[M]
    event_model: type[WorkflowEvent]
    stages: list[Stage[M]]
    policy: Callable[[M], Policy]
    on_success: Callable[[M], None] = _nothing
    on_failure: Callable[[M], None] = _nothing
    on_cancelled: Callable[[M], None] = _nothing
    on_hold: Callable[[M], None] = _nothing
    on_reopen: Callable[[M], None] = _nothing
    reset: Stage[M] | None = None
    cancel: Stage[M] | None = None
    adopt: Callable[[M], tuple[str, dict[str, Any]]] | None = None
    admission_filter: Callable[[], Q] | None = None
    select_related: tuple[str, ...] = ()
    # A kind an operator starts on a node from the node's page and list (its admin start page
    # takes ``?node=<id>``): the link's label and the node states it is offered in.
    node_start: tuple[str, tuple[str, ...]] | None = None
    stage_index: dict[str, int] = field(default_factory=dict, init=False)
    event_parent: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.stage_index = {s.name: i for i, s in enumerate(self.stages)}
        self.event_parent = next(
            f.name
            for f in self.event_model._meta.get_fields()
            if f.is_relation and f.many_to_one and f.related_model is self.model
        )

    # -- stages ---------------------------------------------------------------------------------

    @property
    def all_stages(self) -> list[Stage[M]]:
        """The kind's stages, then its operator-driven ones (reset, cancel)."""
        return self.stages + [s for s in (self.reset, self.cancel) if s is not None]

    def stage(self, name: str) -> Stage[M]:
        if self.reset is not None and name == self.reset.name:
            return self.reset
        return self.stages[self.stage_index[name]]

    def find(self, name: str) -> Stage[M] | None:
        return next((s for s in self.all_stages if s.name == name), None)

    def stages_for(self, wf: M) -> list[Stage[M]]:
        """The stages this workflow runs, in order (a stage may not apply to it)."""
        return [s for s in self.stages if s.applies_to(wf)]

    def first_stage(self, wf: M) -> str:
        return self.stages_for(wf)[0].name

    def next_stage(self, name: str, wf: M) -> str | None:
        if self.reset is not None and name == self.reset.name:
            return self.first_stage(wf)
        for stage in self.stages[self.stage_index[name] + 1 :]:
            if stage.applies_to(wf):
                return stage.name
        return None

    def plan(self, wf: M, policy: Policy | None = None) -> list[dict[str, Any]]:
        """The stages ``wf`` would run, each with its timeout (under ``policy``, else the
        kind's policy for the row) and the MAAS calls it may make: what a dry run shows."""
        effective = policy if policy is not None else self.policy(wf)
        return [
            {
                "name": stage.name,
                "timeout": self.timeout(stage.name, effective),
                "maas_calls": [str(call) for call in stage.maas_calls],
            }
            for stage in self.stages_for(wf)
        ]

    def timeout(self, stage: str, policy: Policy) -> int | None:
        """The stage's timeout under ``policy``: ``<kind>.<stage>`` in ``stage_timeouts``, else
        ``<stage>``, else the stage's own default."""
        explicit = policy.stage_timeouts
        for key in (f"{self.name}.{stage}", stage):
            if key in explicit:
                return explicit[key]
        found = self.find(stage)
        return found.timeout if found is not None else None

    # -- rows and the timeline --------------------------------------------------------------------

    def load(self, pk: int) -> M:
        """The row with the kind's ``select_related`` (compiled once: maas_domain/compiled.py)."""
        return compiled.get(self.model, pk, self.select_related)

    def event(
        self, wf: M, kind: str, message: str, *, stage: str = "", actor: str = "", **data: Any
    ) -> WorkflowEvent:
        """An unsaved timeline row (attempt and stage from the workflow unless given)."""
        return self.event_model(
            **{self.event_parent: wf},
            kind=kind,
            stage=stage or wf.stage,
            attempt=wf.attempt,
            message=message[:1000],
            data=data,
            actor_name=actor,
        )

    def add_event(
        self, wf: M, kind: str, message: str, *, stage: str = "", actor: str = "", **data: Any
    ) -> None:
        """Append one timeline row: the only way a timeline grows (``add_events`` for many)."""
        self.event(wf, kind, message, stage=stage, actor=actor, **data).save()

    def add_events(self, events: Iterable[WorkflowEvent]) -> None:
        """Append several timeline rows (built with ``event``) in one statement."""
        self.event_model._default_manager.bulk_create(list(events), batch_size=1000)

    def log_fields(self, wf: M) -> dict[str, Any]:
        """What every log line of this workflow's steps carries (docs/observability.md)."""
        return {
            "site_id": wf.site_id,
            f"{self.name}_id": wf.pk,
            "node_id": getattr(wf, "node_id", None),
            "maas_system_id": wf.maas_system_id or None,
            "hostname": wf.hostname,
        }


KINDS: dict[str, WorkflowKind[Any]] = {}


def register(kind: WorkflowKind[Any]) -> None:
    """Called from the kind's app ``ready()``: the engine, the verbs, reconciliation, the
    policy catalogue, the event catalogue, the admin pages and the core's records
    (``maas_domain/work.py``) know the kind from here on."""
    KINDS[kind.name] = kind
    work.register(kind)


# -- what the registry answers ----------------------------------------------------------------


def stage_timeout_keys() -> dict[str, int | None]:
    """Every key ``stage_timeouts`` accepts (``<stage>`` and ``<kind>.<stage>``) with the
    default it overrides (None where same-named stages of different kinds differ)."""
    keys: dict[str, int | None] = {}
    for kind in KINDS.values():
        for stage in kind.all_stages:
            if stage.timeout is None:
                continue
            keys[f"{kind.name}.{stage.name}"] = stage.timeout
            if stage.name in keys and keys[stage.name] != stage.timeout:
                keys[stage.name] = None
            else:
                keys.setdefault(stage.name, stage.timeout)
    return keys


def effective_stage_timeouts(policy: Policy) -> dict[str, int]:
    """The timeout of every timed stage of every kind under ``policy``, keyed by stage name
    where every kind with that stage agrees, else by ``<kind>.<stage>`` (what the API shows)."""
    by_stage: dict[str, dict[str, int]] = {}
    for kind in KINDS.values():
        for stage in kind.all_stages:
            seconds = kind.timeout(stage.name, policy)
            if seconds is not None:
                by_stage.setdefault(stage.name, {})[kind.name] = seconds
    table: dict[str, int] = {}
    for stage_name, per_kind in by_stage.items():
        if len(set(per_kind.values())) == 1:
            table[stage_name] = next(iter(per_kind.values()))
        else:
            table.update({f"{k}.{stage_name}": v for k, v in per_kind.items()})
    return table


policy.use_stage_catalogue(stage_timeout_keys, effective_stage_timeouts)


# -- what a stage gets when it runs -----------------------------------------------------------
# What a stage gets: its workflow row, the policy, a lease-guarded MAAS client, timeline
# entries to record with its result and a scratch dict persisted with the lease.
#
# A stage never changes the workflow's state itself; it returns a result (``results.py``) and the
# engine records it (``step.record``). docs/architecture.md ("How a request becomes MAAS calls").


def lease_seconds() -> float:
    return float(settings.WORKFLOW_LEASE_SECONDS)


# How long a machine this execution read from MAAS stands in for the next look at it, when no
# MAAS mutation was sent since (``StageContext.machine``): chained stages run milliseconds apart.
LOOKED_SECONDS = 5.0

# Timeline entry kinds that describe a MAAS mutation sent (kept across a rerun).
SENT_ENTRIES = frozenset({"maas.action", "fallback.step"})


class StageContext(Generic[M]):
    """One execution's view of one workflow. The row it holds is the truth as of its last
    write: ``write`` stores fields with a compare-and-swap on the lease, the state and
    ``updated_at``, so nothing written meanwhile by someone else is overwritten (an operator's
    verb: ``LeaseLost``; an enrollment: ``RowChanged``, and the engine runs the stage again on
    the fresh row)."""

    def __init__(
        self, kind: WorkflowKind[M], wf: M, owner: str, hint: dict[str, Any] | None = None
    ) -> None:
        self.kind = kind
        self.wf = wf
        self.owner = owner
        self.dispatch = wf.dispatch  # the hand-off this execution claimed
        self.stored = (wf.state, wf.updated_at)  # what the row holds, for the compare-and-swap
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        # a copy all the way down: a run that ends in a rerun leaves the row's own data as it was
        self.data: dict[str, Any] = copy.deepcopy(wf.stage_data or {})
        # the site poll's view of the machine that woke this step (workflows/hints.py): the
        # first machine read may take it, once; ``hinted``: this stage run looked through it
        self.hint = hint
        self.hinted = False
        # machines this execution read from MAAS itself since its last MAAS mutation
        # (``saw``): the next look at one of them, in this stage or a chained one, takes it
        self.looked: dict[str, tuple[Machine, float]] = {}
        # what a stage computed that a later stage of this execution may take instead of
        # computing it again (a pure function's answer); never stored, gone with the execution
        self.memo: dict[str, Any] = {}

    def next_stage(self, *, rerun: bool = False) -> None:
        """The engine moves on to the row's (next or re-read) stage within one execution: the
        MAAS client and the policy stay, the timeline entries and the scratch dict start over.
        On a rerun the entries of MAAS mutations already sent stay: the intent log keeps the
        rerun from sending them again, so it would not describe them again either."""
        self.events = [e for e in self.events if e[0] in SENT_ENTRIES] if rerun else []
        self.data = copy.deepcopy(self.wf.stage_data or {})
        self.hint, self.hinted = None, False  # the hint was the woken stage's, once
        if rerun:
            self.looked.clear()

    def machine(self, system_id: str) -> Machine:
        """The stage's look at a machine: ``GET machines/{id}/``, unless

        - this execution read it from MAAS itself (``saw``) less than ``LOOKED_SECONDS`` ago
          and sent no MAAS mutation since: that answer, once (a chained stage after the one
          that read it); or
        - it is the first read of a step the site poll woke: the machine as that poll's
          listing returned it (``workflows/hints.py``: same dispatch, stage and machine,
          fresh enough). A stage that looked through the hint cannot send a MAAS mutation
          (``heartbeat``): it runs again and reads.
        """
        hint, self.hint = self.hint, None
        looked = self.looked.pop(system_id, None)
        if looked is not None and time.monotonic() - looked[1] <= LOOKED_SECONDS:
            return looked[0]
        if hint is not None and self.wf.state == work.WorkflowState.RUNNING:
            seen = hints.usable(
                hint, dispatch=self.dispatch, stage=self.wf.stage, system_id=system_id
            )
            if seen is not None:
                self.hinted = True
                return seen
        machine = self.maas.get_machine(system_id)
        self.saw(machine)
        return machine

    def saw(self, machine: Machine) -> None:
        """``machine`` as MAAS itself answered this execution just now (a read, a listing):
        the next ``machine`` look at it may take it until a MAAS mutation is sent."""
        self.looked[machine.system_id] = (machine, time.monotonic())

    @cached_property
    def policy(self) -> Policy:
        return self.kind.policy(self.wf)

    @cached_property
    def maas(self) -> MaasClient:
        return client_for_site(self.wf.site, before_mutation=self.heartbeat)

    def event(self, kind: str, message: str, **data: Any) -> None:
        """A timeline entry, written with the stage's result."""
        self.events.append((kind, message, data))

    def observe(self, machine: Machine) -> None:
        """A ``maas.observed`` timeline entry each time the stage sees a new MAAS status."""
        if self.data.get("_seen") != machine.status_name:
            self.data["_seen"] = machine.status_name
            self.event(
                "maas.observed",
                f"MAAS: {machine.status_name}"
                + (f" ({machine.status_message})" if machine.status_message else ""),
                system_id=machine.system_id,
                status=int(machine.status),
                status_message=machine.status_message,
            )

    # -- writing the row -------------------------------------------------------------------------

    def _mine_where(self) -> dict[str, Any]:
        """The row as this execution last wrote it: ours, in the state and version it stored."""
        state, updated_at = self.stored
        wf = self.wf
        return {"pk": wf.pk, "lease_owner": self.owner, "state": state, "updated_at": updated_at}

    def _mine(self) -> QuerySet[M]:
        return self.kind.model._default_manager.filter(**self._mine_where())

    def write(
        self,
        fields: Iterable[str] = (),
        events: Iterable[WorkflowEvent] = (),
        *,
        savepoint: bool = True,
    ) -> None:
        """Store ``fields`` of the in-memory row, then the timeline entries, in one
        transaction (``savepoint=False``: the caller's, which it rolls back when this
        raises)."""
        wf = self.wf
        wf.updated_at = timezone.now()
        names = {*fields, "updated_at"}
        with transaction.atomic(savepoint=savepoint):
            values = {name: getattr(wf, name) for name in names}
            if not write_with_timeline(self.kind, self._mine_where(), values, list(events)):
                raise self._lost_or_changed()
        self.stored = (wf.state, wf.updated_at)

    def _lost_or_changed(self) -> Exception:
        """The compare-and-swap failed: re-read the row and say why."""
        wf = self.wf
        wf.refresh_from_db()
        if (wf.lease_owner, wf.state, wf.dispatch) != (self.owner, self.stored[0], self.dispatch):
            return LeaseLost(f"{self.kind.name} {wf.pk} lease lost")
        self.stored = (wf.state, wf.updated_at)
        return RowChanged(f"{self.kind.name} {wf.pk} changed while {wf.stage} ran")

    def heartbeat(self, operation: str = "") -> None:
        """Renew the lease and persist the intent log before a MAAS mutation; if another
        execution took the workflow over, or the row changed, stop before touching MAAS.
        A stage that looked at MAAS through the site poll's hint stops here too, before the
        intent log: look before you act means a read of our own (the engine runs the stage
        again, and this time it reads MAAS)."""
        if operation:
            self.looked.clear()  # MAAS may change now: the next look reads it
        if operation and self.hinted:
            self.hinted = False
            raise LookedThroughHint(
                f"{self.kind.name} {self.wf.pk}: {self.wf.stage} would send {operation} on the "
                "site poll's view of the machine; reading MAAS first"
            )
        if operation:
            sent = self.data.setdefault("sent", {})
            sent[operation] = sent.get(operation, 0) + 1
        self.wf.lease_expires_at = timezone.now() + timedelta(seconds=lease_seconds())
        self.wf.stage_data = self.data
        self.write({"lease_expires_at", "stage_data"})

    def save_now(self, **fields: Any) -> None:
        """Store workflow fields at once (not with the stage result), if we still own it."""
        for key, value in fields.items():
            setattr(self.wf, key, value)
        self.write(fields)

    @contextmanager
    def locked(self) -> Iterator[M]:
        """A transaction holding this workflow's row, if we still own the lease: for a stage
        that must change our own rows (a node's state, a child workflow) exactly once."""
        with transaction.atomic():
            row = self._mine().select_for_update().first()
            if row is None:
                raise self._lost_or_changed()
            yield row
        # the stage may have saved the row: our own write, not a change under the stage
        self.wf.updated_at = row.updated_at
        self.stored = (self.stored[0], row.updated_at)

    def sent(self, operation: str) -> bool:
        """Did an execution of this stage already send ``operation`` (maybe applied)?"""
        return bool(self.data.get("sent", {}).get(operation))

    def close(self) -> None:
        if "maas" in self.__dict__:
            self.maas.close()


def write_with_timeline(
    kind: WorkflowKind[M],
    where: dict[str, Any],
    values: dict[str, Any],
    events: list[WorkflowEvent],
) -> bool:
    """``update_with_timeline`` of the row ``where`` selects, in hand-written SQL (rowsql:
    no ORM compilation per call) unless a value needs the ORM."""
    alias = router.db_for_write(kind.model)
    try:
        update_sql, update_params = rowsql.update(kind.model, values, where, alias=alias)
    except rowsql.NeedsOrm:
        rows = kind.model._default_manager.filter(**where)
        return update_with_timeline(rows, values, events, kind)
    db = connections[alias]
    if db.vendor != "postgresql" or not events:
        if rowsql.execute(update_sql, update_params, alias) != 1:
            return False
        kind.add_events(events)
        return True
    sql, params = _with_timeline(db, update_sql, update_params, events, kind)
    return bool(rowsql.execute(sql, params, alias))


def update_with_timeline(
    rows: QuerySet[M], values: dict[str, Any], events: list[WorkflowEvent], kind: WorkflowKind[M]
) -> bool:
    """Update the one row ``rows`` selects and, only if it did, append ``events`` to its
    timeline. On PostgreSQL one statement (a data-modifying CTE: the insert reads the ids
    the update returned); elsewhere two. Returns whether the row was updated."""
    db = connections[rows.db]
    if db.vendor != "postgresql" or not events:
        if rows.update(**values) != 1:
            return False
        kind.add_events(events)
        return True
    query = cast(UpdateQuery, rows.query.chain(UpdateQuery))
    query.add_update_values(values)
    update_sql, update_params = query.get_compiler(connection=db).as_sql()
    sql, params = _with_timeline(db, update_sql, list(update_params), events, kind)
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return bool(cursor.rowcount)


def _with_timeline(
    db: Any, update_sql: str, update_params: list[Any], events: list[WorkflowEvent], kind: Any
) -> tuple[str, list[Any]]:
    """The update and the insert of its timeline rows as one statement (a data-modifying
    CTE: the insert reads the id the update returned, so no row changed means none added)."""
    model = kind.event_model
    parent = next(f for f in model._meta.concrete_fields if f.name == kind.event_parent)
    columns = [f for f in model._meta.concrete_fields if not f.primary_key and f is not parent]
    row = "(" + ", ".join(f"%s::{f.db_type(db)}" for f in columns) + ")"
    params: list[Any] = list(update_params)
    for event in events:
        params += [f.get_db_prep_save(f.pre_save(event, add=True), connection=db) for f in columns]
    quote = db.ops.quote_name
    names = ", ".join(quote(str(f.column)) for f in columns)
    pk = quote(str(kind.model._meta.pk.column))
    # identifiers come from the models, every value is a parameter
    sql = (
        f"WITH changed AS ({update_sql} RETURNING {pk}) "  # noqa: S608
        f"INSERT INTO {quote(model._meta.db_table)} ({quote(str(parent.column))}, {names}) "
        f"SELECT changed.{pk}, v.* FROM changed, (VALUES {', '.join([row] * len(events))}) "
        f"AS v({names})"
    )
    return sql, params

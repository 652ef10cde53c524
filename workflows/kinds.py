"""A workflow kind and its stages: the one declaration of everything the engine, the verbs,
reconciliation, the policy catalogue, the event catalogue and the admin pages know about a kind.

A kind registers itself from its app's ``ready()`` (``register``); code in this package reads the
registry (``KINDS``) and never imports the apps. docs/architecture.md ("Workflows") walks through
how a kind plugs in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.db.models import Q

from maas_client.client import MaasClient
from maas_client.status import NodeStatus
from maas_domain import policy, work
from maas_domain.policy import Policy
from workflows.models import Workflow, WorkflowEvent
from workflows.results import Result

if TYPE_CHECKING:
    from workflows.context import StageContext

M = TypeVar("M", bound=Workflow)


@dataclass(frozen=True)
class Call:
    """A MAAS call a stage may make: a ``MaasClient`` method by name (checked when declared)
    and when the stage makes it ("unless Ready"), for plans and docs. The stage tests run every
    stage through a recording client and fail on a call its declaration lacks
    (tests/support/stages.py)."""

    method: str
    when: str = ""

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

    def applies_to(self, wf: M) -> bool:
        return self.applies is None or self.applies(wf)


def _nothing(wf: Any) -> None:
    return None


def _no_family(wf: Any) -> set[tuple[str, int]]:
    return set()


@dataclass
class WorkflowKind(Generic[M]):
    """How one kind of workflow plugs into the engine.

    Hooks run inside the transaction that records the outcome: ``on_success``, ``on_failure``,
    ``on_cancelled``, ``on_hold`` (a stage ended the workflow in manual_intervention);
    ``on_reopen`` runs in the verb's transaction when a recovery verb puts the workflow back to
    pending (the row's attempt is already the new one), to drop facts of an earlier run. ``reset``
    runs before the first stage on restart-clean; ``cancel`` runs instead of the current stage
    while cancelling; ``adopt`` reads MAAS and names the stage that matches what it shows (the
    adopt verb); ``family`` names workflows that belong to this one (parent, children): not a
    conflict on the same node. ``admission_filter`` returns a Q matching the pending rows that
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
    family: Callable[[M], set[tuple[str, int]]] = _no_family
    admission_filter: Callable[[], Q] | None = None
    select_related: tuple[str, ...] = ()
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
        return self.model._default_manager.select_related(*self.select_related).get(pk=pk)

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

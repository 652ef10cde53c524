"""The recovery verbs (docs/api.md, "Recovery verbs"): seven distinct operations, built once here
and used by every workflow kind. Each checks the source state under a row lock, changes the row,
writes a timeline event and an audit row in the same transaction, and hands work to the engine
after commit. A verb never talks to MAAS inside the lock; ``adopt`` reads MAAS before it.

| verb | from | effect |
|---|---|---|
| retry | failed | the failed stage again, attempt + 1 |
| resume | failed, manual_intervention, running (dead worker) | continue at the current stage |
| rerun | failed, succeeded, cancelled, manual_int. | from the top, attempt + 1; stages adopt |
| restart-clean | failed, cancelled, manual_int. (confirm) | undo MAAS work, attempt + 1, from top |
| cancel | pending, running, waiting | abort/compensate, end cancelled |
| adopt | failed, manual_intervention, waiting | read MAAS, continue at the matching stage |
| mark-manual-intervention | any open state | freeze until resume, adopt, rerun or restart-clean |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from maas_domain import audit, events
from maas_domain.access import Action, allowed
from maas_domain.errors import Conflict, Forbidden, InvalidInput
from maas_domain.models import Allocation, AllocationState, Node
from maas_domain.work import WorkflowState, open_on_node
from workflows import family
from workflows.dispatch import admit_after_commit, enqueue
from workflows.kinds import M, WorkflowKind
from workflows.models import Move, Workflow

W = WorkflowState
# What a verb does to the locked row (after its checks, before the save): the workflow kind,
# the row, the plan and the operator's reason in; a hook to run on the saved row out (or None).
Effect = Callable[[WorkflowKind[Any], Any, "Plan", str], Callable[[Any], None] | None]


def _release_execution(wf: Workflow) -> None:
    """A live execution's next heartbeat or recording finds it no longer owns the workflow."""
    wf.lease_owner, wf.lease_expires_at = "", None
    wf.dispatch = F("dispatch") + 1


def _reopen(wf: Workflow, *, stage: str, attempt: int, checkpoint: str | None) -> None:
    """Back to pending at ``stage``; admission starts it within the site's concurrency limit."""
    wf.reopen()
    wf.stage = stage
    wf.attempt = attempt
    if checkpoint is not None:
        wf.checkpoint = checkpoint
    wf.failure_class = wf.reason = ""
    wf.finished_at = None
    wf.lost_leases = wf.stage_tries = 0
    wf.stage_started_at = wf.next_check_at = None
    wf.wait_system_id, wf.wait_status = "", None
    wf.stage_data = {}
    _release_execution(wf)


def _reopen_at_plan(kind: WorkflowKind[Any], wf: Any, recipe: Plan, reason: str) -> None:
    """Back to pending at the plan's stage and attempt (a fresh checkpoint when that is the
    first or the reset stage); the kind's reopen hook runs."""
    checkpoint = (
        "" if recipe.from_stage in (kind.first_stage(wf), getattr(kind.reset, "name", "")) else None
    )
    if not wf.is_open:
        _refuse_if_node_busy(kind, wf)
    _reopen(wf, stage=recipe.from_stage, attempt=recipe.attempt, checkpoint=checkpoint)
    kind.on_reopen(wf)


def _cancel(
    kind: WorkflowKind[Any], wf: Any, recipe: Plan, reason: str
) -> Callable[[Any], None] | None:
    """A pending workflow ends cancelled at once (the kind's cancelled hook runs); a running or
    waiting one starts cancelling, which the engine carries out."""
    if wf.state == W.PENDING:
        wf.end_cancelled()
        wf.finished_at = timezone.now()
        return kind.on_cancelled
    wf.begin_cancel()
    _release_execution(wf)
    return None


def _freeze(kind: WorkflowKind[Any], wf: Any, recipe: Plan, reason: str) -> None:
    """Manual intervention: nothing automatic touches the workflow until an operator acts."""
    wf.freeze()
    wf.next_check_at = None
    wf.reason = (reason or "marked for manual intervention")[:500]
    _release_execution(wf)


@dataclass(frozen=True)
class Verb:
    """Everything about one verb, declared once: the states it may start from, the
    transition(s) it performs (each source is one the transition allows: checked by
    tests/workflow/test_verbs.py), the stage it continues at (``restart_at``: the current one,
    the first, the kind's reset stage, or the one ``adopt`` reads from MAAS; None: the verb does
    not reopen), whether it starts a new attempt, the access class it needs, its help text, and
    whether it is destructive (the admin pages and maasctl ask first) or needs an explicit
    ``confirm`` in the API. Its effect is data too: the ``effect`` on the locked row, the
    sources it takes only from a dead worker (``only_from_dead_worker``), whether its plan lists
    the kind's cancel stage's MAAS calls (``compensates``), and the event it ``announces``. The
    URL patterns (``workflows.api.verb_pattern``), the access check,
    the admin's buttons and confirmations and the OpenAPI enum are read from here; maasctl keeps
    its own copy (``maasctl``'s contract forbids the import), compared by a test."""

    name: str
    sources: tuple[WorkflowState, ...]
    moves: tuple[Move, ...]
    access: Action
    help: str
    restart_at: str | None = "current"  # current | first | reset | adopted | None
    new_attempt: bool = False
    destructive: bool = False
    needs_confirmation: bool = False
    effect: Effect = _reopen_at_plan
    only_from_dead_worker: tuple[WorkflowState, ...] = ()
    compensates: bool = False
    announces: str = ""

    def may_start(self, wf: Workflow) -> bool:
        """Whether ``wf``'s state is one this verb starts from (a running workflow only when
        its worker vanished, for a verb that takes over a dead execution)."""
        return wf.state in self.sources and (
            wf.state not in self.only_from_dead_worker or _worker_vanished(wf)
        )


REOPEN = (Workflow.reopen,)
VERBS = {
    v.name: v
    for v in (
        Verb(
            "retry",
            (W.FAILED,),
            REOPEN,
            Action.OPERATE,
            "Run the failed stage again (attempt + 1).",
            new_attempt=True,
        ),
        Verb(
            "resume",
            (W.FAILED, W.MANUAL_INTERVENTION, W.RUNNING),
            REOPEN,
            Action.OPERATE,
            "Continue at the current stage (same attempt).",
            only_from_dead_worker=(W.RUNNING,),
        ),
        Verb(
            "rerun",
            (W.FAILED, W.SUCCEEDED, W.CANCELLED, W.MANUAL_INTERVENTION),
            REOPEN,
            Action.OPERATE,
            "Start again from the first stage; stages adopt what MAAS already has.",
            restart_at="first",
            new_attempt=True,
        ),
        Verb(
            "restart-clean",
            (W.FAILED, W.CANCELLED, W.MANUAL_INTERVENTION),
            REOPEN,
            Action.ADMIN,
            "Undo MAAS-side progress (release, delete a machine we created), then run from the "
            "top with a new attempt and new tokens.",
            restart_at="reset",
            new_attempt=True,
            destructive=True,
            needs_confirmation=True,
        ),
        Verb(
            "cancel",
            (W.PENDING, W.RUNNING, W.WAITING),
            (Workflow.end_cancelled, Workflow.begin_cancel),
            Action.ADMIN,
            "Stop: abort the in-flight MAAS action where MAAS allows it, end cancelled.",
            restart_at=None,
            destructive=True,
            effect=_cancel,
            compensates=True,
        ),
        Verb(
            "adopt",
            (W.FAILED, W.MANUAL_INTERVENTION, W.WAITING),
            REOPEN,
            Action.OPERATE,
            "Read MAAS now and continue at the stage that matches what it shows.",
            restart_at="adopted",
        ),
        Verb(
            "mark-manual-intervention",
            (W.PENDING, W.RUNNING, W.WAITING, W.CANCELLING),
            (Workflow.freeze,),
            Action.OPERATE,
            "Freeze: nothing automatic touches the node until an operator resumes, adopts, "
            "reruns or restart-cleans it.",
            restart_at=None,
            effect=_freeze,
            announces="manual_intervention_required",
        ),
    )
}


def access(verb: str) -> Action:
    """A verb's access class; anything that is not a verb (a kind's own operation) is
    ``admin``."""
    spec = VERBS.get(verb)
    return spec.access if spec is not None else Action.ADMIN


def _worker_vanished(wf: Workflow) -> bool:
    """Running, but its lease expired while held: the execution died (resume may take over)."""
    return bool(
        wf.state == W.RUNNING
        and wf.lease_owner
        and wf.lease_expires_at is not None
        and wf.lease_expires_at <= timezone.now()
    )


def allowed_verbs(wf: Workflow) -> list[str]:
    return [verb.name for verb in VERBS.values() if verb.may_start(wf)]


def _refuse(wf: Workflow, verb: str) -> Conflict:
    return Conflict(
        f"{verb} is not allowed while the workflow is {wf.state}.",
        current_state=wf.state,
        allowed_verbs=allowed_verbs(wf),
    )


@dataclass(frozen=True)
class Plan:
    """What a verb would do (the dry-run answer, and the recipe the verb applies)."""

    verb: str
    from_stage: str
    attempt: int
    maas_calls: list[str]
    preconditions: list[str]


def plan(kind: WorkflowKind[M], wf: M, verb: str, *, adopt_stage: str | None = None) -> Plan:
    spec = VERBS[verb]
    stages = kind.stages_for(wf)
    first = stages[0].name
    stage = {
        "first": first,
        "reset": kind.reset.name if kind.reset else first,
        "adopted": adopt_stage or wf.stage,
    }.get(spec.restart_at or "", wf.stage)
    attempt = wf.attempt + (1 if spec.new_attempt else 0)
    calls: list[str] = []
    if spec.compensates:
        calls += [str(c) for c in kind.cancel.maas_calls] if kind.cancel is not None else []
    elif spec.restart_at is not None:
        names = [s.name for s in stages]
        if kind.reset is not None and stage == kind.reset.name:
            calls += [str(c) for c in kind.reset.maas_calls]
            names_from = 0
        else:
            names_from = names.index(stage) if stage in names else 0
        for s in stages[names_from:]:
            calls += [f"{s.name}: {c}" for c in s.maas_calls]
    checks = [f"state is {wf.state}; {verb} is allowed from {', '.join(VERBS[verb].sources)}"]
    if VERBS[verb].moves == REOPEN:
        checks.append("no other open workflow holds the host (database constraint)")
    return Plan(verb, stage, attempt, calls, checks)


def _refuse_if_node_busy(kind: WorkflowKind[M], wf: M) -> None:
    """One open workflow per node across kinds: reopening waits for the other one to close.
    The node row lock serialises this check with every start on the same node."""
    if not wf.node_id:
        return
    Node.objects.select_for_update().filter(pk=wf.node_id).first()
    others = open_on_node(wf.node_id, exclude={(kind.name, wf.pk), *family.family(wf)})
    if others:
        raise Conflict(
            f"node {wf.hostname} has another open workflow; this one cannot be reopened.",
            current_state=wf.state,
            open_workflows=others,
        )


def _refuse_if_a_tenant_holds_the_node(
    wf: Workflow, verb: str, *, actor: audit.Actor, force: bool, reason: str
) -> None:
    """Reopening runs MAAS work on the node again (redeploy, erase): not while a tenant holds
    it, unless an admin says so with a reason (docs/api.md, "Recovery verbs")."""
    node_id = getattr(wf, "node_id", None)
    if not node_id:
        return
    held = list(
        Allocation.objects.filter(node_id=node_id, state=AllocationState.ACTIVE).values(
            "id", "holder"
        )
    )
    if not held:
        return
    if not force:
        raise Conflict(
            f"{verb} would run MAAS work on {wf.hostname}, which a tenant holds (allocation "
            f"{held[0]['id']}, {held[0]['holder']}); release it first, or an admin forces the "
            "verb with a reason.",
            current_state=wf.state,
            allocations=held,
        )
    if actor is not None and not allowed(actor, Action.ADMIN):
        raise Forbidden(f"Forcing {verb} on a node a tenant holds is an admin action.")
    if not reason.strip():
        raise InvalidInput(
            "A forced verb needs a reason.", fields={"reason": ["Say why the tenant's node."]}
        )


def apply(
    kind: WorkflowKind[M],
    pk: int,
    verb: str,
    *,
    actor: audit.Actor,
    reason: str = "",
    confirm: bool = False,
    force: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Run one verb on workflow ``pk`` (or describe it, with ``dry_run``). A verb that reopens
    the workflow is refused while a tenant holds its node, unless an admin forces it with a
    reason (``force``)."""
    spec = VERBS.get(verb)
    if spec is None:
        raise InvalidInput(
            f"Unknown verb {verb!r}.", fields={"verb": [f"One of: {', '.join(VERBS)}."]}
        )
    adopt_stage: str | None = None
    observed: dict[str, Any] = {}
    if spec.restart_at == "adopted" and kind.adopt is not None:
        current = kind.load(pk)
        if current.state in spec.sources:
            adopt_stage, observed = kind.adopt(current)  # reads MAAS; no lock held
    with transaction.atomic():
        wf = (
            kind.model._default_manager.select_for_update(of=("self",))
            .select_related(*kind.select_related)
            .get(pk=pk)
        )
        if not spec.may_start(wf):
            raise _refuse(wf, verb)
        if spec.needs_confirmation and not confirm and not dry_run:
            raise InvalidInput(
                f"{verb} needs explicit confirmation.", fields={"confirm": ["Must be true."]}
            )
        if spec.moves == REOPEN:
            _refuse_if_a_tenant_holds_the_node(wf, verb, actor=actor, force=force, reason=reason)
        recipe = plan(kind, wf, verb, adopt_stage=adopt_stage)
        if dry_run:
            return {"dry_run": True, "allowed": True, "current_state": wf.state, **recipe.__dict__}
        before = {"state": wf.state, "stage": wf.stage, "attempt": wf.attempt}
        hook = spec.effect(kind, wf, recipe, reason)
        try:
            with transaction.atomic():
                wf.save()
        except IntegrityError as exc:
            raise Conflict(
                "Another open workflow took this host meanwhile; this one cannot be reopened.",
                current_state=before["state"],
            ) from exc
        wf.refresh_from_db()
        if hook is not None:
            hook(wf)
            family.wake_parent(wf)
        _record(kind, wf, spec, actor=actor, reason=reason, before=before, observed=observed)
        if wf.state == W.CANCELLING:
            enqueue(kind.name, wf.pk, wf.dispatch, region=wf.site.region)
        elif wf.state == W.PENDING:
            admit_after_commit(wf.site_id)
    return {"dry_run": False, "verb": verb, "workflow": wf}


def _record(
    kind: WorkflowKind[M],
    wf: M,
    spec: Verb,
    *,
    actor: audit.Actor,
    reason: str,
    before: dict[str, Any],
    observed: dict[str, Any],
) -> None:
    """The verb's timeline event (and the one it announces, as an outbox event too) and its
    audit row, in the verb's transaction."""
    name = audit.actor_name(actor)
    message = f"{spec.name} by {name}" + (f": {reason}" if reason else "")
    timeline = [kind.event(wf, f"operator.{spec.name}", message, actor=name, **observed)]
    if spec.announces:
        events.emit(kind.name, spec.announces, wf, reason=wf.reason)
        timeline.append(kind.event(wf, f"node.{kind.name}.{spec.announces}", wf.reason))
    kind.add_events(timeline)
    audit.record(
        actor=actor,
        action=f"{kind.name}.{spec.name}",
        target=wf,
        before=before,
        after={"state": wf.state, "stage": wf.stage, "attempt": wf.attempt},
        reason=reason,
    )

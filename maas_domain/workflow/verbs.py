"""The recovery verbs (seed 000 §5.3, design §4): seven distinct operations, built once here and
used by every workflow kind. Each checks the source state under a row lock, changes the row,
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
from maas_domain.errors import Conflict, InvalidInput
from maas_domain.workflow import engine
from maas_domain.workflow.models import WorkflowState

W = WorkflowState


@dataclass(frozen=True)
class Verb:
    name: str
    sources: tuple[str, ...]
    needs_confirm: bool = False


VERBS = {
    v.name: v
    for v in (
        Verb("retry", (W.FAILED,)),
        Verb("resume", (W.FAILED, W.MANUAL_INTERVENTION, W.RUNNING)),
        Verb("rerun", (W.FAILED, W.SUCCEEDED, W.CANCELLED, W.MANUAL_INTERVENTION)),
        Verb("restart-clean", (W.FAILED, W.CANCELLED, W.MANUAL_INTERVENTION), needs_confirm=True),
        Verb("cancel", (W.PENDING, W.RUNNING, W.WAITING)),
        Verb("adopt", (W.FAILED, W.MANUAL_INTERVENTION, W.WAITING)),
        Verb("mark-manual-intervention", (W.PENDING, W.RUNNING, W.WAITING, W.CANCELLING)),
    )
}


def _worker_vanished(wf: Any) -> bool:
    """Running, but its lease expired while held: the execution died (resume may take over)."""
    return bool(
        wf.state == W.RUNNING
        and wf.lease_owner
        and wf.lease_expires_at is not None
        and wf.lease_expires_at <= timezone.now()
    )


def allowed_verbs(wf: Any) -> list[str]:
    names = []
    for verb in VERBS.values():
        if wf.state in verb.sources and (
            verb.name != "resume" or wf.state != W.RUNNING or _worker_vanished(wf)
        ):
            names.append(verb.name)
    return names


def _refuse(wf: Any, verb: str) -> Conflict:
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


def plan(kind: engine.WorkflowKind, wf: Any, verb: str, *, adopt_stage: str | None = None) -> Plan:
    stages = kind.stages_for(wf)
    first = stages[0].name
    stage = {
        "retry": wf.stage,
        "resume": wf.stage,
        "rerun": first,
        "restart-clean": kind.reset.name if kind.reset else first,
        "cancel": wf.stage,
        "adopt": adopt_stage or wf.stage,
        "mark-manual-intervention": wf.stage,
    }[verb]
    attempt = wf.attempt + (1 if verb in ("retry", "rerun", "restart-clean") else 0)
    calls: list[str] = []
    if verb == "cancel" and kind.cancel is not None:
        calls += kind.cancel.maas_calls
    elif verb not in ("mark-manual-intervention",):
        names = [s.name for s in stages]
        if kind.reset is not None and stage == kind.reset.name:
            calls += kind.reset.maas_calls
            names_from = 0
        else:
            names_from = names.index(stage) if stage in names else 0
        for s in stages[names_from:]:
            calls += [f"{s.name}: {c}" for c in s.maas_calls]
    checks = [f"state is {wf.state}; {verb} is allowed from {', '.join(VERBS[verb].sources)}"]
    if verb in ("retry", "resume", "rerun", "restart-clean", "adopt"):
        checks.append("no other open workflow holds the host (database constraint)")
    return Plan(verb, stage, attempt, calls, checks)


def _refuse_if_node_busy(kind: engine.WorkflowKind, wf: Any) -> None:
    """One open workflow per node across kinds: reopening waits for the other one to close.
    The node row lock serialises this check with every start on the same node."""
    from maas_domain.models import Node
    from maas_domain.workflows import open_on_node

    if not getattr(wf, "node_id", None):
        return
    Node.objects.select_for_update().filter(pk=wf.node_id).first()
    others = open_on_node(wf.node_id, exclude={(kind.name, wf.pk), *kind.family(wf)})
    if others:
        raise Conflict(
            f"node {wf.hostname} has another open workflow; this one cannot be reopened.",
            current_state=wf.state,
            open_workflows=others,
        )


def _reopen(
    kind: engine.WorkflowKind, wf: Any, *, stage: str, attempt: int, checkpoint: str | None
) -> None:
    """Back to pending at ``stage``; admission starts it within the site's concurrency limit."""
    wf.state = W.PENDING
    wf.stage = stage
    wf.attempt = attempt
    if checkpoint is not None:
        wf.checkpoint = checkpoint
    wf.failure_class = wf.reason = ""
    wf.finished_at = None
    wf.lease_owner, wf.lease_expires_at = "", None
    wf.lost_leases = wf.stage_tries = 0
    wf.stage_started_at = wf.next_check_at = None
    wf.wait_system_id, wf.wait_status = "", None
    wf.stage_data = {}
    wf.dispatch = F("dispatch") + 1


def apply(
    kind: engine.WorkflowKind,
    pk: int,
    verb: str,
    *,
    actor: audit.Actor,
    reason: str = "",
    confirm: bool = False,
    dry_run: bool = False,
    adopt: Callable[[Any], tuple[str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Run one verb on workflow ``pk`` (or describe it, with ``dry_run``)."""
    spec = VERBS.get(verb)
    if spec is None:
        raise InvalidInput(
            f"Unknown verb {verb!r}.", fields={"verb": [f"One of: {', '.join(VERBS)}."]}
        )
    adopt_stage: str | None = None
    observed: dict[str, Any] = {}
    if verb == "adopt" and adopt is not None:
        current = kind.model.objects.select_related(*kind.select_related).get(pk=pk)
        if current.state in spec.sources:
            adopt_stage, observed = adopt(current)  # reads MAAS; no lock held
    with transaction.atomic():
        wf = (
            kind.model.objects.select_for_update(of=("self",))
            .select_related(*kind.select_related)
            .get(pk=pk)
        )
        if wf.state not in spec.sources or (
            verb == "resume" and wf.state == W.RUNNING and not _worker_vanished(wf)
        ):
            raise _refuse(wf, verb)
        if spec.needs_confirm and not confirm and not dry_run:
            raise InvalidInput(
                f"{verb} needs explicit confirmation.", fields={"confirm": ["Must be true."]}
            )
        recipe = plan(kind, wf, verb, adopt_stage=adopt_stage)
        if dry_run:
            return {"dry_run": True, "allowed": True, "current_state": wf.state, **recipe.__dict__}
        before = {"state": wf.state, "stage": wf.stage, "attempt": wf.attempt}
        name = audit.actor_name(actor)
        if verb == "cancel":
            if wf.state == W.PENDING:
                wf.state, wf.finished_at = W.CANCELLED, timezone.now()
                kind.on_cancelled(wf)
            else:
                wf.state = W.CANCELLING
                wf.lease_owner, wf.lease_expires_at = "", None
                wf.dispatch = F("dispatch") + 1
        elif verb == "mark-manual-intervention":
            wf.state = W.MANUAL_INTERVENTION
            wf.lease_owner, wf.lease_expires_at, wf.next_check_at = "", None, None
            wf.reason = (reason or "marked for manual intervention")[:500]
            wf.dispatch = F("dispatch") + 1
        else:
            checkpoint = (
                ""
                if recipe.from_stage
                in (kind.stages_for(wf)[0].name, getattr(kind.reset, "name", ""))
                else None
            )
            if not wf.is_open:
                _refuse_if_node_busy(kind, wf)
            _reopen(
                kind, wf, stage=recipe.from_stage, attempt=recipe.attempt, checkpoint=checkpoint
            )
        try:
            with transaction.atomic():
                wf.save()
        except IntegrityError as exc:
            raise Conflict(
                "Another open workflow took this host meanwhile; this one cannot be reopened.",
                current_state=before["state"],
            ) from exc
        wf.refresh_from_db()
        message = f"{verb} by {name}" + (f": {reason}" if reason else "")
        kind.add_event(wf, f"operator.{verb}", message, stage=wf.stage, actor=name, **observed)
        if verb == "mark-manual-intervention":
            events.emit(kind.name, "manual_intervention_required", wf, reason=wf.reason)
            kind.add_event(
                wf, f"node.{kind.name}.manual_intervention_required", wf.reason, stage=wf.stage
            )
        audit.record(
            actor=actor,
            action=f"{kind.name}.{verb}",
            target=wf,
            before=before,
            after={"state": wf.state, "stage": wf.stage, "attempt": wf.attempt},
            reason=reason,
        )
        if wf.state == W.CANCELLING:
            engine.enqueue(kind.name, wf.pk, wf.dispatch)
        elif wf.state == W.PENDING:
            engine.admit_after_commit(wf.site_id)
    return {"dry_run": False, "verb": verb, "workflow": wf}

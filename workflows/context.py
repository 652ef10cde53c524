"""What a stage gets: its workflow row, the policy, a lease-guarded MAAS client, timeline
entries to record with its result and a scratch dict persisted with the lease.

A stage never changes the workflow's state itself; it returns a result (``results.py``) and the
engine records it (``step.record``). docs/architecture.md ("How a request becomes MAAS calls").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cached_property
from typing import Any, Generic, cast

from django.conf import settings
from django.db import connections, transaction
from django.db.models import QuerySet
from django.db.models.sql.subqueries import UpdateQuery
from django.utils import timezone

from maas_client.client import MaasClient
from maas_client.types import Machine
from maas_domain.policy import Policy
from maas_domain.site_client import client_for_site
from workflows.kinds import M, WorkflowKind
from workflows.models import WorkflowEvent
from workflows.results import LeaseLost, RowChanged


def lease_seconds() -> float:
    return float(settings.WORKFLOW_LEASE_SECONDS)


# Timeline entry kinds that describe a MAAS mutation sent (kept across a rerun).
SENT_ENTRIES = frozenset({"maas.action", "fallback.step"})


class StageContext(Generic[M]):
    """One execution's view of one workflow. The row it holds is the truth as of its last
    write: ``write`` stores fields with a compare-and-swap on the lease, the state and
    ``updated_at``, so nothing written meanwhile by someone else is overwritten (an operator's
    verb: ``LeaseLost``; an enrollment: ``RowChanged``, and the engine runs the stage again on
    the fresh row)."""

    def __init__(self, kind: WorkflowKind[M], wf: M, owner: str) -> None:
        self.kind = kind
        self.wf = wf
        self.owner = owner
        self.dispatch = wf.dispatch  # the hand-off this execution claimed
        self.stored = (wf.state, wf.updated_at)  # what the row holds, for the compare-and-swap
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.data: dict[str, Any] = dict(wf.stage_data or {})

    def next_stage(self, *, rerun: bool = False) -> None:
        """The engine moves on to the row's (next or re-read) stage within one execution: the
        MAAS client and the policy stay, the timeline entries and the scratch dict start over.
        On a rerun the entries of MAAS mutations already sent stay: the intent log keeps the
        rerun from sending them again, so it would not describe them again either."""
        self.events = [e for e in self.events if e[0] in SENT_ENTRIES] if rerun else []
        self.data = dict(self.wf.stage_data or {})

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

    def _mine(self) -> QuerySet[M]:
        state, updated_at = self.stored
        return self.kind.model._default_manager.filter(
            pk=self.wf.pk, lease_owner=self.owner, state=state, updated_at=updated_at
        )

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
            if not update_with_timeline(self._mine(), values, list(events), self.kind):
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
        execution took the workflow over, or the row changed, stop before touching MAAS."""
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
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return bool(cursor.rowcount)

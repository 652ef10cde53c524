"""The engine's hot statements without the ORM's per-call SQL compilation.

Every step of every workflow loads its row (with the kind's ``select_related``), claims the
lease and writes its result with a compare-and-swap; the ORM compiles each of these from a
QuerySet every time, and that compilation was about a third of a worker's CPU per onboarded
node (docs/benchmarks.md, "2026-11-27 — the worker's CPU per node"). Here:

- the kind's load (``maas_domain/compiled.py``): compiled once per thread and database.
- ``take_free_lease_sql``: the claim of a free lease, which ``compiled.get_changed`` runs with
  the load in one statement (the row as the claim left it, with its related rows).
- ``update``: ``UPDATE <table> SET <col> = %s, ... WHERE <col> = %s AND ...`` built from the
  model's fields (the SQL text cached per table and field names), every value prepared by its
  field exactly as ``QuerySet.update`` and ``filter`` prepare them (``get_db_prep_save``,
  ``get_db_prep_value``). A value the ORM would compile (an expression) is refused
  (``NeedsOrm``): the caller uses the ORM for it.

Identifiers come from the models' metadata and every value is a parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections
from django.db.models import Field, Model


class NeedsOrm(Exception):
    """A value the hand-written statement cannot carry (an expression): use the ORM."""


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    """A concrete column of ``model`` (``pk``: its primary key)."""
    meta = model._meta
    found = meta.pk if name == "pk" else meta.get_field(name)
    if not isinstance(found, Field) or not found.concrete:
        raise NeedsOrm(f"{name} is not a column of {meta.db_table}")
    return found


_UPDATE_SQL: dict[tuple[Any, ...], str] = {}


def update(
    model: type[Model],
    values: Mapping[str, Any],
    where: Mapping[str, Any],
    *,
    alias: str = "default",
) -> tuple[str, list[Any]]:
    """The SQL and parameters of ``model.objects.filter(**where).update(**values)`` (``where``:
    equality on plain fields; None is ``IS NULL``)."""
    db = connections[alias]
    meta = model._meta
    set_fields = [_field(model, name) for name in values]
    where_fields = [_field(model, name) for name in where]
    params: list[Any] = []
    for field, value in zip(set_fields, values.values(), strict=True):
        if field.many_to_many or field.model._meta.concrete_model is not meta.concrete_model:
            raise NeedsOrm(f"{field.name} is not a column of {meta.db_table}")
        if hasattr(value, "resolve_expression") or hasattr(field, "get_placeholder"):
            raise NeedsOrm(f"{field.name}: an expression")
        if hasattr(value, "prepare_database_save"):
            if not field.remote_field:
                raise NeedsOrm(f"{field.name}: a model instance for a plain field")
            value = value.prepare_database_save(field)
        prepared = field.get_db_prep_save(value, connection=db)
        if hasattr(prepared, "as_sql"):
            raise NeedsOrm(f"{field.name}: an expression")
        params.append(prepared)
    nulls = tuple(value is None for value in where.values())
    for field, value in zip(where_fields, where.values(), strict=True):
        if field.is_relation or hasattr(value, "resolve_expression"):
            raise NeedsOrm(f"{field}: only plain fields compared with values")
        if value is not None:
            params.append(field.get_db_prep_value(value, connection=db, prepared=False))
    key = (db.vendor, meta.db_table, tuple(values), tuple(where), nulls)
    sql = _UPDATE_SQL.get(key)
    if sql is None:
        quote = db.ops.quote_name
        sets = ", ".join(f"{quote(str(f.column))} = %s" for f in set_fields)
        conditions = " AND ".join(
            f"{quote(meta.db_table)}.{quote(str(f.column))} " + ("IS NULL" if null else "= %s")
            for f, null in zip(where_fields, nulls, strict=True)
        )
        sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {conditions}"  # noqa: S608
        _UPDATE_SQL[key] = sql
    return sql, params


def execute(sql: str, params: Sequence[Any], alias: str = "default") -> int:
    """Run one statement; the rows it changed."""
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


_TAKE_SQL: dict[tuple[Any, ...], str] = {}


def take_free_lease(model: type[Model], pk: int, **claim: Any) -> bool:
    """The claim of a free lease, one statement (``take_free_lease_sql``, whose keywords it
    takes): whether the row was taken."""
    sql, params = take_free_lease_sql(model, pk, **claim)
    return execute(sql, params, claim.get("alias", "default")) == 1


def take_free_lease_sql(
    model: type[Model],
    pk: int,
    *,
    dispatch: int,
    states: Sequence[str],
    owner: str,
    now: Any,
    expires: Any,
    alias: str = "default",
) -> tuple[str, list[Any]]:
    """The claim of a free lease: ``filter(pk=pk, dispatch=dispatch, state__in=states,
    lease_owner="")`` with no lease time or an expired one, ``update(updated_at=now,
    lease_owner=owner, lease_expires_at=expires, stage_started_at=Coalesce(F(
    "stage_started_at"), Value(now)))``, as its statement and parameters."""
    db = connections[alias]
    meta = model._meta

    def field(name: str) -> Field[Any, Any]:
        return _field(model, name)

    def prep(name: str, value: Any) -> Any:
        return field(name).get_db_prep_value(value, connection=db, prepared=False)

    key = (db.vendor, meta.db_table, len(states))
    sql = _TAKE_SQL.get(key)
    if sql is None:
        q = db.ops.quote_name
        t = q(meta.db_table)

        def bare(name: str) -> str:
            return q(str(field(name).column))

        def col(name: str) -> str:
            return f"{t}.{bare(name)}"

        sql = (
            f"UPDATE {t} SET {bare('updated_at')} = %s, "  # noqa: S608
            f"{bare('lease_owner')} = %s, {bare('lease_expires_at')} = %s, "
            f"{bare('stage_started_at')} = COALESCE({col('stage_started_at')}, %s) "
            f"WHERE {col('pk')} = %s AND {col('dispatch')} = %s "
            f"AND {col('state')} IN ({', '.join(['%s'] * len(states))}) "
            f"AND {col('lease_owner')} = %s AND ({col('lease_expires_at')} IS NULL "
            f"OR {col('lease_expires_at')} <= %s)"
        )
        _TAKE_SQL[key] = sql
    params = [
        prep("updated_at", now),
        prep("lease_owner", owner),
        prep("lease_expires_at", expires),
        prep("stage_started_at", now),
        prep("pk", pk),
        prep("dispatch", dispatch),
        *(prep("state", s) for s in states),
        prep("lease_owner", ""),
        prep("lease_expires_at", now),
    ]
    return sql, params

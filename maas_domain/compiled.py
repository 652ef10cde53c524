"""Hot reads without the ORM's per-call SQL compilation.

A QuerySet compiles its SQL every time it runs, and for the few reads every workflow step makes
(its row with the related rows, the site's credential reference, a secret's row) that
compilation cost more CPU than the database answering them (docs/benchmarks.md, "2026-11-27 —
the worker's CPU per node"). Here such a read is compiled once per thread, database and shape
(the model, the related rows, the compared fields, the order), and each call runs the same SQL
with its own values and builds the instances with the ORM's own code (converters,
``Model.from_db``, the related populators), so they are what the QuerySet returns.

A shape is compiled only if the QuerySet's parameters are exactly the compared values, each
prepared by its field as the lookup prepares it (a boolean, which the ORM writes into the SQL,
is part of the shape); otherwise (and for a None, which the ORM compiles as ``IS NULL``) the
QuerySet runs as before.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar, cast

from django.db import connections, router
from django.db.models import Field, Model, QuerySet
from django.db.models.query import get_related_populators

T = TypeVar("T", bound=Model)

_local = threading.local()  # a compiler holds its thread's connection


class _Compiled:
    def __init__(self, qs: QuerySet[Any], alias: str, values: list[Any]) -> None:
        self.model, self.alias = qs.model, alias
        compiler = qs.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        self.ok = list(params) == values
        self.sql, self.compiler = sql, compiler
        select, klass_info = compiler.select, compiler.klass_info
        assert klass_info is not None
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [f[0].target.attname for f in select[self.start : self.end]]
        # Django 5.2's signature (the stubs know a later one)
        self.populators = cast(Any, get_related_populators)(klass_info, select, alias)
        self.converters = compiler.get_converters([s[0] for s in select[0 : compiler.col_count]])

    def run(self, params: list[Any], sql: str | None = None) -> list[Any]:
        with connections[self.alias].cursor() as cursor:
            cursor.execute(sql or self.sql, params)
            rows = cursor.fetchall()
        if self.converters and rows:
            rows = list(self.compiler.apply_converters(rows, self.converters))
        found = []
        for row in rows:
            obj = self.model.from_db(self.alias, self.init_list, row[self.start : self.end])
            for populator in self.populators:
                populator.populate(row, obj)
            found.append(obj)
        return found


def _prepared(model: type[Model], name: str, value: Any, alias: str) -> Any:
    meta = model._meta
    field = meta.pk if name == "pk" else meta.get_field(name)
    if not isinstance(field, Field) or hasattr(value, "resolve_expression"):
        raise TypeError(name)
    return field.get_db_prep_value(value, connection=connections[alias], prepared=False)


def _fetch(
    model: type[T],
    related: tuple[str, ...],
    order: tuple[str, ...],
    limit: int | None,
    **where: Any,
) -> list[T] | None:
    """The rows, or None when this shape runs through the QuerySet."""
    if any(v is None for v in where.values()):
        return None
    alias = router.db_for_read(model)
    names = tuple(sorted(where))  # the order filter(**where) compares them in
    # the ORM writes a boolean into the SQL (``col`` / ``NOT col``): part of the shape
    flags = tuple((n, where[n]) for n in names if isinstance(where[n], bool))
    try:
        params = [_prepared(model, n, where[n], alias) for n in names if (n, where[n]) not in flags]
    except (TypeError, LookupError):
        return None
    cache: dict[tuple[Any, ...], _Compiled] = _local.__dict__.setdefault("compiled", {})
    key = (model, related, order, limit, names, flags, alias, id(connections[alias]))
    compiled = cache.get(key)
    if compiled is None:
        compiled = cache[key] = _Compiled(
            _queryset(model, related, order, limit, where), alias, params
        )
    if not compiled.ok:
        return None
    return cast(list[T], compiled.run(params))


def _queryset(
    model: type[T],
    related: tuple[str, ...],
    order: tuple[str, ...],
    limit: int | None,
    where: dict[str, Any],
) -> QuerySet[T]:
    qs = model._default_manager.filter(**where)
    if related:
        qs = qs.select_related(*related)
    if order:
        qs = qs.order_by(*order)
    if limit is not None:
        qs = qs[:limit]
    return qs


def get(model: type[T], pk: Any, related: tuple[str, ...] = ()) -> T:
    """``model._default_manager.select_related(*related).get(pk=pk)``."""
    found = _fetch(model, related, (), None, pk=pk)
    if found is None:
        return model._default_manager.select_related(*related).get(pk=pk)
    if not found:
        missing = cast(Any, model).DoesNotExist
        raise missing(f"{model.__name__} matching query does not exist.")
    return found[0]


def first(model: type[T], *, order: tuple[str, ...] = ("pk",), **where: Any) -> T | None:
    """``model._default_manager.filter(**where).order_by(*order).first()``: equality only."""
    found = _fetch(model, (), order, 1, **where)
    if found is None:
        return model._default_manager.filter(**where).order_by(*order).first()
    return found[0] if found else None


class Uncompiled(Exception):
    """This read cannot be fused with the statement (another database, a shape the ORM
    compiles otherwise): run the two statements."""


_FUSED: dict[tuple[Any, ...], str] = {}


def get_changed(
    model: type[T], pk: Any, related: tuple[str, ...], changing_sql: str, params: list[Any]
) -> T | None:
    """``changing_sql`` (an UPDATE of ``model``'s row ``pk``, on PostgreSQL) and then ``get``
    of that row in the same statement: ``WITH changed AS (<changing_sql> RETURNING *)`` and
    ``get``'s SELECT reading the row from ``changed`` (as the update left it) joined to its
    related rows. None when the update changed no row; ``Uncompiled`` when this cannot be
    one statement."""
    alias = router.db_for_write(model)
    db = connections[alias]
    if db.vendor != "postgresql":
        raise Uncompiled(db.vendor)
    try:
        pk_param = _prepared(model, "pk", pk, alias)
    except (TypeError, LookupError) as exc:
        raise Uncompiled(str(exc)) from exc
    cache: dict[tuple[Any, ...], _Compiled] = _local.__dict__.setdefault("compiled", {})
    key = (model, related, (), None, ("pk",), (), alias, id(db))
    compiled = cache.get(key)
    if compiled is None:
        compiled = cache[key] = _Compiled(
            _queryset(model, related, (), None, {"pk": pk}), alias, [pk_param]
        )
    if not compiled.ok:
        raise Uncompiled("the read's shape")
    table = db.ops.quote_name(model._meta.db_table)
    fused_key = (compiled.sql, changing_sql)
    fused = _FUSED.get(fused_key)
    if fused is None:
        source = f" FROM {table} "
        if compiled.sql.count(source) != 1 or not changing_sql.startswith(f"UPDATE {table} "):
            raise Uncompiled("the read's FROM")
        select = compiled.sql.replace(source, f' FROM "changed" {table} ')
        fused = _FUSED[fused_key] = (
            f'WITH "changed" AS ({changing_sql} RETURNING {table}.*) {select}'
        )
    found = compiled.run([*params, pk_param], sql=fused)
    return cast(T, found[0]) if found else None

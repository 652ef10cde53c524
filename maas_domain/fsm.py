"""The one state-machine idiom (docs/architecture.md, "State machines").

Every record with a lifecycle (workflows, nodes, allocations, onboarding batches, reconcile
runs, drift records) keeps its state in a protected django-fsm field (assigning it raises) and
changes it only through transitions declared with :func:`move`. ``move`` is django-fsm's
``transition`` that also writes the transition into our own table, so code that moves many
rows at once with a compare-and-swap update reads the sources and the target from the same
declaration (:func:`sources`, :func:`target`) instead of django-fsm's internals; a test checks
the table against django-fsm's own answer (``can_proceed``) for every state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import models
from django_fsm import transition

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Spec:
    """One transition: the states it may start from and the one it ends in."""

    sources: tuple[str, ...]
    target: str


_TABLE: dict[Callable[..., Any], Spec] = {}


def move(field: Any, source: str | Sequence[str], target: str) -> Callable[[F], F]:
    """Declare a transition (a method with no side effects: guards only)."""
    starts = (source,) if isinstance(source, str) else tuple(source)
    spec = Spec(tuple(str(s) for s in starts), str(target))

    def declare(fn: F) -> F:
        wrapped: F = transition(field=field, source=list(starts), target=target)(fn)
        _TABLE[wrapped] = spec
        return wrapped

    return declare


def spec(transition_method: Callable[..., Any]) -> Spec:
    """The declaration of a transition, given it through the class or an instance."""
    return _TABLE[getattr(transition_method, "__func__", transition_method)]


def sources(transition_method: Callable[..., Any]) -> list[str]:
    """The states a transition may start from (for compare-and-swap updates)."""
    return list(spec(transition_method).sources)


def target(transition_method: Callable[..., Any]) -> str:
    """The state a transition ends in."""
    return spec(transition_method).target


def transitions(model: type[models.Model]) -> dict[str, Spec]:
    """Every transition a model declares, by method name (for the tests and the docs)."""
    found: dict[str, Spec] = {}
    for klass in reversed(model.__mro__):
        for name, value in vars(klass).items():
            if callable(value) and value in _TABLE:
                found[name] = _TABLE[value]
    return found


class Lifecycle(models.Model):
    """Base of every model with a protected django-fsm state: ``refresh_from_db`` reloads the
    state without lifting the protection. (django-fsm's own ``FSMModelMixin`` switches the
    field's ``protected`` flag off for the whole process while it refreshes, so a refresh that
    raises, or another thread meanwhile, leaves the state assignable.)"""

    class Meta:
        abstract = True

    def refresh_from_db(
        self, using: str | None = None, fields: Any = None, from_queryset: Any = None
    ) -> None:
        for field in self._meta.concrete_fields:
            if getattr(field, "protected", False) and (fields is None or field.attname in fields):
                self.__dict__.pop(field.attname, None)  # reloaded as a first assignment
        super().refresh_from_db(using=using, fields=fields, from_queryset=from_queryset)

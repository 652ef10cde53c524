"""One state-machine idiom (docs/architecture.md, "State machines"): every record with a
lifecycle moves its protected state only through declared transitions, and our own table of
them (maas_domain/fsm.py, read by compare-and-swap updates) says exactly what django-fsm
enforces, state by state."""

from __future__ import annotations

from typing import Any

import pytest
from django_fsm import can_proceed

from decommission.models import Decommission
from maas_domain.fsm import sources, target, transitions
from maas_domain.models import Allocation, Node
from onboarding.models import Onboarding, OnboardingBatch
from reconciliation.models import DriftRecord, ReconcileRun

MACHINES = [Onboarding, Decommission, Node, Allocation, OnboardingBatch, ReconcileRun, DriftRecord]


def states(model: Any) -> list[str]:
    return [value for value, _ in model._meta.get_field("state").choices]


@pytest.mark.parametrize("model", MACHINES, ids=lambda m: m.__name__)
def test_every_lifecycle_has_declared_transitions(model: Any) -> None:
    declared = transitions(model)
    assert declared, f"{model.__name__} declares no transition"
    every = set(states(model))
    for name, spec in declared.items():
        assert set(spec.sources) <= every, name
        assert spec.target in every, name


@pytest.mark.parametrize("model", MACHINES, ids=lambda m: m.__name__)
def test_our_table_is_what_django_fsm_enforces_in_every_state(model: Any) -> None:
    for name, spec in transitions(model).items():
        for state in states(model):
            row = model(state=state)
            allowed = can_proceed(getattr(row, name))
            assert allowed == (state in spec.sources), (model.__name__, name, state)
            if allowed:
                getattr(row, name)()
                assert row.state == spec.target, (model.__name__, name, state)
        assert sources(getattr(model, name)) == list(spec.sources)
        assert target(getattr(model, name)) == spec.target


@pytest.mark.parametrize("model", MACHINES, ids=lambda m: m.__name__)
def test_a_state_cannot_be_assigned(model: Any) -> None:
    row = model(state=states(model)[0])
    with pytest.raises(AttributeError, match="Direct state modification is not allowed"):
        row.state = states(model)[-1]


@pytest.mark.django_db
def test_protection_survives_a_refresh_that_fails() -> None:
    """django-fsm's FSMModelMixin lifts the protection process-wide while it refreshes and
    leaves it lifted when the refresh raises; ours reloads the state per instance."""
    from tests.factories import make_node, make_site

    gone = make_node(make_site())
    Node.objects.filter(pk=gone.pk).delete()
    with pytest.raises(Node.DoesNotExist):
        gone.refresh_from_db()
    other = Node(state="active")
    with pytest.raises(AttributeError, match="Direct state modification is not allowed"):
        other.state = "retired"


@pytest.mark.django_db
def test_a_refresh_reloads_a_protected_state() -> None:
    from tests.factories import make_node, make_site

    node = make_node(make_site(), state="active")
    Node.objects.filter(pk=node.pk).update(state="draining")
    node.refresh_from_db()
    assert node.state == "draining"
    node.refresh_from_db(fields=["hostname"])
    assert node.state == "draining"
    with pytest.raises(AttributeError, match="Direct state modification is not allowed"):
        node.state = "active"

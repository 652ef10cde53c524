"""maasctl keeps its own list of the recovery verbs (it may not import the engine:
docs/architecture.md); here it is compared with the engine's, so the two cannot drift."""

from __future__ import annotations

from maas_domain.access import VERB_ACTIONS, Action
from maas_domain.workflow.verbs import VERBS as ENGINE
from maasctl.verbs import DESTRUCTIVE, NEEDS_CONFIRM, VERBS


def test_maasctl_knows_the_engines_verbs() -> None:
    assert list(VERBS) == list(ENGINE)
    assert set(NEEDS_CONFIRM) == {name for name, verb in ENGINE.items() if verb.needs_confirm}


def test_maasctl_asks_first_for_the_verbs_that_need_the_admin_class() -> None:
    assert set(DESTRUCTIVE) == {v for v, action in VERB_ACTIONS.items() if action == Action.ADMIN}

"""maasctl keeps its own list of the recovery verbs (it may not import the engine:
docs/architecture.md); here it is compared with the engine's declarations, so the two cannot
drift."""

from __future__ import annotations

from maasctl.verbs import DESTRUCTIVE, NEEDS_CONFIRM, VERBS
from workflows.verbs import VERBS as ENGINE


def test_maasctl_knows_the_engines_verbs() -> None:
    assert list(VERBS) == list(ENGINE)
    assert set(NEEDS_CONFIRM) == {name for name, verb in ENGINE.items() if verb.needs_confirmation}


def test_maasctl_asks_first_for_the_verbs_the_engine_declares_destructive() -> None:
    assert set(DESTRUCTIVE) == {name for name, verb in ENGINE.items() if verb.destructive}

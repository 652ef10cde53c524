"""Every stage's declared MAAS calls against the code that can send them, read from the source: a
declared call that no path of the stage (its function, the project's functions it calls, the
``StageContext`` methods it uses) can send is a stale declaration, shown in every dry-run plan
of a kind for nothing; a call a path can send but the declaration lacks would go unannounced.
The recording client of the stage tests (tests/support/stages.py) catches an undeclared call a
test makes; this catches the paths no test takes, and the declarations no path needs.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from maas_client.client import MaasClient
from workflows.kinds import KINDS, Stage, StageContext, WorkflowKind

REPOSITORY = Path(__file__).resolve().parents[2]


NOT_REQUESTS = {"close"}  # MaasClient methods that send nothing to MAAS


def _maas_method(name: str) -> bool:
    return (
        not name.startswith("_")
        and name not in NOT_REQUESTS
        and callable(getattr(MaasClient, name, None))
    )


@cache
def _tree(fn: Callable[..., Any]) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(fn)))


def _ours(obj: Any) -> Callable[..., Any] | None:
    """``obj`` as a function of the project whose body can be read, if it is one."""
    if isinstance(obj, Stage):
        obj = obj.run
    if isinstance(obj, types.FunctionType) and _in_repository(obj.__module__):
        return obj
    return None


@cache
def _in_repository(module: str) -> bool:
    """A module of this project (any app, a kind added later included), not a library's; the
    MAAS client itself is where the calls end, not a path to follow."""
    root = sys.modules.get(module.split(".")[0])
    where = getattr(root, "__file__", None)
    return (
        where is not None
        and Path(where).resolve().is_relative_to(REPOSITORY)
        and not module.startswith(("maas_client", "maas_simulator", "tests"))
    )


def maas_calls(fn: Callable[..., Any], seen: set[Any] | None = None) -> set[str]:
    """The ``MaasClient`` methods a call of ``fn`` can reach: attribute calls named after one,
    and, followed, the project's functions it calls by name or through a module, and the
    ``StageContext`` methods it calls."""
    seen = set() if seen is None else seen
    if fn in seen:
        return set()
    seen.add(fn)
    found: set[str] = set()
    scope = {**getattr(inspect.getmodule(fn), "__dict__", {}), **fn.__globals__}
    for node in ast.walk(_tree(fn)):
        if not isinstance(node, ast.Call):
            continue
        target = node.func
        if isinstance(target, ast.Attribute):
            name = target.attr
            if _maas_method(name):
                found.add(name)
            elif callable(getattr(StageContext, name, None)) and not name.startswith("__"):
                found |= maas_calls(getattr(StageContext, name), seen)
            elif isinstance(target.value, ast.Name):
                owner = scope.get(target.value.id)
                if isinstance(owner, types.ModuleType) and (
                    followed := _ours(getattr(owner, name, None))
                ):
                    found |= maas_calls(followed, seen)
        elif isinstance(target, ast.Name) and (followed := _ours(scope.get(target.id))):
            found |= maas_calls(followed, seen)
    return found


def stages() -> list[tuple[WorkflowKind[Any], Stage[Any]]]:
    return [(kind, stage) for kind in KINDS.values() for stage in kind.all_stages]


@pytest.mark.parametrize(
    ("kind", "stage"), stages(), ids=[f"{k.name}.{s.name}" for k, s in stages()]
)
def test_a_stage_declares_exactly_the_maas_calls_its_paths_can_send(
    kind: WorkflowKind[Any], stage: Stage[Any]
) -> None:
    declared = {c.method for c in stage.maas_calls if not c.by_child}
    reachable = maas_calls(stage.run)
    assert declared - reachable == set(), f"declared, sent by no path of {stage.name}"
    assert reachable - declared == set(), f"sent by a path of {stage.name}, not declared"


def test_a_call_made_by_a_child_is_one_a_stage_of_another_kind_declares() -> None:
    for kind, stage in stages():
        for call in (c for c in stage.maas_calls if c.by_child):
            others = [
                (k.name, s.name)
                for k, s in stages()
                if k is not kind and call.method in {c.method for c in s.maas_calls}
            ]
            assert others, f"{kind.name}.{stage.name}: no other kind sends {call.method}"


def test_the_check_sees_through_helpers_lambdas_and_the_context() -> None:
    """The reader itself: a call behind a helper, in a lambda or inside ``ctx.machine`` is
    found; one in a function nothing calls is not."""

    def helper(ctx: Any) -> None:
        ctx.maas.abort("x")

    def unused(ctx: Any) -> None:
        ctx.maas.delete_machine("x")

    def run(ctx: Any) -> None:
        ctx.machine("x")
        (lambda: ctx.maas.release("x"))()
        helper(ctx)

    run.__globals__["helper"] = helper  # as a module-level helper would be
    run.__module__ = helper.__module__ = "workflows.test_only"  # a module of the project
    try:
        assert maas_calls(run) == {"get_machine", "release", "abort"}
    finally:
        del run.__globals__["helper"]
    assert "delete_machine" not in maas_calls(run)
    del unused

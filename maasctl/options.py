"""Options more than one command takes, declared once (docs/cli.md, "Commands").

``options_from`` adds the fields of a dataclass to a command as options: a group of options
two commands share (``sites create`` and ``sites update``) is one dataclass, and each command
receives one instance of it instead of a dozen parameters. ``output_anywhere`` gives every
command ``-o/--output`` after its name, as kubectl and gh take it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


Output = Annotated[
    Format | None,
    typer.Option("--output", "-o", help="table, json or yaml (here or before the command)."),
]

SiteRef = Annotated[str, typer.Argument(help="Site id or name.")]
NodeRef = Annotated[str, typer.Argument(metavar="NODE", help="Node id or hostname.")]
NodeOpt = Annotated[str | None, typer.Option("--node", help="Node id or hostname.")]
SiteOpt = Annotated[str, typer.Option("--site", help="Site id or name.")]
ProfileOpt = Annotated[str, typer.Option("--profile", help="Site profile id or name.")]
SkuOpt = Annotated[str, typer.Option("--sku", help="SKU id or code.")]
Policy = Annotated[
    str | None, typer.Option(help='Policy keys as JSON, e.g. {"erase_mode":"quick"}.')
]
Revision = Annotated[int | None, typer.Option("--if-match", help="Only if still this revision.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Limit = Annotated[int, typer.Option(help="At most this many rows.")]
All = Annotated[bool, typer.Option("--all", help="Every entry (every page), not --limit.")]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Show the server's plan; change nothing, ask nothing (exit 1: refused)."
    ),
]
Interval = Annotated[float, typer.Option(help="Seconds between polls while watching.")]
Watch = Annotated[bool, typer.Option("--watch", help="Follow until it ends (Ctrl-C stops "
                                                     "watching only).")]  # fmt: skip
WorkflowId = Annotated[int, typer.Argument(metavar="ID")]


def _extend(
    command: F, shared: list[inspect.Parameter], *, at: str | None, receive: Callable[..., Any]
) -> F:
    """``command`` with ``shared`` parameters added to its signature (where its parameter
    ``at`` stands, else last); ``receive(kwargs, shared values)`` calls it."""
    own = inspect.signature(command, eval_str=True)
    kept = [p for p in own.parameters.values() if p.name != at]
    clash = {p.name for p in kept} & {p.name for p in shared}
    if clash:
        raise TypeError(f"{command.__name__}: {sorted(clash)} are declared twice")
    names = {p.name for p in shared}

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in names}
        return receive(kwargs, given)

    # keyword-only, so that options with defaults may precede arguments without
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept]
    index = list(own.parameters).index(at) if at is not None else len(parameters)
    parameters[index:index] = shared
    del wrapper.__wrapped__  # Typer must read the signature below, not the command's
    wrapper.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return typing.cast(F, wrapper)


def output_anywhere(group: typer.Typer, choose: Callable[[Format], None]) -> None:
    """Every command of ``group`` and its subgroups takes ``-o/--output`` after its name too;
    ``choose`` receives it before the command runs."""
    option = inspect.Parameter(
        "output_format_", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Output
    )
    for info in group.registered_commands:
        command = info.callback
        assert command is not None

        def receive(
            kwargs: dict[str, Any], given: dict[str, Any], command: Callable[..., Any] = command
        ) -> Any:
            if given["output_format_"] is not None:
                choose(given["output_format_"])
            return command(**kwargs)

        info.callback = _extend(command, [option], at=None, receive=receive)
    for sub in group.registered_groups:
        assert sub.typer_instance is not None
        output_anywhere(sub.typer_instance, choose)


def options_from(group: type[Any], *, into: str) -> Callable[[F], F]:
    """Give the decorated command every field of the dataclass ``group`` as an option (each
    field's ``Annotated`` type carries its ``typer.Option``); the command receives them as one
    ``group`` instance in its parameter ``into``, and the options are listed where that
    parameter stands.

    Typer reads a command's parameters from its signature, so the wrapper publishes the
    command's own parameters plus the group's fields as ``__signature__``.
    """
    hints = typing.get_type_hints(group, include_extras=True)
    shared = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name]
        )
        for f in dataclasses.fields(group)
    ]

    def decorate(command: F) -> F:
        def receive(kwargs: dict[str, Any], given: dict[str, Any]) -> Any:
            return command(**kwargs, **{into: group(**given)})

        return _extend(command, shared, at=into, receive=receive)

    return decorate

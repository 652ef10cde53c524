"""Options more than one command takes, declared once (docs/cli.md, "Commands").

``options_from`` adds the fields of a dataclass to a command as options: a group of options
two commands share (``sites create`` and ``sites update``) is one dataclass, and each command
receives one instance of it instead of a dozen parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

SiteRef = Annotated[str, typer.Argument(help="Site id or name.")]
SiteOpt = Annotated[str, typer.Option("--site", help="Site id or name.")]
ProfileOpt = Annotated[str, typer.Option("--profile", help="Site profile id or name.")]
SkuOpt = Annotated[str, typer.Option("--sku", help="SKU id or code.")]
Policy = Annotated[
    str | None, typer.Option(help='Policy keys as JSON, e.g. {"erase_mode":"quick"}.')
]
Revision = Annotated[int | None, typer.Option("--if-match", help="Only if still this revision.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Limit = Annotated[int, typer.Option(help="At most this many rows.")]
Interval = Annotated[float, typer.Option(help="Seconds between polls while watching.")]
Watch = Annotated[bool, typer.Option("--watch", help="Follow until it ends (Ctrl-C stops "
                                                     "watching only).")]  # fmt: skip
WorkflowId = Annotated[int, typer.Argument(metavar="ID")]


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
        own = inspect.signature(command, eval_str=True)
        names = list(own.parameters)
        at = names.index(into)
        kept = [p for p in own.parameters.values() if p.name != into]
        clash = {p.name for p in kept} & {p.name for p in shared}
        if clash:
            raise TypeError(f"{command.__name__}: {sorted(clash)} are already {group.__name__}")

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            fields = {p.name: kwargs.pop(p.name) for p in shared}
            return command(**kwargs, **{into: group(**fields)})

        # keyword-only, so that options with defaults may precede arguments without
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept]
        parameters[at:at] = shared
        del wrapper.__wrapped__  # Typer must read the signature below, not the command's
        wrapper.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return typing.cast(F, wrapper)

    return decorate

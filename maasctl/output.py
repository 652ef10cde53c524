"""Tables by default, ``--output json`` or ``yaml`` for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

console = Console()
errors = Console(stderr=True)
FORMATS = ("table", "json", "yaml")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)[:80]
    return str(value)


def show(data: Any, fmt: str, *, columns: Sequence[str] = (), title: str = "") -> None:
    """A list as a table of ``columns``; one object as a two-column table; or JSON/YAML."""
    if fmt == "json":
        console.print_json(json.dumps(data, default=str))
        return
    if fmt == "yaml":
        console.print(yaml.safe_dump(data, sort_keys=False), end="", markup=False)
        return
    if isinstance(data, list):
        table = Table(title=title or None)
        for column in columns:
            table.add_column(column)
        for row in data:
            table.add_row(*(_cell(row.get(c)) for c in columns))
        console.print(table)
        if not data:
            console.print("(none)")
        return
    table = Table(show_header=False, title=title or None)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key in columns or list(data):
        if key in data:
            table.add_row(key, _cell(data[key]))
    console.print(table)

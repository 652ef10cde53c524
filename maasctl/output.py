"""What maasctl prints (docs/cli.md, "Output"): tables by default, ``-o json`` or ``-o yaml``
for scripts.

* Server text is data. Every string from the API reaches a table or a message through
  ``clean`` (terminal control characters, including ESC, C1 codes, bidi overrides and line
  breaks, are shown escaped: ``\\x1b``, ``\\n``) and as a Rich ``Text`` (``[link=...]`` is
  printed as written, never as markup). JSON and YAML escape them too.
* A terminal gets tables at its width. Anything else (a pipe, a file, a pager) gets them at
  ``PIPE_WIDTH`` columns: a long cell wraps onto more lines (a word longer than its column is
  folded, never cut), so every character is still there and no line is wider than a pager;
  ``-o json`` and ``-o yaml`` are never wrapped.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "json", "yaml")
PIPE_WIDTH = 120  # not a terminal: a file or a pager reads lines of at most this many columns
TTY_CELL = 80  # a JSON value in a table cell, on a terminal
# C0 and C1 control characters, DEL, bidi overrides and isolates, line/paragraph separators
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    """``value`` as one line of plain text: control characters shown as escapes."""
    return _UNSAFE.sub(_escape, str(value))


def text(value: object, style: str = "") -> Text:
    """Server text for Rich: cleaned, and never read as markup."""
    return Text(clean(value), style=style)


def _console(stream: TextIO, *, stderr: bool) -> Console:
    tty = stream.isatty()
    return Console(stderr=stderr, width=None if tty else PIPE_WIDTH, highlight=False)


console = _console(sys.stdout, stderr=False)
errors = _console(sys.stderr, stderr=True)


def setup() -> None:
    """Consoles for this invocation's streams (a pipe is not a terminal: ``PIPE_WIDTH``)."""
    global console, errors
    console = _console(sys.stdout, stderr=False)
    errors = _console(sys.stderr, stderr=True)


def say(message: object) -> None:
    """One line of our own text on stdout (with server values already cleaned)."""
    console.print(Text(str(message)), soft_wrap=True)


def warn(message: object) -> None:
    """One line on stderr: progress, notices and errors, never data."""
    errors.print(Text(str(message)), soft_wrap=True)


def as_json(data: Any) -> str:
    """JSON with every character a terminal could act on escaped (still valid JSON)."""
    raw = json.dumps(data, indent=2, default=str, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", raw)


def _cell(value: Any) -> Text:
    if value is None:
        return Text("-")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, dict | list):
        raw = json.dumps(value, sort_keys=True, default=str)
        if console.is_terminal and len(raw) > TTY_CELL:
            raw = raw[: TTY_CELL - 1] + "…"
        return text(raw)
    return text(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, title: str = "") -> Table:
    grid = Table(title=text(title) if title else None)
    for column in columns:
        grid.add_column(column, overflow="fold")  # a long word wraps, never cut
    for row in rows:
        grid.add_row(*(_cell(row.get(c)) for c in columns))
    return grid


def show(data: Any, fmt: str, *, columns: Sequence[str] = (), title: str = "") -> None:
    """A list as a table of ``columns``; one object as a two-column table; or JSON/YAML."""
    if fmt == "json":
        console.file.write(as_json(data) + "\n")
        return
    if fmt == "yaml":
        # safe_dump escapes non-printable and non-ASCII characters in double-quoted scalars
        console.file.write(yaml.safe_dump(data, sort_keys=False))
        return
    if isinstance(data, list):
        console.print(table(data, columns, title=title))
        if not data:
            console.print("(none)")
        return
    grid = Table(show_header=False, title=text(title) if title else None)
    grid.add_column("field", style="bold", overflow="fold")
    grid.add_column("value", overflow="fold")
    for key in columns or list(data):
        if key in data:
            grid.add_row(text(key), _cell(data[key]))
    console.print(grid)

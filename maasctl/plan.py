"""A dry run's plan, readable (docs/cli.md, "Dry runs").

Every state-changing route answers ``?dry_run=true`` with what it would do (docs/api.md, "Dry
runs"): a rehearsal ``{dry_run, status, answer, changes, changes_count, workflows,
maas_calls}``, or a route's own plan (an onboarding's preflight report, a verb's plan, a probe
that stores nothing). Whatever the shape, a table shows it: scalars as fields, lists as tables
or lines, the body it would answer with in the command's usual columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from maasctl import output

FAILED = 1
HEADLINE = "Dry run: nothing was changed and nothing was sent to MAAS."
# keys shown by their own section (or not at all) rather than as fields
SECTIONS = ("dry_run", "answer", "changes", "changes_count", "workflows", "maas_calls")


def honoured(answer: Any) -> bool:
    """The server answered a plan (a server that ignores ``?dry_run=true`` acts instead)."""
    return isinstance(answer, dict) and answer.get("dry_run") is True


def exit_code(answer: dict[str, Any]) -> int:
    """1 when the plan says the real request would be refused or would report a failure."""
    if answer.get("allowed") is False:
        return FAILED
    if "health" in answer and answer["health"] != "healthy":
        return FAILED
    return 0


def present(answer: dict[str, Any], fmt: str, *, columns: Sequence[str] = ()) -> int:
    """Print the plan (JSON/YAML as the server wrote it); the exit code."""
    if fmt != "table":
        output.show(answer, fmt)
        return exit_code(answer)
    output.console.print(Text(HEADLINE, style="bold"))
    if "status" in answer:
        output.say(f"The server would answer {output.clean(answer['status'])}.")
    fields = {k: v for k, v in answer.items() if k not in SECTIONS and not _is_rows(v)}
    fields = {k: v for k, v in fields.items() if k != "status"}
    if fields:
        output.show(fields, "table")
    for key, value in answer.items():
        if key not in SECTIONS and _is_rows(value):
            _rows(key, value)
    if isinstance(answer.get("answer"), dict):
        output.show(answer["answer"], "table", columns=_present(columns, answer["answer"]),
                    title="it would answer")  # fmt: skip
    _changes(answer)
    _workflows(answer.get("workflows") or [])
    _lines("MAAS calls it may send", answer.get("maas_calls") or [])
    return exit_code(answer)


def _present(columns: Sequence[str], data: dict[str, Any]) -> tuple[str, ...]:
    return tuple(c for c in columns if c in data) or tuple(data)


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value)


def _rows(title: str, value: list[Any]) -> None:
    if all(isinstance(v, dict) for v in value):
        columns = list(dict.fromkeys(k for row in value for k in row))
        output.console.print(output.table(value, columns, title=title))
    else:
        _lines(title, value)


def _lines(title: str, values: list[Any]) -> None:
    if not values:
        return
    output.console.print(output.text(f"{title}:", style="bold"))
    for value in values:
        output.console.print(Text("  " + output.clean(value)), soft_wrap=True)


def _changes(answer: dict[str, Any]) -> None:
    changes = answer.get("changes")
    if not isinstance(changes, list):
        return
    total = answer.get("changes_count", len(changes))
    title = (
        f"changes it would record ({len(changes)} of {total})"
        if total != len(changes)
        else f"changes it would record ({total})"
    )
    columns = ("action", "target_type", "target_id", "before", "after")
    output.console.print(output.table(changes, columns, title=title))


def _workflows(workflows: list[dict[str, Any]]) -> None:
    for wf in workflows:
        hostnames = wf.get("hostnames") or []
        count = wf.get("count", len(hostnames))
        more = f" (the first {len(hostnames)})" if count > len(hostnames) else ""
        output.say(
            f"It would start {output.clean(count)} {output.clean(wf.get('kind', 'workflow'))}"
            f" workflow(s){more}: {', '.join(output.clean(h) for h in hostnames)}"
        )
        stages = Table(title=None)
        for column in ("stage", "timeout", "maas_calls"):
            stages.add_column(column, overflow="fold")
        for stage in wf.get("stages") or []:
            calls = "; ".join(output.clean(c) for c in stage.get("maas_calls") or []) or "-"
            timeout = stage.get("timeout")
            stages.add_row(
                output.text(stage.get("name", "")),
                Text("-" if timeout is None else f"{output.clean(timeout)} s"),
                Text(calls),
            )
        output.console.print(stages)

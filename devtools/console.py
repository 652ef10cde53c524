"""What `make run` shows on the console: one short line per workflow timeline event, for every
workflow kind the engine knows (the processes' full JSON logs go to files, see run_embedded)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from maas_domain.work import WorkflowRow
from workflows.kinds import KINDS

MESSAGE_WIDTH = 90


def _event_models() -> Iterator[tuple[str, Any, str]]:
    """(kind name, timeline event model, the event's foreign key to its workflow)."""
    for name, kind in KINDS.items():
        yield name, kind.event_model, kind.event_parent


def format_event(kind: str, wf: WorkflowRow, event: Any) -> str:
    message = " ".join(str(event.message).split())  # one line, whatever the message holds
    if len(message) > MESSAGE_WIDTH:
        message = message[: MESSAGE_WIDTH - 1] + "…"
    who = f"{kind} {wf.pk} {wf.hostname}"
    return f"  {event.at:%H:%M:%S} {who:<24} {event.stage:<13} {event.kind:<18} {message}"


class TimelineFollower:
    """Remembers the last event seen per kind; ``new_lines`` returns what was added since, oldest
    first. Starts after what exists when created, so a restart does not replay history."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        for name, model, _ in _event_models():
            newest = model.objects.order_by("-id").values_list("id", flat=True).first()
            self.last[name] = newest or 0

    def new_lines(self, limit: int = 200) -> list[str]:
        rows: list[tuple[Any, str, Any, Any]] = []
        for name, model, fk in _event_models():
            events = list(
                model.objects.filter(id__gt=self.last.get(name, 0))
                .select_related(fk)
                .order_by("id")[:limit]
            )
            if events:
                self.last[name] = events[-1].id
            rows.extend((e.at, name, getattr(e, fk), e) for e in events)
        rows.sort(key=lambda row: (row[0], row[3].id))
        return [format_event(name, wf, event) for _, name, wf, event in rows]

"""The site poll's view of a machine, handed to the stage it wakes (docs/architecture.md,
"Waiting without blocking, and MAAS load").

``scheduling.poll_site`` lists the machines its site's waiting workflows wait on; when it wakes
a workflow because its machine moved, the ``workflow.advance`` message carries that machine as
the listing returned it (``Machine.to_json``: only the fields the product reads; power
parameters are a separate MAAS operation and never read there) with the time it was observed.
The woken stage's first machine read (``StageContext.machine``) takes it instead of a
``GET machines/{id}/`` only if it is for the dispatch the execution claimed, the stage the
workflow waited in, the machine read, and younger than ``MAX_AGE_SECONDS``; once, whatever the
answer. A stage that looked through a hint never sends a MAAS mutation on it: the context
refuses before the intent log (``StageContext.heartbeat``) and the engine runs the stage again
with a real read. So a hint can end a wait, keep it, or fail the stage on what MAAS showed; it
never drives a mutation.

A message without a hint (the sweep's re-dispatch, any other wake, a message sent before the
hint existed) reads MAAS as before.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from maas_client.types import Machine

# How old the listing may be when the woken stage runs (seconds, on the clocks of the process
# that listed and the one that runs the stage: the deployment keeps them in sync, as the leases
# already need). Older: the stage reads MAAS itself. A woken step normally starts well under a
# second after the listing; a backlog longer than this costs the read it would have cost anyway.
MAX_AGE_SECONDS = 30.0


def build(machine: Machine, *, dispatch: int, stage: str, observed_at: float) -> dict[str, Any]:
    """The hint for the step ``dispatch`` of a workflow woken in ``stage`` (JSON: it travels in
    the Celery message)."""
    return {
        "system_id": machine.system_id,
        "dispatch": dispatch,
        "stage": stage,
        "observed_at": observed_at,
        "machine": machine.to_json(),
    }


def usable(
    hint: Mapping[str, Any] | None, *, dispatch: int, stage: str, system_id: str
) -> Machine | None:
    """The machine the hint carries if it may stand in for a read of ``system_id`` now, by the
    execution that claimed ``dispatch`` in ``stage``; else None (read MAAS)."""
    if not isinstance(hint, Mapping) or not system_id:
        return None
    try:
        age = time.time() - float(hint["observed_at"])
        if (
            hint["dispatch"] != dispatch
            or hint["stage"] != stage
            or hint["system_id"] != system_id
            or not -MAX_AGE_SECONDS <= age <= MAX_AGE_SECONDS
        ):
            return None
        machine = Machine.from_json(hint["machine"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not a hint this code wrote: read MAAS
    return machine if machine.system_id == system_id else None

"""Stage 4, in repair: nothing automatic touches the machine (Broken in MAAS) until the repair
is reported done (the requalify operation, repair/services.py), however long it takes."""

from __future__ import annotations

from workflows.kinds import stage
from workflows.results import Done, Result, Wait

from .common import Ctx, S

WEEK = 7 * 24 * 3600.0


@stage(timeout=None, expects=(S.BROKEN,))
def in_repair(ctx: Ctx) -> Result:
    wf = ctx.wf
    if wf.repaired_at is not None:
        note = f": {wf.repair_note}" if wf.repair_note else ""
        return Done(f"repair reported done by {wf.repaired_by or 'an operator'}{note}")
    return Wait("in repair: waiting for the repair to be reported done (requalify)", check_in=WEEK)

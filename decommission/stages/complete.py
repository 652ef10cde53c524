"""Stage 5, complete: a storage cleanup without a confirmed erase holds; otherwise done."""

from __future__ import annotations

from workflows.kinds import stage
from workflows.results import Done, Hold, Result

from ..models import Mode
from .common import Ctx


@stage(timeout=300, machine_may_vanish=True)
def complete(ctx: Ctx) -> Result:
    wf = ctx.wf
    if wf.mode == Mode.STORAGE_CLEANUP and wf.erased is not True:
        return Hold("not_erased", "storage cleanup ended without a confirmed erase; quarantined")
    erased = {True: "disks erased", None: "no erase (policy)", False: "disks NOT erased"}
    return Done(f"{wf.mode} complete; {erased[wf.erased]}")

"""Stage 6, complete."""

from __future__ import annotations

from workflows.kinds import stage
from workflows.results import Done, Result

from .common import Ctx


@stage(timeout=300)
def complete(ctx: Ctx) -> Result:
    return Done(f"repaired and requalified; node {ctx.wf.hostname} is back in service")

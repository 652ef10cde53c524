"""Decommission stages (docs/decommission.md), one module each, each declared where its function
is (``@stage``). Each looks at MAAS first and acts once.

preflight → drain → release (erase per policy; on a failed erase, when policy allows: abort and
mark-broken, the machine left Broken) → redeploy (reimage: a child onboarding runs the
onboarding's own stages from conformance) or retire (full: delete from MAAS) → complete.
Node rows change only inside ``ctx.locked()`` (our lease held) or in the engine's hooks.
"""

from __future__ import annotations

from workflows.kinds import Stage

from ..models import Decommission
from .complete import complete
from .drain import drain
from .preflight import preflight
from .recovery import adopt_stage, cancel, reset
from .redeploy import redeploy
from .release import release
from .retire import retire

__all__ = ["CANCEL", "RESET", "STAGES", "adopt_stage"]

STAGES: list[Stage[Decommission]] = [preflight, drain, release, redeploy, retire, complete]
RESET: Stage[Decommission] = reset
CANCEL: Stage[Decommission] = cancel

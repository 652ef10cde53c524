"""Onboarding stages (docs/architecture.md, "Onboarding stages"), one module each, each declared
where its function is (``@stage``: timeout, MAAS calls, the MAAS statuses reconciliation expects
while it runs). This package keeps only their order.

A stage run twice makes its MAAS mutation once: it adopts what MAAS already shows, and the
engine's intent log (``ctx.sent``) tells a re-run that a mutation may already have been sent.
"""

from __future__ import annotations

from onboarding.models import Onboarding
from onboarding.stages.acceptance import acceptance
from onboarding.stages.commission import commission
from onboarding.stages.conformance import conformance
from onboarding.stages.deploy import deploy
from onboarding.stages.discover import discover
from onboarding.stages.enrollment import complete, enrollment, hardware_sync
from onboarding.stages.payload import payload_stage
from onboarding.stages.preflight import preflight
from onboarding.stages.reachability import reachability
from onboarding.stages.recovery import adopt_stage, cancel, reset
from onboarding.stages.storage_pxe import storage_pxe
from workflows.kinds import Stage

__all__ = ["CANCEL", "RESET", "STAGES", "adopt_stage"]

STAGES: list[Stage[Onboarding]] = [
    preflight,
    discover,
    commission,
    conformance,
    acceptance,
    storage_pxe,
    reachability,
    payload_stage,
    deploy,
    hardware_sync,
    enrollment,
    complete,
]
RESET: Stage[Onboarding] = reset
CANCEL: Stage[Onboarding] = cancel

"""Repair stages (docs/repair.md), one module each, each declared where its function is.

preflight → packet (the RMA packet, frozen once) → hand_over (Broken in MAAS, the node
in_repair) → in_repair (waits for the repair to be reported done) → requalify (mark fixed, a
child onboarding commissions, judges, tests and per policy deploys) → complete.
"""

from __future__ import annotations

from workflows.kinds import Stage

from ..models import Repair
from .complete import complete
from .hand_over import hand_over
from .in_repair import in_repair
from .packet import packet
from .preflight import preflight
from .recovery import adopt_stage, cancel, reset
from .requalify import requalify

__all__ = ["CANCEL", "RESET", "STAGES", "adopt_stage"]

STAGES: list[Stage[Repair]] = [preflight, packet, hand_over, in_repair, requalify, complete]
RESET: Stage[Repair] = reset
CANCEL: Stage[Repair] = cancel

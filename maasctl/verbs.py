"""The recovery verbs as maasctl knows them (docs/api.md, "Recovery verbs").

maasctl may not import the engine (docs/architecture.md, "Where things live"), so it keeps its
own list; tests/maasctl/test_verbs.py compares it with the engine's (workflows/verbs.py).
"""

from __future__ import annotations

VERBS = ("retry", "resume", "rerun", "restart-clean", "cancel", "adopt",
         "mark-manual-intervention")  # fmt: skip
DESTRUCTIVE = ("restart-clean", "cancel")  # asked for confirmation
NEEDS_CONFIRM = ("restart-clean",)  # the API wants {"confirm": true}

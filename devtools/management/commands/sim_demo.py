"""The compose ``sim`` profile's end-to-end check (docs/operations.md, "Try the production shape
on the simulator"): register the demo site against the bundled simulator, probe it, onboard
c07u31 through the production stack's worker, and exit 0 only when it succeeded.

It runs in its own one-shot container with the dev tools mounted, against the stack's own
database, broker and secrets server; the API, workers and beat do the work exactly as they would
for a real MAAS. The site carries this container's CA as its own (the production processes may
have no ``MAASCP_NODE_CA_FILE``: docs/settings.md, "Node trust")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.demo import demo_onboarding_start, demo_site_ensure
from maas_domain.work import WorkflowState


class Command(BaseCommand):
    help = "Onboard the demo machine on the simulator through a running stack (compose `sim`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--maas-url", required=True)
        parser.add_argument("--api-key-file", required=True, type=Path)
        parser.add_argument("--timeout", type=float, default=600.0)

    def handle(self, *args: Any, **opts: Any) -> None:
        key_file: Path = opts["api_key_file"]
        deadline = time.monotonic() + opts["timeout"]
        while not key_file.exists():  # the simulator writes it when it starts
            if time.monotonic() > deadline:
                raise CommandError(f"{key_file} never appeared: is the simulator running?")
            time.sleep(1)
        user, _ = get_user_model().objects.get_or_create(
            username="sim-demo", defaults={"is_staff": True, "is_superuser": True}
        )
        probe = demo_site_ensure(
            actor=user,
            maas_url=opts["maas_url"],
            api_key=key_file.read_text().strip(),
            ca_bundle_pem=settings.NODE_CA_PEM,
        )
        self.stdout.write(f"demo site probe: {probe['health']}")
        if probe["health"] != "healthy":
            raise CommandError(f"the demo site's probe is {probe['health']}: {probe['checks']}")
        wf = demo_onboarding_start(actor=user)
        self.stdout.write(f"onboarding {wf.pk} of {wf.hostname}: {wf.state}")
        while wf.state not in (WorkflowState.SUCCEEDED, WorkflowState.FAILED):
            if time.monotonic() > deadline:
                raise CommandError(f"onboarding {wf.pk} still {wf.state} at {wf.stage}")
            time.sleep(2)
            wf.refresh_from_db()
        if wf.state != WorkflowState.SUCCEEDED:
            raise CommandError(f"onboarding {wf.pk} failed at {wf.stage}: {wf.reason}")
        self.stdout.write(f"onboarding {wf.pk} of {wf.hostname} succeeded")

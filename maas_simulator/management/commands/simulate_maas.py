"""Run the MAAS simulator: ``python manage.py simulate_maas --port 5240``."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from maas_simulator import scenario
from maas_simulator.model import Simulator
from maas_simulator.node import NodeSide
from maas_simulator.server import SimulatorServer


def new_api_key() -> str:
    return (
        ":".join(
            (
                secrets.token_urlsafe(14)[:18],
                secrets.token_urlsafe(14)[:18],
                secrets.token_urlsafe(24)[:32],
            )
        )
        .replace("-", "x")
        .replace("_", "y")
    )


class Command(BaseCommand):
    help = "Serve a simulated MAAS region API (see docs/simulator.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=5240)
        parser.add_argument(
            "--api-key-file",
            help="file holding the admin API key (consumer:token:secret); created if missing",
        )
        parser.add_argument("--scenario", help="YAML or JSON scenario file")
        parser.add_argument("--machines", type=int, default=0, help="generated Ready machines")
        parser.add_argument(
            "--time-scale", type=float, default=60.0, help="MAAS seconds per second"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--reserve-system-ids",
            help="file of system ids (one a line) never to hand out: ones a control plane's "
            "nodes still hold from an earlier run",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        key = None
        if opts["api_key_file"]:
            path = Path(opts["api_key_file"])
            if not path.exists():
                path.write_text(new_api_key())
                path.chmod(0o600)
            key = path.read_text().strip()
        sim = Simulator(scale=opts["time_scale"], seed=opts["seed"])
        if opts["reserve_system_ids"]:
            try:
                text = Path(opts["reserve_system_ids"]).read_text()
            except OSError as exc:
                raise CommandError(f"--reserve-system-ids: {exc}") from exc
            sim.reserved_system_ids = {line.strip() for line in text.splitlines() if line.strip()}
        try:
            data = scenario.read_file(opts["scenario"]) if opts["scenario"] else {}
            faults = scenario.load(sim, data, api_key=key)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"bad scenario: {exc}") from exc
        if not sim.users:
            raise CommandError("no API user: pass --api-key-file or list users in the scenario")
        if opts["machines"]:
            scenario.generate(sim, count=opts["machines"])
        sim.node_side = NodeSide()  # deployed machines enroll from their user-data
        server = SimulatorServer(sim, host=opts["host"], port=opts["port"], faults=faults)
        self.stdout.write(
            f"MAAS simulator on {server.url} ({len(sim.machines)} machines, "
            f"time scale {sim.clock.scale:g}x)"
        )
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.httpd.server_close()

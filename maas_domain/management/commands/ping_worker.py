"""Send a ping task through the broker and wait for a worker's answer."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from maas_domain.tasks import ping


class Command(BaseCommand):
    help = "Round-trip a trivial task through the broker and a worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=30.0)

    def handle(self, *args: Any, **opts: Any) -> None:
        token = secrets.token_hex(8)
        try:
            answer = ping.delay(token).get(timeout=opts["timeout"])
        except Exception as exc:
            raise CommandError(f"no worker answered within {opts['timeout']}s: {exc}") from exc
        if answer.get("pong") != token:
            raise CommandError(f"unexpected answer {answer!r}")
        self.stdout.write(f"pong from {answer['host']} pid {answer['pid']}")

"""Send a ping task through the broker and wait for a worker's answer."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from maas_domain import regions
from maas_domain.tasks import ping
from maas_domain.validators import region_error


class Command(BaseCommand):
    help = "Round-trip a trivial task through the broker and a worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=30.0)
        parser.add_argument(
            "--region",
            default=regions.DEFAULT_REGION,
            help="Ask a worker of this region (its queue); default: the central queue.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if reason := region_error(opts["region"]):
            raise CommandError(f"--region {opts['region']!r}: {reason}")
        queue = regions.queue_for(opts["region"])
        token = secrets.token_hex(8)
        try:
            answer = ping.apply_async((token,), queue=queue).get(timeout=opts["timeout"])
        except Exception as exc:
            raise CommandError(
                f"no worker of queue {queue} answered within {opts['timeout']}s: {exc}"
            ) from exc
        if answer.get("pong") != token:
            raise CommandError(f"unexpected answer {answer!r}")
        self.stdout.write(f"pong from {answer['host']} pid {answer['pid']}")

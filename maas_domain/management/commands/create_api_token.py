"""Create an API token and print it once (kept for scripts; ``api_token create`` is the same)."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from maas_domain.models import TokenScope


class Command(BaseCommand):
    help = "Create an API token; the token is printed once and stored hashed (see api_token)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True)
        parser.add_argument("--name", default="cli")
        parser.add_argument("--scope", choices=TokenScope.values, default=TokenScope.READ)
        parser.add_argument("--expires-days", type=int, default=None)

    def handle(self, *args: Any, **opts: Any) -> None:
        argv = ["create", "--user", opts["user"], "--name", opts["name"], "--scope", opts["scope"]]
        if opts["expires_days"]:
            argv += ["--expires-days", str(opts["expires_days"])]
        call_command("api_token", *argv, stdout=self.stdout)

"""Create an API token for a staff user and print it once (only its hash is stored)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from maas_domain.auth import api_token_create


class Command(BaseCommand):
    help = "Create an API token for a staff user; the token is printed once and stored hashed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username (must be staff)")
        parser.add_argument("--name", default="cli", help="a label for the token")
        parser.add_argument("--expires-days", type=int, default=None)

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(f"no user {opts['user']!r}")
        if not user.is_staff:
            raise CommandError(f"user {opts['user']!r} is not staff; the API is admin-only")
        expires = timedelta(days=opts["expires_days"]) if opts["expires_days"] else None
        _, raw = api_token_create(user=user, name=opts["name"], expires_in=expires)
        self.stdout.write(raw)

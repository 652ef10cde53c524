"""``manage.py secrets_policy --region NAME``: the secrets server's policy for that region's
workers (maas_domain/secrets/policy.py), for ``bao policy write maascp-region-NAME -``
(docs/operations.md, "Regions")."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from maas_domain.secrets.policy import region_policy


class Command(BaseCommand):
    help = "Print the secrets server policy of one region's workers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--region", required=True)

    def handle(self, *args: Any, **opts: Any) -> None:
        vault = settings.VAULT
        try:
            text = region_policy(
                opts["region"],
                mount=str(vault["MOUNT"] or "secret"),
                prefix=str(vault["PATH_PREFIX"] or ""),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(text, ending="")

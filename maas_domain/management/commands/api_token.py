"""``manage.py api_token create|revoke|list``: API tokens from the host (docs/security.md).

The same services as the admin pages and the API; every create and revoke is audited (actor
``system``). The raw token is printed once, on stdout, by ``create``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from maas_domain.errors import DomainError
from maas_domain.models import TokenScope
from maas_domain.services.tokens import api_token_create, api_token_list, api_token_revoke


class Command(BaseCommand):
    help = "Create, revoke or list API tokens (each expires; create and revoke are audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        create = sub.add_parser("create", help="create a token and print it once")
        create.add_argument("--user", required=True)
        create.add_argument("--name", default="cli")
        create.add_argument("--scope", choices=TokenScope.values, default=TokenScope.READ)
        create.add_argument("--expires-days", type=int, default=None)
        revoke = sub.add_parser("revoke", help="revoke a token by id or prefix")
        revoke.add_argument("token", help="token id, or its prefix (mcp_…)")
        revoke.add_argument("--reason", default="")
        listing = sub.add_parser("list", help="tokens (never their values)")
        listing.add_argument("--user", default=None)

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            getattr(self, f"_{opts['what']}")(opts)
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.extra.get('fields') or ''}".strip()) from exc

    def _user(self, name: str) -> Any:
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"no user {name!r}")
        return user

    def _create(self, opts: dict[str, Any]) -> None:
        days = opts["expires_days"]
        _, raw = api_token_create(
            actor=None,
            user=self._user(opts["user"]),
            name=opts["name"],
            scope=opts["scope"],
            expires_in=timedelta(days=days) if days else None,
        )
        self.stdout.write(raw)

    def _revoke(self, opts: dict[str, Any]) -> None:
        ref = opts["token"]
        rows = api_token_list(actor=None)
        match = rows.filter(pk=int(ref)) if ref.isdigit() else rows.filter(prefix=ref[:12])
        found = list(match.filter(revoked_at__isnull=True)[:2])
        if len(found) != 1:
            raise CommandError(f"{ref!r} names {len(found)} live tokens; give the token id")
        api_token_revoke(actor=None, token_id=found[0].pk, reason=opts["reason"])
        self.stdout.write(f"revoked token {found[0].pk} ({found[0].prefix}…)")

    def _list(self, opts: dict[str, Any]) -> None:
        user = self._user(opts["user"]) if opts["user"] else None
        for t in api_token_list(actor=None, user=user):
            state = "revoked" if t.revoked_at else f"expires {t.expires_at:%Y-%m-%d}"
            self.stdout.write(
                f"{t.pk}\t{t.prefix}…\t{t.user.get_username()}\t{t.scope}\t{t.name}\t{state}"
            )

"""API tokens: create, revoke, list (docs/security.md). The API endpoints, the admin pages and
the ``api_token`` management command all call these; each change is audited.

Rules:

* every token expires: ``expires_in`` defaults to ``MAASCP_API_TOKEN_DAYS`` (90) and may not
  exceed ``MAASCP_API_TOKEN_MAX_DAYS`` (365);
* a token has a scope, ``read``, ``operate`` or ``admin`` (``maas_domain/access.py``); a request
  through it may do what both the token's scope and its user's role allow, so a scope above the
  user's role grants nothing more;
* a user creates and revokes their own tokens; tokens of another user need the ``admin``
  action. ``actor=None`` is the system (the management command run by an operator on the
  host, ``run_embedded``);
* the raw token is returned once, by ``api_token_create``; only its SHA-256 is stored, and the
  audit row carries its id, name, prefix, scope and expiry, never the token.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from maas_domain import audit
from maas_domain.access import Action, allowed
from maas_domain.errors import Conflict, Forbidden, InvalidInput, NotFound
from maas_domain.models import ApiToken, TokenScope


def _may_manage(actor: audit.Actor, user: Any) -> bool:
    if actor is None:
        return True  # the system: an operator on the host
    return bool(
        getattr(actor, "pk", None) == getattr(user, "pk", -1) or allowed(actor, Action.ADMIN)
    )


def _summary(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.pk,
        "name": token.name,
        "prefix": token.prefix,
        "user": token.user.get_username(),
        "scope": token.scope,
        "expires_at": token.expires_at,
        "revoked_at": token.revoked_at,
    }


def api_token_create(
    *,
    actor: audit.Actor,
    user: Any,
    name: str,
    scope: str = TokenScope.READ,
    expires_in: timedelta | None = None,
) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the raw token (shown once, never stored)."""
    from maas_domain.auth import TOKEN_PREFIX, hash_token

    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        errors["name"] = ["1 to 100 characters."]
    if scope not in TokenScope.values:
        errors["scope"] = [f"One of: {', '.join(TokenScope.values)}."]
    longest = timedelta(days=settings.API_TOKEN_MAX_DAYS)
    expires_in = expires_in if expires_in is not None else timedelta(days=settings.API_TOKEN_DAYS)
    if not timedelta(minutes=1) <= expires_in <= longest:
        errors["expires_in"] = [f"Between one minute and {settings.API_TOKEN_MAX_DAYS} days."]
    if errors:
        raise InvalidInput("Invalid token request.", fields=errors)
    if not _may_manage(actor, user):
        raise Forbidden("Creating a token for another user needs the admin role.")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name.strip(),
            prefix=raw[:12],
            key_hash=hash_token(raw),
            scope=scope,
            expires_at=timezone.now() + expires_in,
            created_by=audit.actor_name(actor),
        )
        audit.record(actor=actor, action="api_token.create", target=token, after=_summary(token))
    return token, raw


def api_token_revoke(*, actor: audit.Actor, token_id: int, reason: str = "") -> ApiToken:
    """Revoke a token now (it answers 401 from the next request on)."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().select_related("user").filter(pk=token_id)
        row = token.first()
        if row is None:
            raise NotFound(f"API token {token_id} not found.")
        if not _may_manage(actor, row.user):
            raise Forbidden("Revoking another user's token needs the admin role.")
        if row.revoked_at is not None:
            raise Conflict(f"API token {token_id} was already revoked.")
        before = _summary(row)
        row.revoked_at = timezone.now()
        row.revoked_by = audit.actor_name(actor)
        row.revoke_reason = reason[:500]
        row.save(update_fields=["revoked_at", "revoked_by", "revoke_reason"])
        audit.record(
            actor=actor,
            action="api_token.revoke",
            target=row,
            before=before,
            after=_summary(row),
            reason=reason,
        )
    return row


def api_token_list(*, actor: audit.Actor, user: Any | None = None) -> QuerySet[ApiToken]:
    """Tokens the actor may see: their own, or (admin role) anyone's, newest first."""
    rows = ApiToken.objects.select_related("user").order_by("-created_at")
    if actor is not None and not allowed(actor, Action.ADMIN):
        return rows.filter(user_id=getattr(actor, "pk", None) or 0)
    return rows.filter(user=user) if user is not None else rows

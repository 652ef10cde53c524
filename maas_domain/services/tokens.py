"""API tokens: create, revoke, list (docs/security.md). The API endpoints, the admin pages and
the ``api_token`` management command all call these; each change is audited.

Rules:

* every token expires: ``expires_in`` defaults to ``MAASCP_API_TOKEN_DAYS`` (90) and may not
  exceed ``MAASCP_API_TOKEN_MAX_DAYS`` (365);
* a token has a scope, ``read``, ``operate`` or ``admin`` (``maas_domain/access.py``); a request
  through it may do what both the token's scope and its user's role allow, so a scope above the
  user's role grants nothing more;
* a user creates and revokes their own tokens; tokens of another user (a colleague's, from the
  API, the admin pages or maasctl: docs/security.md) need the ``admin`` action. ``actor=None``
  is the system (the management command run by an operator on the host, ``run_embedded``);
* a token is made only for an active user, with a scope their role allows: a wider scope would
  grant nothing more (the role bounds every request) and would only mislead whoever holds it;
* the raw token is returned once, by ``api_token_create``; only its SHA-256 is stored, and the
  audit row carries its id, name, prefix, scope and expiry, never the token;
* a token made through another token (``parent``: a bearer-token request) never has a wider
  scope or a later expiry than it, and dies with it: revoking a token revokes its children.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from maas_domain import audit
from maas_domain.access import RANK, Action, allowed, user_rank
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
    parent: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the raw token (shown once, never stored).
    ``parent``: the token the request came with, which bounds the new one."""
    from maas_domain.auth import TOKEN_PREFIX, hash_token

    now = timezone.now()
    expires_in = _checked_request(name, scope, expires_in, parent, now)
    if not _may_manage(actor, user):  # before anything about the user is said
        raise Forbidden("Creating a token for another user needs the admin role.")
    _check_holder(user, scope)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        if parent is not None:
            _lock_live_parent(parent, now)
        token = ApiToken.objects.create(
            user=user,
            name=name.strip(),
            prefix=raw[:12],
            key_hash=hash_token(raw),
            scope=scope,
            expires_at=now + expires_in,
            created_by=audit.actor_name(actor),
            parent=parent,
        )
        audit.record(actor=actor, action="api_token.create", target=token, after=_summary(token))
    return token, raw


def _checked_request(
    name: str, scope: str, expires_in: timedelta | None, parent: ApiToken | None, now: datetime
) -> timedelta:
    """The token's lifetime (the default when none is asked for), or InvalidInput naming each
    bad field: the name, the scope, the lifetime, and, for a token made through another, a wider
    scope or a later expiry than that one's."""
    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        errors["name"] = ["1 to 100 characters."]
    if scope not in TokenScope.values:
        errors["scope"] = [f"One of: {', '.join(TokenScope.values)}."]
    longest = timedelta(days=settings.API_TOKEN_MAX_DAYS)
    explicit_expiry = expires_in is not None
    expires_in = expires_in if expires_in is not None else timedelta(days=settings.API_TOKEN_DAYS)
    if not timedelta(minutes=1) <= expires_in <= longest:
        errors["expires_in"] = [f"Between one minute and {settings.API_TOKEN_MAX_DAYS} days."]
    if parent is not None and not errors:
        expires_in = _bounded_by_parent(parent, scope, expires_in, explicit_expiry, now, errors)
    if errors:
        raise InvalidInput("Invalid token request.", fields=errors)
    return expires_in


def _bounded_by_parent(
    parent: ApiToken,
    scope: str,
    expires_in: timedelta,
    explicit_expiry: bool,
    now: datetime,
    errors: dict[str, list[str]],
) -> timedelta:
    """A token made through ``parent`` has at most its scope and ends by its expiry: a default
    lifetime is cut to it, an explicit one past it is an error (added to ``errors``)."""
    if RANK[Action(scope)] > RANK[Action(parent.scope)]:
        errors["scope"] = [f"At most the scope of the token making it ({parent.scope})."]
    if parent.expires_at is not None and now + expires_in > parent.expires_at:
        if explicit_expiry:
            errors["expires_in"] = [
                f"At most the expiry of the token making it ({parent.expires_at.isoformat()})."
            ]
        else:
            expires_in = parent.expires_at - now
    return expires_in


def _check_holder(user: Any, scope: str) -> None:
    """A token is made only for an active user, with a scope their role allows."""
    errors: dict[str, list[str]] = {}
    if not getattr(user, "is_active", False):
        errors["user"] = [f"{user.get_username()} is not an active user."]
    elif user_rank(user) < RANK[Action(scope)]:
        role = next((a.value for a in Action if RANK[a] == user_rank(user)), None)
        errors["scope"] = [
            f"{user.get_username()}'s role allows {role or 'nothing (no maascp group)'}: a "
            f"{scope} token would do no more than that. Ask for a narrower scope, or give "
            "the user the role first."
        ]
    if errors:
        raise InvalidInput("Invalid token request.", fields=errors)


def _lock_live_parent(parent: ApiToken, now: Any) -> None:
    """Lock the parent's row for the minting transaction and re-read it: a revocation holds the
    same lock while it collects the children (``_descendants``), so a child is either refused
    here (its parent revoked meanwhile) or committed before the revocation looks for it."""
    row = (
        ApiToken.objects.select_for_update()
        .filter(pk=parent.pk)
        .values("revoked_at", "expires_at")
        .first()
    )
    if row is None or row["revoked_at"] is not None:
        raise Forbidden("The token making this one was revoked.")
    if row["expires_at"] is not None and row["expires_at"] <= now:
        raise Forbidden("The token making this one has expired.")


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
        now = timezone.now()
        row.revoked_at = now
        row.revoked_by = audit.actor_name(actor)
        row.revoke_reason = reason[:500]
        row.save(update_fields=["revoked_at", "revoked_by", "revoke_reason"])
        descendants = _descendants(row)
        ApiToken.objects.filter(pk__in=descendants, revoked_at__isnull=True).update(
            revoked_at=now,
            revoked_by=audit.actor_name(actor),
            revoke_reason=f"revoked with token {row.pk}",
        )
        audit.record(
            actor=actor,
            action="api_token.revoke",
            target=row,
            before=before,
            after={**_summary(row), "revoked_children": descendants},
            reason=reason,
        )
    return row


def _descendants(token: ApiToken) -> list[int]:
    """Every token made through ``token``, at any depth. Each layer is locked before its
    children are read: a token being minted through one of them (``_lock_live_parent`` holds
    that row) is committed first and found, or waits and sees its parent revoked."""
    found: list[int] = []
    layer = [token.pk]
    while layer:
        layer = list(
            ApiToken.objects.select_for_update()
            .filter(parent_id__in=layer)
            .order_by("id")
            .values_list("id", flat=True)
        )
        found += layer
    return found


def token_user(username: Any) -> Any:
    """The user a token is asked for, by user name (a 400 naming ``user`` when there is none;
    a value no user name could be is refused before any query: PostgreSQL cannot even compare
    a NUL)."""
    from django.contrib.auth import get_user_model

    if not isinstance(username, str) or not 0 < len(username) <= 150:
        raise InvalidInput("Invalid token request.", fields={"user": ["Not a user name."]})
    if not username.isprintable():
        raise InvalidInput("Invalid token request.", fields={"user": ["Not a user name."]})
    found = get_user_model().objects.filter(username=username).first()
    if found is None:
        raise InvalidInput("Invalid token request.", fields={"user": ["No such user."]})
    return found


def api_token_list(*, actor: audit.Actor, user: Any | None = None) -> QuerySet[ApiToken]:
    """Tokens the actor may see: their own, or (admin role) anyone's, newest first; ``user``:
    only that user's among them."""
    rows = ApiToken.objects.select_related("user").order_by("-created_at")
    if actor is not None and not allowed(actor, Action.ADMIN):
        rows = rows.filter(user_id=getattr(actor, "pk", None) or 0)
    return rows.filter(user=user) if user is not None else rows

"""Bearer tokens for API clients, stored as SHA-256 hashes (creation and revocation are services
in ``maas_domain/services/tokens.py``)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from maas_domain import context
from maas_domain.models import ApiToken

TOKEN_PREFIX = "mcp_"  # noqa: S105 (a prefix, not a secret)
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>`` (``Token <token>`` is accepted too)."""

    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid Authorization header.")
        raw = header[1].decode(errors="replace")
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
        now = timezone.now()
        if (
            token is None
            or token.revoked_at is not None
            or (token.expires_at is not None and token.expires_at <= now)
            or not token.user.is_active
        ):
            raise exceptions.AuthenticationFailed("Invalid or expired token.")
        if token.last_used_at is None or now - token.last_used_at > _LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        context.api_token_id.set(token.pk)
        context.api_token_scope.set(token.scope)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'

"""API tokens for tests."""

from __future__ import annotations

import secrets
from typing import Any


def bearer_token(user: Any, *, scope: str = "admin", name: str = "test") -> str:
    """A token row written directly: test plumbing, not an audited action of the test's story
    (``maas_domain/services/tokens.py`` creates real ones, audited)."""
    from datetime import timedelta

    from django.utils import timezone

    from maas_domain.auth import TOKEN_PREFIX, hash_token
    from maas_domain.models import ApiToken

    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    ApiToken.objects.create(
        user=user,
        name=name,
        prefix=raw[:12],
        key_hash=hash_token(raw),
        scope=scope,
        expires_at=timezone.now() + timedelta(days=365),
    )
    return raw

"""API tokens (stored hashed) and the database secrets backend's encrypted rows."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Access(models.Model):
    """Carries the three action-class permissions (``maas_domain/access.py``); no table."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("access_read", "Read the control plane (API and admin pages)"),
            ("access_operate", "Operate: start onboardings, continue workflows, probe, reconcile"),
            ("access_admin", "Destructive and trust changes: decommission, credentials, policy"),
        ]

    def __str__(self) -> str:
        return "access"


class TokenScope(models.TextChoices):
    READ = "read"
    OPERATE = "operate"
    ADMIN = "admin"


class ApiToken(models.Model):
    """A bearer token for API clients. Only a SHA-256 of the token is stored; the token itself
    is shown once, by whatever creates it (``maas_domain/services/tokens.py``). Every token
    expires; its scope caps what a request through it may do (docs/security.md)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    scope = models.CharField(max_length=16, choices=TokenScope.choices, default=TokenScope.READ)
    created_by = models.CharField(max_length=150, blank=True, default="")
    revoked_by = models.CharField(max_length=150, blank=True, default="")
    revoke_reason = models.CharField(max_length=500, blank=True, default="")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a token.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        help_text="The token whose request made this one: a child never outranks or outlives "
        "it and is revoked with it.",
    )

    class Meta:
        db_table = "api_tokens"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class SecretVersion(models.Model):
    """One version of one secret for the database backend (Fernet-encrypted JSON).

    Mirrors Vault KV v2: versions only grow, a write can be check-and-set, old versions stay
    readable until destroyed.
    """

    path = models.CharField(max_length=255)
    version = models.PositiveIntegerField()
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    destroyed = models.BooleanField(default=False)

    class Meta:
        db_table = "secret_versions"
        constraints = [
            models.UniqueConstraint(fields=["path", "version"], name="uniq_secret_path_version")
        ]

    def __str__(self) -> str:
        return f"{self.path}@{self.version}"


class IdempotencyRecord(models.Model):
    """The first answer to a request carrying an ``Idempotency-Key``, per caller and endpoint.

    The same key with the same body replays the answer; with another body it is a 422.
    """

    key = models.CharField(max_length=200)
    scope = models.CharField(max_length=300, help_text="caller and endpoint")
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "idempotency_records"
        constraints = [
            models.UniqueConstraint(fields=["key", "scope"], name="uniq_idempotency_key_scope")
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.key}"

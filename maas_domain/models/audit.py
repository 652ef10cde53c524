"""The append-only audit log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class AuditLog(models.Model):
    """One row per privileged mutation, written in the mutation's own transaction.

    Invariant: rows are never updated or deleted by the application (``save`` refuses updates,
    the admin is read-only); ``before``/``after`` never contain secret values.
    """

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True, default="")
    correlation_id = models.CharField(max_length=64, db_index=True)
    api_token = models.ForeignKey(
        "maas_domain.ApiToken",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The API token the actor used, when the change came through one.",
    )

    class Meta:
        db_table = "audit_log"
        ordering = ["-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise RuntimeError("audit rows are append-only")
        super().save(*args, **kwargs)

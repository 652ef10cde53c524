"""The event outbox: domain events written with the state change, published afterwards."""

from __future__ import annotations

import uuid

from django.db import models


class OutboxEvent(models.Model):
    """One domain event (``node.onboarding.completed``...). ``id`` is the event id consumers
    de-duplicate by: publication is at least once."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=64, db_index=True)
    occurred_at = models.DateTimeField(auto_now_add=True, db_index=True)
    payload = models.JSONField()
    published_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        db_table = "event_outbox"
        ordering = ["occurred_at"]
        indexes = [
            models.Index(
                fields=["occurred_at"],
                condition=models.Q(published_at__isnull=True),
                name="outbox_unpublished",
            )
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"

"""Quarantine evidence: what put a node in quarantine, frozen when it happened (docs/hardware.md,
"Quarantine evidence"). What an RMA ticket needs: the conformance report or the failing
acceptance results or the disks not erased, MAAS's events for the machine, and the workflow's
timeline up to that moment.

Immutable: a row is written once and never changed or deleted (``save`` of an existing row,
``delete`` and a queryset's ``update``/``delete`` raise); the node keeps every piece of evidence
of its life (a node is retired, never deleted).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from maas_domain.models.inventory import Node


class EvidenceKind(models.TextChoices):
    HARDWARE_NONCONFORMANT = "hardware_nonconformant", "hardware_nonconformant"
    ACCEPTANCE_FAILED = "acceptance_failed", "acceptance_failed"
    NOT_ERASED = "not_erased", "not_erased"


class ImmutableEvidence(Exception):
    """Evidence is written once: an update or delete is a bug."""


class _WriteOnce(models.QuerySet["QuarantineEvidence"]):
    def update(self, **kwargs: Any) -> int:
        raise ImmutableEvidence("quarantine evidence is immutable")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise ImmutableEvidence("quarantine evidence is immutable")


class QuarantineEvidence(models.Model):
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="evidence")
    kind = models.CharField(max_length=32, choices=EvidenceKind.choices)
    workflow_kind = models.CharField(max_length=32)
    workflow_id = models.PositiveBigIntegerField()
    maas_system_id = models.CharField(max_length=32, blank=True, default="")
    reason = models.CharField(max_length=500)
    report = models.JSONField(default=dict)  # the conformance report, failing results, disks
    maas_events = models.JSONField(default=list)  # MAAS's events for the machine, newest first
    timeline = models.JSONField(default=list)  # the workflow's timeline up to the quarantine
    created_at = models.DateTimeField(auto_now_add=True)

    objects = _WriteOnce.as_manager()

    class Meta:
        db_table = "quarantine_evidence"
        ordering = ["-id"]
        indexes = [models.Index(fields=["node", "-id"])]
        verbose_name_plural = "quarantine evidence"

    def __str__(self) -> str:
        return f"evidence {self.pk} ({self.kind}) of node {self.node_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableEvidence(f"quarantine evidence {self.pk} is immutable")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ImmutableEvidence(f"quarantine evidence {self.pk} is immutable")

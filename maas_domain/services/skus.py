"""SKUs: create, update, delete-or-disable (audited). A SKU that nodes, workflows or batches
refer to is disabled (``active = False``) instead of deleted, so history keeps it."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError, RestrictedError

from maas_domain import audit, hardware
from maas_domain.errors import Conflict
from maas_domain.models import Sku
from maas_domain.services.common import audited_update, check_revision, lock, save_revisioned

FIELDS = ("code", "name", "gpu_model", "gpu_count", "hardware", "active")


def _duplicate(code: Any) -> str:
    return f"A SKU with code {code!r} already exists."


def _checked_profile(sku: Sku) -> None:
    """The hardware profile as a whole, against the SKU's GPU count (a 400 names each bad
    field; docs/hardware.md)."""
    sku.hardware = hardware.validate_profile(
        sku.hardware, gpu_count=sku.gpu_count, gpu_model=sku.gpu_model
    )


def sku_create(*, actor: audit.Actor, data: dict[str, Any]) -> Sku:
    sku = Sku(**{k: v for k, v in data.items() if k in FIELDS})
    _checked_profile(sku)
    with transaction.atomic():
        try:
            with transaction.atomic():
                sku.save()
        except IntegrityError as exc:
            raise Conflict(_duplicate(data.get("code"))) from exc
        audit.record(actor=actor, action="sku.create", target=sku, after=audit.snapshot(sku))
    return sku


def sku_update(
    *,
    actor: audit.Actor,
    sku_id: int,
    changes: dict[str, Any],
    expected_revision: int | None = None,
) -> Sku:
    def apply(sku: Sku) -> None:
        for key, value in changes.items():
            if key in FIELDS:
                setattr(sku, key, value)
        _checked_profile(sku)

    return audited_update(
        actor=actor,
        queryset=Sku.objects.all(),
        pk=sku_id,
        label="SKU",
        action="sku.update",
        expected_revision=expected_revision,
        apply=apply,
        unique_message=_duplicate(changes.get("code")),
    )


def sku_delete(
    *, actor: audit.Actor, sku_id: int, expected_revision: int | None = None
) -> Sku | None:
    """Delete an unreferenced SKU (returns None); disable a referenced one (returns it)."""
    with transaction.atomic():
        sku = lock(Sku.objects.all(), sku_id, "SKU")
        check_revision(sku, expected_revision)
        before = audit.snapshot(sku)
        try:
            with transaction.atomic():
                sku.delete()
        except (ProtectedError, RestrictedError):
            if sku.active:
                sku.active = False
                save_revisioned(sku)
                audit.record(actor=actor, action="sku.disable", target=sku, before=before,
                             after=audit.snapshot(sku))  # fmt: skip
            return sku
        audit.record(actor=actor, action="sku.delete", target=("maas_domain.sku", sku_id),
                     before=before)  # fmt: skip
    return None

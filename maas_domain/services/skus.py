"""SKUs: create and update (audited). SKUs are never deleted: nodes and workflows refer to them."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from maas_domain import audit
from maas_domain.errors import Conflict
from maas_domain.models import Sku
from maas_domain.services.common import lock

FIELDS = ("code", "name", "gpu_model", "gpu_count", "active")


def sku_create(*, actor: audit.Actor, data: dict[str, Any]) -> Sku:
    with transaction.atomic():
        try:
            with transaction.atomic():
                sku = Sku.objects.create(**{k: v for k, v in data.items() if k in FIELDS})
        except IntegrityError as exc:
            raise Conflict(f"A SKU with code {data.get('code')!r} already exists.") from exc
        audit.record(actor=actor, action="sku.create", target=sku, after=audit.snapshot(sku))
    return sku


def sku_update(*, actor: audit.Actor, sku_id: int, changes: dict[str, Any]) -> Sku:
    with transaction.atomic():
        sku = lock(Sku.objects.all(), sku_id, "SKU")
        before = audit.snapshot(sku)
        for key, value in changes.items():
            if key in FIELDS:
                setattr(sku, key, value)
        try:
            with transaction.atomic():
                sku.save()
        except IntegrityError as exc:
            raise Conflict(f"A SKU with code {changes.get('code')!r} already exists.") from exc
        audit.record(
            actor=actor, action="sku.update", target=sku, before=before, after=audit.snapshot(sku)
        )
    return sku

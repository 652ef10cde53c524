"""RoCE assignments: all-or-nothing bulk upsert keyed by (site, hostname, interface)."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from maas_domain import audit
from maas_domain.errors import Conflict, InvalidInput, NotFound
from maas_domain.models import MaasSite, RoceAssignment
from maas_domain.validators import hostname_error, interface_error, ipv4_cidr_error

MAX_ITEMS = 5000
ITEM_FIELDS = ("hostname", "interface", "ipv4_cidr")
_CHECKS = {"hostname": hostname_error, "interface": interface_error, "ipv4_cidr": ipv4_cidr_error}


def _row_errors(items: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shape checks and in-request duplicates. Return (clean rows, errors)."""
    if not isinstance(items, list) or not items:
        raise InvalidInput("Invalid input.", fields={"items": ["Must be a non-empty list."]})
    if len(items) > MAX_ITEMS:
        raise InvalidInput("Invalid input.", fields={"items": [f"At most {MAX_ITEMS} rows."]})
    errors: list[dict[str, Any]] = []
    clean: list[dict[str, Any]] = []
    seen_key: dict[tuple[str, str], int] = {}
    seen_ip: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append({"index": index, "field": None, "reason": "Must be an object."})
            continue
        row_ok = True
        for key in sorted(set(item) - set(ITEM_FIELDS)):
            errors.append({"index": index, "field": key, "reason": "Unknown field."})
            row_ok = False
        for name in ITEM_FIELDS:
            if name not in item:
                errors.append({"index": index, "field": name, "reason": "This field is required."})
                row_ok = False
                continue
            reason = _CHECKS[name](item[name])
            if reason:
                errors.append({"index": index, "field": name, "reason": reason})
                row_ok = False
        if not row_ok:
            continue
        key = (item["hostname"], item["interface"])
        address = str(ipaddress.IPv4Interface(item["ipv4_cidr"]).ip)
        if key in seen_key:
            errors.append(
                {
                    "index": index,
                    "field": "interface",
                    "reason": f"Duplicate of row {seen_key[key]} ({key[0]}/{key[1]}).",
                }
            )
            continue
        if address in seen_ip:
            errors.append(
                {
                    "index": index,
                    "field": "ipv4_cidr",
                    "reason": f"Address {address} is also given in row {seen_ip[address]}.",
                }
            )
            continue
        seen_key[key] = index
        seen_ip[address] = index
        clean.append({**item, "ipv4_address": address, "index": index})
    return clean, errors


def roce_bulk_upsert(*, actor: audit.Actor, site: MaasSite, items: Any) -> dict[str, Any]:
    """Create or update every row, or none. Errors list row index, field and reason."""
    rows, errors = _row_errors(items)
    with transaction.atomic():
        # Serialise upserts per site so the collision check below sees a stable picture.
        MaasSite.objects.select_for_update().filter(pk=site.pk).first()
        existing = {(a.hostname, a.interface): a for a in site.roce_assignments.all()}
        incoming = {(r["hostname"], r["interface"]) for r in rows}
        # Addresses that stay in use after this request by rows the request does not rewrite.
        kept = {a.ipv4_address: key for key, a in existing.items() if key not in incoming}
        for row in rows:
            owner = kept.get(row["ipv4_address"])
            if owner is not None:
                errors.append(
                    {
                        "index": row["index"],
                        "field": "ipv4_cidr",
                        "reason": f"Address {row['ipv4_address']} is already assigned to "
                        f"{owner[0]}/{owner[1]} on this site.",
                    }
                )
        if errors:
            errors.sort(key=lambda e: e["index"])
            raise InvalidInput(f"{len(errors)} row error(s); nothing was changed.", rows=errors)
        created, updated, unchanged = [], [], []
        now = timezone.now()
        before = []
        for row in rows:
            current = existing.get((row["hostname"], row["interface"]))
            if current is None:
                created.append(
                    RoceAssignment(
                        site=site,
                        hostname=row["hostname"],
                        interface=row["interface"],
                        ipv4_cidr=row["ipv4_cidr"],
                        ipv4_address=row["ipv4_address"],
                    )
                )
            elif current.ipv4_cidr != row["ipv4_cidr"]:
                before.append(audit.snapshot(current))
                current.ipv4_cidr = row["ipv4_cidr"]
                current.ipv4_address = row["ipv4_address"]
                current.updated_at = now
                updated.append(current)
            else:
                unchanged.append(current)
        try:
            with transaction.atomic():
                RoceAssignment.objects.bulk_update(
                    updated, ["ipv4_cidr", "ipv4_address", "updated_at"], batch_size=500
                )
                RoceAssignment.objects.bulk_create(created, batch_size=500)
        except IntegrityError as exc:
            raise Conflict("A concurrent change collided with these assignments; retry.") from exc
        summary = {"created": len(created), "updated": len(updated), "unchanged": len(unchanged)}
        audit.record(
            actor=actor,
            action="roce.bulk_upsert",
            target=site,
            before={"updated": before},
            after={
                **summary,
                "items": [{k: r[k] for k in ITEM_FIELDS} for r in rows],
            },
        )
    return summary


def roce_delete(*, actor: audit.Actor, site: MaasSite, assignment_id: int) -> None:
    with transaction.atomic():
        row = RoceAssignment.objects.select_for_update().filter(site=site, pk=assignment_id).first()
        if row is None:
            raise NotFound(f"RoCE assignment {assignment_id} not found on site {site.name!r}.")
        before = audit.snapshot(row)
        row.delete()
        audit.record(
            actor=actor,
            action="roce.delete",
            target=("maas_domain.roceassignment", assignment_id),
            before=before,
        )

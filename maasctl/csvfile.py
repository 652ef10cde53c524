"""CSV files turned into API bodies, every row checked (with its line number) before any call.

The API is JSON only (docs/api.md); CSV is converted here. The header must be exactly the
expected columns. Each row is checked with the same rules the API applies
(maas_domain/validators.py); the API stays the authority, and row errors it reports are mapped
back to line numbers too.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maas_domain.validators import hostname_error, interface_error, ipv4_cidr_error, ipv4_error

Check = Callable[[object], "str | None"]
MAX_ROWS = 5000


@dataclass(frozen=True)
class RowError:
    line: int
    field: str
    reason: str


@dataclass(frozen=True)
class Rows:
    rows: list[dict[str, str]]
    lines: list[int]  # the file line of each row

    def line_of(self, index: Any) -> int | None:
        return (
            self.lines[index] if isinstance(index, int) and 0 <= index < len(self.lines) else None
        )


ONBOARD = {"hostname": hostname_error, "ipmi_ip": ipv4_error}
ROCE = {"hostname": hostname_error, "interface": interface_error, "ipv4_cidr": ipv4_cidr_error}
UNIQUE = {"hostname": "hostname", "ipmi_ip": "IPMI address", "ipv4_cidr": "address"}


def read(
    path: Path, checks: Mapping[str, Check], *, unique: tuple[str, ...]
) -> tuple[Rows, list[RowError]]:
    columns = list(checks)
    errors: list[RowError] = []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return Rows([], []), [RowError(0, "", f"cannot read {path}: {exc}")]
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None or [h.strip() for h in header] != columns:
        got = ",".join(header or [])
        return Rows([], []), [
            RowError(1, "", f"header must be exactly {','.join(columns)} (got {got!r})")
        ]
    rows: list[dict[str, str]] = []
    lines: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    for line, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue  # blank lines (a trailing newline) are not rows
        if len(cells) != len(columns):
            errors.append(RowError(line, "", f"expected {len(columns)} columns, got {len(cells)}"))
            continue
        row = {c: v.strip() for c, v in zip(columns, cells, strict=True)}
        for column, check in checks.items():
            if reason := check(row[column]):
                errors.append(RowError(line, column, reason))
        for column in unique:
            key = (column, row[column])
            if row[column] and key in seen:
                what = UNIQUE.get(column, column)
                errors.append(RowError(line, column, f"same {what} as line {seen[key]}"))
            seen.setdefault(key, line)
        rows.append(row)
        lines.append(line)
    if not rows and not errors:
        errors.append(RowError(2, "", "no rows"))
    if len(rows) > MAX_ROWS:
        errors.append(RowError(lines[MAX_ROWS], "", f"at most {MAX_ROWS} rows per file"))
    return Rows(rows, lines), errors


def idempotency_key(prefix: str, body: dict[str, Any]) -> str:
    """The same file with the same options is the same request: a re-run replays the first
    answer instead of starting anything twice."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return f"maasctl-{prefix}-{digest[:40]}"

"""Request faults the simulator applies before dispatch (docs/simulator.md, "Faults")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FAULT_KINDS = ("503", "409", "502", "slow", "drop_after_apply")


@dataclass
class RequestFault:
    kind: str
    count: int = 1
    method: str | None = None
    op: str | None = None
    system_id: str | None = None
    retry_after: int = 1
    delay: float = 0.0  # real seconds, for "slow"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestFault:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown request fault fields: {sorted(unknown)}")
        fault = cls(**data)
        if fault.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}")
        return fault

    def matches(self, method: str, op: str | None, path: str) -> bool:
        return (
            self.count > 0
            and (self.method is None or self.method == method)
            and (self.op is None or self.op == op)
            and (self.system_id is None or f"/{self.system_id}/" in path)
        )

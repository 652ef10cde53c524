"""Faults: per machine (a deploy that never finishes, a failed erase, an unreachable BMC, …)
and per request, matched before dispatch (docs/simulator.md, "Machine faults", "Request faults")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from maas_simulator.nodes import Machine

FAULT_KINDS = ("503", "409", "502", "slow", "drop_after_apply", "503_after_apply")


@dataclass
class RequestFault:
    kind: str
    count: int = 1
    method: str | None = None
    op: str | None = None
    system_id: str | None = None
    # the Retry-After header of 503 (MAAS's RETRY_AFTER_SERVICE_UNAVAILABLE, 10) and 409 (its
    # RETRY_AFTER_CONFLICT, 5); None: sent without one
    retry_after: int | None = None
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


@dataclass
class MachineFaults:
    """Per-machine faults. Lists name the operation ordinals that fail (1 = the first)."""

    deploy_datasource_failure: list[int] = field(default_factory=list)
    deploy_curtin_failure: list[int] = field(default_factory=list)
    commission_failure: list[int] = field(default_factory=list)
    erase_failure: list[int] = field(default_factory=list)
    release_stuck: bool = False
    bmc_unreachable: bool = False
    pxe_unlinked: bool = False
    pxe_wrong_subnet: int | None = None  # subnet id the boot interface lands on instead
    enlist_on_power_cycle: bool = False  # an unknown machine appears (NEW) once powered
    node_network_unreachable: bool = False  # URL checks of testing scripts time out (testing.py)
    # hardware (docs/simulator.md, "Machine faults")
    gpu_missing: int = 0  # commissioning finds this many fewer GPUs: off the bus
    nic_slow: dict[str, int] = field(default_factory=dict)  # NIC name → negotiated Mbit/s
    script_fails: list[str] = field(default_factory=list)  # testing scripts that exit 1
    script_hangs: list[str] = field(default_factory=list)  # testing scripts that never report
    # what testing scripts print, by name: such a script fetches no URL (the node side as played)
    script_outputs: dict[str, str] = field(default_factory=dict)
    gpu_lost_after_deploy: int = 0  # the first hardware sync after deploy finds fewer GPUs
    hw_sync_stops: bool = False  # no hardware sync after deploy's first stamp
    erase_fails: list[str] = field(default_factory=list)  # disks (kernel names) wipe-disks fails

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineFaults:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown machine faults: {sorted(unknown)}")
        fault = cls(**data)
        for name in ("gpu_missing", "gpu_lost_after_deploy"):
            if not isinstance(getattr(fault, name), int) or getattr(fault, name) < 0:
                raise ValueError(f"machine fault {name} must be a count (0 or more)")
        if not isinstance(fault.nic_slow, dict) or not all(
            isinstance(v, int) and v >= 0 for v in fault.nic_slow.values()
        ):
            raise ValueError("machine fault nic_slow maps NIC names to Mbit/s")
        if not isinstance(fault.script_outputs, dict) or not all(
            isinstance(v, str) for v in fault.script_outputs.values()
        ):
            raise ValueError("machine fault script_outputs maps script names to their output")
        for name in ("script_fails", "script_hangs", "erase_fails"):
            value = getattr(fault, name)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"machine fault {name} must be a list of names")
        return fault

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# The hardware faults a repair fixes: the parts are replaced or reseated.
HARDWARE_FAULTS = (
    "gpu_missing", "gpu_lost_after_deploy", "nic_slow", "script_fails", "script_hangs",
    "erase_fails",
)  # fmt: skip


def repair(m: Machine) -> None:
    """What a vendor's repair does to the box: every failed part replaced or reseated. MAAS
    learns it only at the next commissioning (its node devices and the machine's facts stay as
    MAAS last read them), as on a real site (docs/simulator.md, "Control endpoint")."""
    m.faults = replace(
        m.faults, **{name: type(getattr(m.faults, name))() for name in HARDWARE_FAULTS}
    )
    m.hardware.gpus_lost = 0

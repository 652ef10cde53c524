"""SKU hardware profiles: what every machine of a SKU must have, checked at the door of every
profile write, and the judgement of a machine's commissioning facts against it
(docs/hardware.md).

A SKU states its GPUs in ``gpu_count`` and ``gpu_model`` (what SKUs always stated) and the rest
in ``hardware``, a JSON object of these sections, all optional::

    gpu:      {pci_ids: ["10de:2330"], per_numa_node: {"0": 4, "1": 4}}
    cpu:      {min: 112, max: 224}                   logical threads, as MAAS counts them
    memory:   {min_gib: 1900}
    nics:     [{role: fabric, count: 8, min_speed_mbps: 400000, vendor: Mellanox},
               {role: pxe, pxe: true, count: 1, min_speed_mbps: 25000}]
    disks:    [{count: 2, min_size_gb: 3800, type: nvme}]
    firmware: {mainboard_firmware_version: ["2.1.0", "2.1.1"]}

GPUs are an exact count; NICs and disks are "at least ``count`` matching, each at least as
fast or as big"; a gpu_count of 0 says nothing about GPUs. GPUs are counted by PCI id when the
profile names ids, else by accelerator vendor (a BMC's VGA function is a GPU to MAAS too, and is
never counted), and their model is matched against MAAS's product name.

Pure functions over the MAAS client's hardware types: the onboarding conformance stage and
reconciliation's hardware drift both judge with ``judge``.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from maas_client.hardware import GPU, MachineHardware, Nic, NodeDevice
from maas_domain.errors import InvalidInput

# PCI vendors whose display-class devices are accelerators (a BMC's ASPEED or Matrox VGA, also
# a "GPU" to MAAS, is not one of them).
ACCELERATOR_VENDORS = {"10de": "NVIDIA", "1002": "AMD", "1da3": "Habana"}
HARDWARE_INFO_KEYS = (
    "system_vendor", "system_product", "system_family", "system_version", "system_sku",
    "system_serial", "cpu_model", "mainboard_vendor", "mainboard_product", "mainboard_serial",
    "mainboard_version", "mainboard_firmware_vendor", "mainboard_firmware_date",
    "mainboard_firmware_version", "chassis_vendor", "chassis_type", "chassis_serial",
    "chassis_version",
)  # fmt: skip
DISK_TYPES = ("any", "nvme", "ssd", "rotary")
SECTIONS = ("gpu", "cpu", "memory", "nics", "disks", "firmware")
PCI_ID = re.compile(r"[0-9a-f]{4}:[0-9a-f]{4}")
ROLE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# Beyond these no machine exists: a profile asking for more can never be met.
MAX_CPUS = 8192
MAX_MEMORY_GIB = 64 * 1024
MAX_NIC_SPEED_MBPS = 1_600_000  # 1.6 Tbit/s
MAX_DEVICES = 64
MAX_DISK_GB = 1_000_000
MAX_TEXT = 128


# -- validation ----------------------------------------------------------------------------------


class _Errors:
    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, path: str, reason: str) -> None:
        self.fields.setdefault(f"hardware.{path}" if path else "hardware", []).append(reason)


def _object(value: Any, path: str, keys: Sequence[str], errors: _Errors) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        errors.add(path, "Must be an object.")
        return None
    for key in sorted(set(value) - set(keys)):
        errors.add(
            f"{path}.{key}" if path else str(key), f"Unknown field; one of: {', '.join(keys)}."
        )
    return value


def _int(
    value: Any, path: str, errors: _Errors, *, low: int, high: int, required: bool = True
) -> int | None:
    if value is None:
        if required:
            errors.add(path, "Required.")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errors.add(path, "Must be an integer.")
        return None
    if not low <= value <= high:
        errors.add(path, f"Must be between {low} and {high}.")
        return None
    return value


def _text(value: Any, path: str, errors: _Errors) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        errors.add(path, f"Must be a non-empty string of at most {MAX_TEXT} characters.")
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        errors.add(path, "Must not contain control characters.")
        return None
    return value


def validate_profile(value: Any, *, gpu_count: int, gpu_model: str) -> dict[str, Any]:
    """The clean profile, or InvalidInput naming each bad field (``hardware.<path>``): unknown
    keys, values of the wrong type or out of range, and contradictions (min above max, GPUs per
    NUMA node that do not add up to the count)."""
    errors = _Errors()
    profile = _object(value, "", SECTIONS, errors)
    if profile is None:
        raise InvalidInput("Invalid hardware profile.", fields=errors.fields)
    clean: dict[str, Any] = {}
    if (gpu := profile.get("gpu")) is not None:
        clean["gpu"] = _gpu(gpu, errors, gpu_count=gpu_count, gpu_model=gpu_model)
    if (cpu := profile.get("cpu")) is not None and _object(
        cpu, "cpu", ("min", "max"), errors
    ) is not None:
        low = _int(cpu.get("min"), "cpu.min", errors, low=1, high=MAX_CPUS, required=False)
        high = _int(cpu.get("max"), "cpu.max", errors, low=1, high=MAX_CPUS, required=False)
        if cpu.get("min") is None and cpu.get("max") is None:
            errors.add("cpu", "Give min, max or both.")
        if low is not None and high is not None and low > high:
            errors.add("cpu.min", f"Above cpu.max ({high}): no machine could have both.")
        clean["cpu"] = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
    if (memory := profile.get("memory")) is not None and _object(
        memory, "memory", ("min_gib",), errors
    ) is not None:
        gib = _int(memory.get("min_gib"), "memory.min_gib", errors, low=1, high=MAX_MEMORY_GIB)
        clean["memory"] = {"min_gib": gib}
    if (nics := profile.get("nics")) is not None:
        clean["nics"] = _nics(nics, errors)
    if (disks := profile.get("disks")) is not None:
        clean["disks"] = _disks(disks, errors)
    if (firmware := profile.get("firmware")) is not None:
        clean["firmware"] = _firmware(firmware, errors)
    if errors.fields:
        raise InvalidInput("Invalid hardware profile.", fields=errors.fields)
    return {k: v for k, v in clean.items() if v not in (None, {}, [])}


def _gpu(value: Any, errors: _Errors, *, gpu_count: int, gpu_model: str) -> dict[str, Any]:
    gpu = _object(value, "gpu", ("pci_ids", "per_numa_node"), errors)
    if gpu is None:
        return {}
    if gpu_count <= 0:
        errors.add("gpu", "GPU requirements need a gpu_count above 0 (the exact GPU count).")
    clean: dict[str, Any] = {}
    if (ids := gpu.get("pci_ids")) is not None and (pci_ids := _gpu_pci_ids(ids, errors)):
        clean["pci_ids"] = pci_ids
    if (per_numa := gpu.get("per_numa_node")) is not None and (
        counts := _gpu_per_numa_node(per_numa, errors, gpu_count=gpu_count)
    ) is not None:
        clean["per_numa_node"] = counts
    return clean


def _gpu_pci_ids(ids: Any, errors: _Errors) -> list[str] | None:
    if not isinstance(ids, list) or not ids or len(ids) > 16:
        errors.add("gpu.pci_ids", "Must be a list of 1 to 16 vendor:product ids.")
        return None
    bad = [i for i in ids if not isinstance(i, str) or not PCI_ID.fullmatch(i)]
    if bad:
        errors.add("gpu.pci_ids", f"Not a PCI id (4 lower-case hex digits, ':', 4): {bad[0]!r}.")
        return None
    return sorted(set(ids))


def _gpu_per_numa_node(per_numa: Any, errors: _Errors, *, gpu_count: int) -> dict[str, int] | None:
    if not isinstance(per_numa, dict) or not per_numa:
        errors.add("gpu.per_numa_node", "Must be an object of NUMA index to GPU count.")
        return None
    counts: dict[str, int] = {}
    for node, count in per_numa.items():
        path = f"gpu.per_numa_node.{node}"
        if not (isinstance(node, str) and node.isascii() and node.isdigit() and len(node) <= 3):
            errors.add(path, "A NUMA index is a whole number (0, 1, …).")
            continue
        got = _int(count, path, errors, low=0, high=MAX_DEVICES)
        if got is not None:
            counts[str(int(node))] = got
    if len(counts) == len(per_numa) and gpu_count > 0 and sum(counts.values()) != gpu_count:
        errors.add(
            "gpu.per_numa_node",
            f"Adds up to {sum(counts.values())} GPUs; the SKU's gpu_count is {gpu_count}.",
        )
    return counts


def _nics(value: Any, errors: _Errors) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > 16:
        errors.add("nics", "Must be a list of at most 16 NIC requirements.")
        return []
    keys = ("role", "count", "min_speed_mbps", "vendor", "product", "name", "pxe")
    clean, roles, pxe_roles = [], Counter[str](), 0
    for i, item in enumerate(value):
        path = f"nics.{i}"
        if _object(item, path, keys, errors) is None:
            continue
        role = item.get("role")
        if not isinstance(role, str) or not ROLE.fullmatch(role):
            errors.add(f"{path}.role", "A role is 1-32 lower-case letters, digits, '-', '_'.")
        roles[str(role)] += 1
        pxe = item.get("pxe", False)
        if not isinstance(pxe, bool):
            errors.add(f"{path}.pxe", "Must be true or false.")
        count = _int(item.get("count"), f"{path}.count", errors, low=1, high=MAX_DEVICES)
        speed = _int(
            item.get("min_speed_mbps"), f"{path}.min_speed_mbps", errors,
            low=1, high=MAX_NIC_SPEED_MBPS, required=False,
        )  # fmt: skip
        if pxe is True:
            pxe_roles += 1
            if count not in (None, 1):
                errors.add(f"{path}.count", "A machine boots from one NIC: the pxe count is 1.")
            if any(item.get(k) is not None for k in ("vendor", "product", "name")):
                errors.add(f"{path}.pxe", "The PXE NIC is the boot interface; it takes no match.")
        entry: dict[str, Any] = {"role": role, "count": count}
        if pxe is True:
            entry["pxe"] = True
        if speed is not None:
            entry["min_speed_mbps"] = speed
        for key in ("vendor", "product", "name"):
            if (text := _text(item.get(key), f"{path}.{key}", errors)) is not None:
                entry[key] = text
        clean.append(entry)
    for role, n in roles.items():
        if n > 1:
            errors.add("nics", f"Role {role!r} is given {n} times; each role once.")
    if pxe_roles > 1:
        errors.add("nics", "Only one requirement can be the PXE (boot) NIC.")
    return clean


def _disks(value: Any, errors: _Errors) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > 16:
        errors.add("disks", "Must be a list of at most 16 disk requirements.")
        return []
    clean = []
    for i, item in enumerate(value):
        path = f"disks.{i}"
        if _object(item, path, ("count", "min_size_gb", "type", "model"), errors) is None:
            continue
        count = _int(item.get("count"), f"{path}.count", errors, low=1, high=MAX_DEVICES)
        size = _int(
            item.get("min_size_gb"), f"{path}.min_size_gb", errors, low=1, high=MAX_DISK_GB,
            required=False,
        )  # fmt: skip
        kind = item.get("type", "any")
        if kind not in DISK_TYPES:
            errors.add(f"{path}.type", f"One of: {', '.join(DISK_TYPES)}.")
        entry: dict[str, Any] = {"count": count, "type": kind}
        if size is not None:
            entry["min_size_gb"] = size
        if (model := _text(item.get("model"), f"{path}.model", errors)) is not None:
            entry["model"] = model
        clean.append(entry)
    return clean


def _firmware(value: Any, errors: _Errors) -> dict[str, list[str]]:
    firmware = _object(value, "firmware", HARDWARE_INFO_KEYS, errors)
    if firmware is None:
        return {}
    clean = {}
    for key, allowed in firmware.items():
        if key not in HARDWARE_INFO_KEYS:
            continue
        values = [allowed] if isinstance(allowed, str) else allowed
        if (
            not isinstance(values, list)
            or not values
            or len(values) > 16
            or any(_text(v, f"firmware.{key}", errors) is None for v in values)
        ):
            errors.add(f"firmware.{key}", "A value or a list of 1 to 16 allowed values.")
            continue
        clean[key] = list(values)
    return clean


# -- judging -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One requirement: what the SKU asks, what MAAS shows, and whether it holds."""

    requirement: str
    expected: str
    observed: str
    passed: bool


def states_requirements(gpu_count: int, hardware: Mapping[str, Any]) -> bool:
    return gpu_count > 0 or bool(hardware)


def needs_devices(gpu_count: int) -> bool:
    """Whether judging needs the machine's PCI devices (only GPUs are judged from them)."""
    return gpu_count > 0


def judge(
    *,
    gpu_count: int,
    gpu_model: str,
    hardware: Mapping[str, Any],
    machine: MachineHardware,
    devices: Sequence[NodeDevice] | None,
) -> list[Check]:
    """Every requirement of the profile against what MAAS shows of the machine."""
    checks: list[Check] = []
    if gpu_count > 0:
        checks += _judge_gpus(gpu_count, gpu_model, hardware.get("gpu") or {}, devices or ())
    if cpu := hardware.get("cpu"):
        low, high = cpu.get("min"), cpu.get("max")
        expected = " to ".join(str(v) for v in (low, high) if v is not None)
        expected = f"{'at least ' if high is None else 'at most ' if low is None else ''}{expected}"
        ok = (low is None or machine.cpu_count >= low) and (
            high is None or machine.cpu_count <= high
        )
        checks.append(Check("cpu.count", f"{expected} logical CPUs", str(machine.cpu_count), ok))
    if memory := hardware.get("memory"):
        need = memory["min_gib"] * 1024
        checks.append(
            Check(
                "memory", f"at least {memory['min_gib']} GiB", _gib(machine.memory),
                machine.memory >= need,
            )
        )  # fmt: skip
    for nic in hardware.get("nics") or ():
        checks.append(_judge_nics(nic, machine))
    for i, disk in enumerate(hardware.get("disks") or ()):
        checks.append(_judge_disks(i, disk, machine))
    for key, allowed in (hardware.get("firmware") or {}).items():
        seen = machine.hardware_info.get(key, "Unknown")
        checks.append(Check(f"firmware.{key}", " or ".join(allowed), seen, seen in allowed))
    return checks


def _judge_gpus(
    count: int, model: str, profile: Mapping[str, Any], devices: Sequence[NodeDevice]
) -> list[Check]:
    """One check per GPU requirement: the count always, the model and the NUMA spread when
    the SKU states them."""
    counted, what = _counted_gpus(count, profile, devices)
    checks = [_judge_gpu_count(count, what, counted, devices)]
    if model:
        checks.append(_judge_gpu_model(model, counted))
    if per_numa := profile.get("per_numa_node"):
        checks.append(_judge_gpu_numa(per_numa, counted))
    return checks


def _counted_gpus(
    count: int, profile: Mapping[str, Any], devices: Sequence[NodeDevice]
) -> tuple[list[NodeDevice], str]:
    """The devices that count as the SKU's GPUs (by PCI id when the profile names ids, else by
    accelerator vendor) and what the count check expects, in words."""
    if ids := set(profile.get("pci_ids") or ()):
        return [d for d in devices if d.pci_id in ids], f"{count} x {' or '.join(sorted(ids))}"
    counted = [d for d in devices if d.hardware_type == GPU and d.vendor_id in ACCELERATOR_VENDORS]
    return counted, f"{count} accelerator GPUs ({', '.join(ACCELERATOR_VENDORS.values())})"


def _judge_gpu_count(
    count: int, what: str, counted: Sequence[NodeDevice], devices: Sequence[NodeDevice]
) -> Check:
    ignored = [d for d in devices if d.hardware_type == GPU and d not in counted]
    observed = f"{len(counted)}"
    if ignored:
        observed += f"; not counted: {', '.join(d.describe() for d in ignored)[:300]}"
    return Check("gpu.count", what, observed, len(counted) == count)


def _judge_gpu_model(model: str, counted: Sequence[NodeDevice]) -> Check:
    wanted = model.casefold()
    off = [d for d in counted if wanted not in d.product_name.casefold()]
    names = sorted({d.product_name or d.pci_id for d in counted})
    return Check(
        "gpu.model",
        f"every GPU a {model}",
        ", ".join(names) or "no GPUs",
        not off and bool(counted),
    )


def _judge_gpu_numa(per_numa: Mapping[str, int], counted: Sequence[NodeDevice]) -> Check:
    seen = Counter(str(d.numa_node) for d in counted)
    expected = ", ".join(f"NUMA {n}: {c}" for n, c in sorted(per_numa.items()))
    observed = ", ".join(f"NUMA {n}: {c}" for n, c in sorted(seen.items())) or "none"
    ok = all(seen.get(n, 0) == c for n, c in per_numa.items()) and sum(seen.values()) == sum(
        per_numa.values()
    )
    return Check("gpu.per_numa_node", expected, observed, ok)


def _nic_matches(nic: Nic, requirement: Mapping[str, Any], machine: MachineHardware) -> bool:
    if requirement.get("pxe"):
        return nic.id == machine.boot_interface_id
    if nic.id == machine.boot_interface_id and not any(
        requirement.get(k) for k in ("vendor", "product", "name")
    ):
        return False  # a role with no match means the NICs other than the boot one
    vendor, product, name = (requirement.get(k) for k in ("vendor", "product", "name"))
    return (
        (not vendor or vendor.casefold() in nic.vendor.casefold())
        and (not product or product.casefold() in nic.product.casefold())
        and (not name or fnmatch.fnmatchcase(nic.name, name))
    )


def _judge_nics(requirement: Mapping[str, Any], machine: MachineHardware) -> Check:
    matched = [n for n in machine.nics if _nic_matches(n, requirement, machine)]
    need = requirement.get("min_speed_mbps") or 0
    fast = [n for n in matched if n.link_connected and n.link_speed >= need]
    slow = [n for n in matched if n not in fast]
    speed = f" at ≥ {_speed(need)}" if need else " with a link"
    match = ", ".join(
        f"{k} {requirement[k]!r}" for k in ("vendor", "product", "name") if requirement.get(k)
    )
    expected = f"{requirement['count']} NIC{'s' if requirement['count'] != 1 else ''}{speed}"
    expected += " (the boot NIC)" if requirement.get("pxe") else f" ({match})" if match else ""
    observed = f"{len(fast)} of {len(matched)} matching"
    if slow:
        shown = ", ".join(
            f"{n.name} {'at ' + _speed(n.link_speed) if n.link_connected else 'no link'}"
            for n in slow
        )
        observed += f"; short: {shown[:300]}"
    return Check(
        f"nics.{requirement['role']}", expected, observed, len(fast) >= requirement["count"]
    )


def _disk_kind(tags: Sequence[str], name: str) -> set[str]:
    kinds = {"any"} | {t for t in tags if t in ("ssd", "rotary")}
    if name.startswith("nvme"):
        kinds |= {"nvme", "ssd"}
    return kinds


def _judge_disks(index: int, requirement: Mapping[str, Any], machine: MachineHardware) -> Check:
    kind, model = requirement["type"], requirement.get("model")
    matched = [
        d
        for d in machine.disks
        if kind in _disk_kind(d.tags, d.name)
        and (not model or model.casefold() in d.model.casefold())
    ]
    need = (requirement.get("min_size_gb") or 0) * 10**9
    big = [d for d in matched if d.size >= need]
    size = f" of ≥ {requirement['min_size_gb']} GB" if need else ""
    expected = f"{requirement['count']} {'' if kind == 'any' else kind + ' '}disks{size}"
    expected += f" (model {model!r})" if model else ""
    observed = f"{len(big)} of {len(matched)} matching"
    if small := [d for d in matched if d not in big]:
        observed += "; small: " + ", ".join(f"{d.name} {d.size / 1e9:.0f} GB" for d in small)[:300]
    return Check(f"disks.{index}", expected, observed, len(big) >= requirement["count"])


def _speed(mbps: int) -> str:
    if mbps >= 1000 and mbps % 1000 == 0:
        return f"{mbps // 1000}G"
    return f"{mbps}M" if mbps < 1000 else f"{mbps / 1000:g}G"


def _gib(mib: int) -> str:
    return f"{mib / 1024:g} GiB"


def report(checks: Sequence[Check], **facts: Any) -> dict[str, Any]:
    """The stored form: ``conformant`` and each check, plus what identifies the judgement."""
    return {
        **facts,
        "conformant": all(c.passed for c in checks),
        "checks": [asdict(c) for c in checks],
    }


def failed_summary(checks: Sequence[Check]) -> str:
    """The failing checks in one line: ``gpu.count: expected 8 …, observed 7``."""
    return "; ".join(
        f"{c.requirement}: expected {c.expected}, observed {c.observed}"
        for c in checks
        if not c.passed
    )


# -- the profile as the OpenAPI document declares it ---------------------------------------------

_COUNT = {"type": "integer", "minimum": 1, "maximum": MAX_DEVICES}
_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}
PROFILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "The SKU's hardware profile besides gpu_count and gpu_model "
    "(docs/hardware.md); replaced as a whole on update.",
    "properties": {
        "gpu": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "pci_ids": {
                    "type": "array",
                    "items": {"type": "string", "pattern": f"^{PCI_ID.pattern}$"},
                    "minItems": 1,
                    "maxItems": 16,
                },
                "per_numa_node": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                    "description": "NUMA index → GPUs on it; adds up to gpu_count.",
                },
            },
        },
        "cpu": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "min": {"type": "integer", "minimum": 1, "maximum": MAX_CPUS},
                "max": {"type": "integer", "minimum": 1, "maximum": MAX_CPUS},
            },
        },
        "memory": {
            "type": "object",
            "additionalProperties": False,
            "required": ["min_gib"],
            "properties": {"min_gib": {"type": "integer", "minimum": 1, "maximum": MAX_MEMORY_GIB}},
        },
        "nics": {
            "type": "array",
            "maxItems": 16,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["role", "count"],
                "properties": {
                    "role": {"type": "string", "pattern": f"^{ROLE.pattern}$"},
                    "count": _COUNT,
                    "min_speed_mbps": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_NIC_SPEED_MBPS,
                    },
                    "vendor": _TEXT,
                    "product": _TEXT,
                    "name": {**_TEXT, "description": "A glob on the interface name."},
                    "pxe": {"type": "boolean", "description": "The boot interface."},
                },
            },
        },
        "disks": {
            "type": "array",
            "maxItems": 16,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["count"],
                "properties": {
                    "count": _COUNT,
                    "min_size_gb": {"type": "integer", "minimum": 1, "maximum": MAX_DISK_GB},
                    "type": {"type": "string", "enum": list(DISK_TYPES)},
                    "model": _TEXT,
                },
            },
        },
        "firmware": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                key: {"oneOf": [_TEXT, {"type": "array", "items": _TEXT, "minItems": 1}]}
                for key in HARDWARE_INFO_KEYS
            },
        },
    },
}

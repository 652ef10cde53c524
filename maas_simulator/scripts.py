"""The region's script catalogue (``scripts/``): MAAS 3.5's built-in testing scripts and
``wipe-disks``, plus the testing scripts a scenario uploads (docs/simulator.md, "Testing
scripts and results").

A script is data: what MAAS stores of it (its fields and the tags its model maintains) and what
its parameters are. Which scripts run on a machine, with which parameters, is worked out in
``scriptsets.py``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import yaml

from maas_simulator.hardware import (
    CPU,
    HARDWARE_TYPES,
    MEMORY,
    NETWORK,
    NODE,
    STORAGE,
    BadChoice,
    translate_hardware_type,
)

COMMISSIONING, TESTING, RELEASE = 0, 2, 3
SCRIPT_TYPE_NAMES = {
    COMMISSIONING: "Commissioning script",
    TESTING: "Testing script",
    RELEASE: "Release script",
}
# SCRIPT_PARALLEL_CHOICES' labels (what ``parallel_name`` shows, recorded against MAAS 3.5.10), and
# the metadata words a script's text uses for them
PARALLEL_NAMES = {
    0: "Disabled",
    1: "Run along other instances of this script",
    2: "Run along any other script.",
}
PARALLEL_WORDS = {0: "disabled", 1: "instance", 2: "any"}
PARAMETER_TYPES = (
    "boolean",
    "choice",
    "interface",
    "password",
    "runtime",
    "storage",
    "string",
    "url",
)
FOR_HARDWARE = re.compile(
    r"^(pci|usb):[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$|^modalias:.+$"
    r"|^(system_vendor|system_product|system_version|mainboard_vendor|mainboard_product):.+$"
)
MAAS_VERSION = "3.5.10"


def translate_script_type(value: str) -> int:
    """``translate_script_type``: a number or a name, else MAAS's texts."""
    if value.isdigit():
        if int(value) in SCRIPT_TYPE_NAMES:
            return int(value)
        raise BadChoice("Invalid script type numeric value.")
    names = {"test": TESTING, "testing": TESTING, "commission": COMMISSIONING}
    names |= {"commissioning": COMMISSIONING, "release": RELEASE}
    if value in names:
        return names[value]
    raise BadChoice("Script type must be commissioning, testing or release")


def duration(seconds: int) -> str:
    """A ``DurationField`` as piston renders it: ``str(timedelta)`` (``0:05:00``)."""
    return str(timedelta(seconds=seconds))


def parse_duration(value: Any) -> int:
    """A timeout as a scenario gives it: seconds, or ``H:MM:SS``."""
    if isinstance(value, int):
        return value
    parts = str(value).split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"timeout {value!r} must be seconds or H:MM:SS")
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


@dataclass
class Script:
    """A ``Script`` row (and the one revision of its text the simulator keeps)."""

    id: int
    name: str
    type: int = TESTING
    title: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    hardware_type: int = NODE
    parallel: int = 0
    results: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, Any] = field(default_factory=dict)
    timeout: int = 0  # seconds; 0: no limit
    destructive: bool = False
    for_hardware: list[str] = field(default_factory=list)
    may_reboot: bool = False
    recommission: bool = False
    default: bool = False
    apply_configured_networking: bool = False
    revision_id: int = 0
    created: float = 0.0
    comment: str | None = None

    def __post_init__(self) -> None:
        """``Script.save``: the ``destructive`` tag follows the flag, and the lower-cased label
        of the hardware type is the one hardware-type tag (another type's label goes)."""
        labels = {label.lower() for label, _ in HARDWARE_TYPES.values()}
        own = HARDWARE_TYPES[self.hardware_type][0].lower()
        tags = [t for t in self.tags if t not in labels or t == own]
        tags = [t for t in tags if t != "destructive"]
        if self.destructive:
            tags.append("destructive")
        if own not in tags:
            tags.append(own)
        self.tags = list(dict.fromkeys(tags))

    def body(self) -> str:
        """The script's text: its metadata block and a body that stands for it."""
        metadata: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "tags": self.tags,
            "script_type": {0: "commissioning", 2: "testing", 3: "release"}[self.type],
            "hardware_type": HARDWARE_TYPES[self.hardware_type][0].lower(),
            "parallel": PARALLEL_WORDS[self.parallel],
            "timeout": duration(self.timeout),
            "destructive": self.destructive,
        }
        for key in ("parameters", "results", "packages", "for_hardware"):
            if getattr(self, key):
                metadata[key] = getattr(self, key)
        block = yaml.safe_dump(metadata, sort_keys=False).splitlines()
        lines = [
            "#!/bin/bash",
            "# --- Start MAAS 1.0 script metadata ---",
            *(f"# {line}" for line in block),
            "# --- End MAAS 1.0 script metadata ---",
            f'echo "{self.name}: run by the MAAS simulator"',
        ]
        return "\n".join(lines) + "\n"

    def has_parameter_type(self, kind: str) -> bool:
        return any(p.get("type") == kind for p in self.parameters.values())


STORAGE_PARAM = {"storage": {"type": "storage", "argument_format": "{path}"}}
INTERFACE_PARAM = {"interface": {"type": "interface"}}
BADBLOCKS_RESULTS = {
    "badblocks": {
        "title": "Bad blocks",
        "description": "The number of bad blocks found on the storage device.",
    },
    "read_errors": {
        "title": "Bad blocks read errors",
        "description": "The number of bad blocks read errors found on the storage device.\n",
    },
    "write_errors": {
        "title": "Bad blocks write errors",
        "description": "The number of bad blocks write errors found on the storage device.\n",
    },
    "comparison_errors": {
        "title": "Bad blocks comparison errors",
        "description": (
            "The number of bad blocks comparison errors found on the storage device.\n"
        ),
    },
}
FIO_RESULTS = {
    f"{kind}_{op}{iops}": {
        "title": f"{kind.capitalize()} {op}{' IOPS' if iops else ''}",
        "description": f"{'IOPS' if iops else 'Speed'} when {op}ing {kind}ly.",
    }
    for kind in ("random", "sequential")
    for op in ("read", "write")
    for iops in ("", "_iops")
}
SEVEN_Z_RESULTS = {  # the 7z script's metadata (recorded against MAAS 3.5.10)
    f"{what}_{kind}_mips": {
        "title": f"{what.capitalize()} {'RU' if kind == 'ru' else 'Rating'} MIPS",
        "description": (
            f"{what.capitalize()} rating normalized for 100% of CPU usage. This shows the "
            "performance of one average CPU thread.\n"
            if kind == "ru"
            else f"{what.capitalize()} rating for CPU usage. This shows the performance of all "
            "CPU threads combined.\n"
        ),
    }
    for what in ("compression", "decompression")
    for kind in ("ru", "rating")
}
SMARTCTL = "Run the {} SMART self-test and validate SMART health on all drives in parallel"
URL_DESCRIPTION = (
    "A comma separated list of URLs, IPs, or domains to test if all the interfaces have access "
    "to. Any protocol supported by curl is supported. If no protocol or icmp is given the URL "
    "will be pinged."
)


def _commissioning(
    name: str,
    title: str,
    timeout: int,
    *,
    tags: tuple[str, ...] = (),
    parallel: int = 0,
    apt: tuple[str, ...] = (),
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "type": COMMISSIONING,
        "title": title,
        "description": description or title,
        "tags": list(tags),
        "parallel": parallel,
        "timeout": timeout,
        "packages": {"apt": list(apt)} if apt else {},
        "parameters": parameters or {},
    }


# MAAS 3.5's 13 commissioning scripts, in the order its region creates them (their ids 1-13),
# with their metadata as recorded against MAAS 3.5.10 (site-reads.jsonl step 40).
COMMISSIONING_SCRIPTS: list[dict[str, Any]] = [
    _commissioning(
        "20-maas-01-install-lldpd",
        "Install and configure lldpd for passive capture.",
        30,
        apt=("lldpd",),
    ),
    _commissioning(
        "20-maas-02-dhcp-unconfigured-ifaces", "Bring up and run DHCP on all interfaces", 10
    ),
    _commissioning(
        "30-maas-01-bmc-config",
        "Detect and configure BMC's for MAAS use.",
        300,
        tags=("bmc-config",),
        apt=("freeipmi-tools", "ipmitool", "python3-paramiko"),
        description="Detect and configure BMC credentials for MAAS use.",
        parameters={
            "maas_auto_ipmi_user": {
                "max": 20,
                "type": "string",
                "argument_format": "--username={input}",
            },
            "maas_auto_ipmi_k_g_bmc_key": {
                "max": 20,
                "type": "password",
                "argument_format": "--ipmi-k-g={input}",
            },
            "maas_auto_ipmi_user_password": {
                "max": 20,
                "type": "password",
                "argument_format": "--password={input}",
            },
            "maas_auto_ipmi_cipher_suite_id": {
                "max": 2,
                "type": "string",
                "argument_format": "--ipmi-cipher-suite-id={input}",
            },
            "maas_auto_ipmi_user_privilege_level": {
                "type": "choice",
                "choices": [["USER", "User"], ["OPERATOR", "Operator"], ["ADMIN", "Administrator"]],
                "argument_format": "--ipmi-privilege-level={input}",
            },
        },
    ),
    _commissioning(
        "20-maas-03-machine-resources",
        "Download and run binary to collect machine details",
        60,
        tags=("deploy-info",),
    ),
    _commissioning("40-maas-01-machine-config-hints", "Generate machine configuration hints", 60),
    _commissioning(
        "50-maas-01-commissioning", "Gather all commissioning data", 60, tags=("deploy-info",)
    ),
    _commissioning(
        "maas-support-info",
        "Gather support information for the machine",
        300,
        tags=("deploy-info",),
        parallel=2,
    ),
    _commissioning("maas-lshw", "Capture lshw -xml output", 300, tags=("deploy-info",), parallel=2),
    _commissioning(
        "maas-list-modaliases",
        "Output all loaded modalises",
        10,
        tags=("deploy-info",),
        parallel=2,
        description="Output all loaded modaliases",
    ),
    _commissioning("maas-get-fruid-api-data", "Return discovered fruid API data", 60, parallel=2),
    _commissioning("maas-kernel-cmdline", "Capture the kernel command line", 10, parallel=2),
    _commissioning(
        "maas-serial-ports", "Discover all serial ports", 10, tags=("deploy-info",), parallel=2
    ),
    _commissioning(
        "maas-capture-lldpd",
        "Capture lldpd output",
        60,
        parallel=2,
        description="Capture lldp output",
    ),
]
# The commissioning scripts whose output hardware sync refreshes (tagged deploy-info)
DEPLOY_INFO = {s["name"] for s in COMMISSIONING_SCRIPTS if "deploy-info" in s["tags"]}

# The built-in scripts' metadata, in MAAS 3.5's order (builtin_scripts/__init__.py).
BUILTIN: list[dict[str, Any]] = [
    *COMMISSIONING_SCRIPTS,
    {
        "name": "smartctl-validate",
        "title": "Storage status",
        "description": "Validate SMART health for all drives in parallel.",
        "tags": ["commissioning"],
        "hardware_type": STORAGE,
        "parallel": 1,
        "parameters": STORAGE_PARAM,
        "packages": {"apt": ["smartmontools"]},
        "timeout": 300,
    },
    {
        "name": "smartctl-short",
        "title": "Storage integrity",
        "description": SMARTCTL.format("short"),
        "hardware_type": STORAGE,
        "parallel": 1,
        "parameters": STORAGE_PARAM,
        "packages": {"apt": ["smartmontools"]},
        "timeout": 600,
    },
    {
        "name": "smartctl-long",
        "title": "Storage integrity",
        "description": SMARTCTL.format("long"),
        "hardware_type": STORAGE,
        "parallel": 1,
        "parameters": STORAGE_PARAM,
        "packages": {"apt": ["smartmontools"]},
    },
    {
        "name": "smartctl-conveyance",
        "title": "Storage integrity",
        "description": SMARTCTL.format("conveyance"),
        "hardware_type": STORAGE,
        "parallel": 1,
        "parameters": STORAGE_PARAM,
        "packages": {"apt": ["smartmontools"]},
    },
    {
        "name": "memtester",
        "title": "Memory integrity",
        "description": "Run memtester against all available userspace memory.",
        "hardware_type": MEMORY,
        "packages": {"apt": ["memtester"]},
    },
    {
        "name": "stress-ng-cpu-long",
        "title": "CPU validation",
        "description": "Run stress-ng memory tests for 12 hours.",
        "hardware_type": CPU,
        "packages": {"apt": ["stress-ng"]},
        "timeout": 14 * 3600,
    },
    {
        "name": "stress-ng-cpu-short",
        "title": "CPU validation",
        "description": "Run stress-ng memory tests for 5 minutes.",
        "hardware_type": CPU,
        "packages": {"apt": ["stress-ng"]},
        "timeout": 300,
    },
    {
        "name": "stress-ng-memory-long",
        "title": "Memory integrity",
        "description": "Run stress-ng memory tests for 12 hours.",
        "hardware_type": MEMORY,
        "packages": {"apt": ["stress-ng"]},
        "timeout": 14 * 3600,
    },
    {
        "name": "stress-ng-memory-short",
        "title": "Memory integrity",
        "description": "Run stress-ng memory tests for 5 minutes.",
        "hardware_type": MEMORY,
        "packages": {"apt": ["stress-ng"]},
        "timeout": 300,
    },
    {
        "name": "ntp",
        "title": "NTP validation",
        "description": "Run ntp clock set to verify NTP connectivity.",
        "tags": ["ntp"],
        "hardware_type": NETWORK,
        "parallel": 2,
        "timeout": 60,
    },
    {
        "name": "badblocks",
        "title": "Storage integrity",
        "description": "Run badblocks on disk in readonly mode.",
        "hardware_type": STORAGE,
        "parallel": 1,
        "results": BADBLOCKS_RESULTS,
        "parameters": {"storage": {"type": "storage"}},
    },
    {
        "name": "badblocks-destructive",
        "title": "Storage integrity",
        "description": "Run badblocks on a disk in read/write destructive mode.",
        "hardware_type": STORAGE,
        "parallel": 1,
        "results": BADBLOCKS_RESULTS,
        "parameters": {"storage": {"type": "storage"}},
        "destructive": True,
    },
    {
        "name": "7z",
        "title": "CPU benchmark",
        "description": "Run 7zip CPU benchmarking.",
        "tags": ["cpu"],
        "hardware_type": CPU,
        "timeout": 300,
        "results": SEVEN_Z_RESULTS,
        "packages": {"apt": ["p7zip-full"]},
    },
    {
        "name": "fio",
        "title": "Storage benchmark",
        "description": "Run Fio benchmarking against selected storage devices.",
        "tags": ["storage"],
        "hardware_type": STORAGE,
        "parallel": 1,
        "results": FIO_RESULTS,
        "parameters": STORAGE_PARAM,
        "packages": {"apt": ["fio"]},
        "destructive": True,
    },
    {
        "name": "internet-connectivity",
        "title": "Internet Connectivity Validation",
        "description": "Check if an interface can access the specified URL(s).",
        "tags": ["internet", "network-validation"],
        "hardware_type": NETWORK,
        "parallel": 1,
        "parameters": {
            **INTERFACE_PARAM,
            "url": {
                "type": "url",
                "description": URL_DESCRIPTION,
                "default": "https://connectivity-check.ubuntu.com",
                "required": True,
                "allow_list": True,
            },
        },
        "apply_configured_networking": True,
        "timeout": 300,
    },
    {
        "name": "gateway-connectivity",
        "title": "Gateway Connectivity Validation",
        "description": "Check if an interface has access to the configured gateway.",
        "tags": ["network-validation"],
        "hardware_type": NETWORK,
        "parallel": 1,
        "parameters": INTERFACE_PARAM,
        "apply_configured_networking": True,
        "timeout": 300,
    },
    {
        "name": "rack-controller-connectivity",
        "title": "Gateway Connectivity Validation",
        "description": "Check if an interface has access to the booted rack controller.",
        "tags": ["network-validation"],
        "hardware_type": NETWORK,
        "parallel": 1,
        "parameters": INTERFACE_PARAM,
        "apply_configured_networking": True,
        "timeout": 300,
    },
    {
        "name": "wipe-disks",
        "type": RELEASE,
        "title": "Wipe disks content",
        "description": "Wipe disks content, optionally with quick or secure erase",
        "tags": ["wipe", "disk", "storage"],  # "storage" goes: its hardware type is node
        "parameters": {
            "quick_erase": {"type": "boolean", "argument_format": "--quick-erase"},
            "secure_erase": {"type": "boolean", "argument_format": "--secure-erase"},
        },
        "packages": {"apt": ["nvme-cli"]},
    },
]
SCENARIO_FIELDS = {
    "name",
    "title",
    "description",
    "tags",
    "hardware_type",
    "timeout",
    "parameters",
    "for_hardware",
    "destructive",
    "results",
    "type",
    "parallel",
}
SCENARIO_TYPES = {"testing": TESTING, "2": TESTING, "release": RELEASE, "3": RELEASE}
NAME = re.compile(r"^[\w.-]+$")


class Catalogue:
    """Every script the region has, by id (creation order) and by name."""

    def __init__(self, created: float) -> None:
        self.scripts: dict[int, Script] = {}
        self._ids = itertools.count(1)
        self._revisions = itertools.count(1)
        for spec in BUILTIN:
            self._add(
                {**spec, "default": True, "comment": f"Created by maas-{MAAS_VERSION}"}, created
            )

    def _add(self, spec: dict[str, Any], created: float) -> Script:
        script = Script(
            id=next(self._ids), revision_id=next(self._revisions), created=created, **spec
        )
        self.scripts[script.id] = script
        return script

    def __iter__(self) -> Any:
        return iter(self.scripts.values())

    def named(self, name: str) -> Script | None:
        """``scripts/{name}``: the name, or the numeric id."""
        if name.isdigit():
            return self.scripts.get(int(name))
        return next((s for s in self.scripts.values() if s.name == name), None)

    def of_type(self, type_: int) -> list[Script]:
        return [s for s in self.scripts.values() if s.type == type_]

    def add_testing(self, spec: dict[str, Any], created: float) -> Script:
        """A testing (or, with ``type: release``, release) script from a scenario entry;
        refusals are ``ValueError``s."""
        unknown = set(spec) - SCENARIO_FIELDS
        if unknown:
            raise ValueError(f"unknown script fields: {sorted(unknown)}")
        name = str(spec.get("name") or "")
        if not NAME.match(name) or name.isdigit():
            raise ValueError(f"script name {name!r}: letters, digits, '.', '_' and '-' only")
        if self.named(name) is not None:
            raise ValueError(f"script {name!r} already exists")
        try:
            kind = translate_hardware_type(str(spec.get("hardware_type", "node")))
        except BadChoice as exc:
            raise ValueError(f"script {name!r}: {exc}") from exc
        parameters = dict(spec.get("parameters") or {})
        for pname, param in parameters.items():
            if not isinstance(param, dict) or param.get("type") not in PARAMETER_TYPES:
                raise ValueError(
                    f"script {name!r}: parameter {pname!r} needs a type, one of "
                    f"{', '.join(PARAMETER_TYPES)}"
                )
            if param["type"] == "choice" and not param.get("choices"):
                raise ValueError(f"script {name!r}: choice parameter {pname!r} needs choices")
        for_hardware = [str(h) for h in spec.get("for_hardware") or []]
        bad = [h for h in for_hardware if not FOR_HARDWARE.match(h)]
        if bad:
            raise ValueError(
                f"script {name!r}: for_hardware {bad} must start with pci:, usb:, modalias:, "
                "system_vendor:, system_product:, system_version:, mainboard_vendor: or "
                "mainboard_product:"
            )
        kind_name = str(spec.get("type", "testing")).lower()
        if kind_name not in SCENARIO_TYPES:
            raise ValueError(f"script {name!r}: type must be testing or release")
        parallel = int(spec.get("parallel", 0))
        if parallel not in (0, 1, 2):
            raise ValueError(f"script {name!r}: parallel must be 0, 1 or 2")
        return self._add(
            {
                "name": name,
                "type": SCENARIO_TYPES[kind_name],
                "parallel": parallel,
                "title": str(spec.get("title") or ""),
                "description": str(spec.get("description") or ""),
                "tags": [str(t) for t in spec.get("tags") or []],
                "hardware_type": kind,
                "timeout": parse_duration(spec.get("timeout", 0)),
                "parameters": parameters,
                "for_hardware": for_hardware,
                "destructive": bool(spec.get("destructive", False)),
                "results": dict(spec.get("results") or {}),
            },
            created,
        )

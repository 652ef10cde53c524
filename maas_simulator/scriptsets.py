"""Which scripts run on a machine and with what input: selection by name, tag or id (scripts
``for_hardware`` only where the hardware matches), the per-script parameters a request gives,
and the results each script makes (one per disk or interface for storage and interface
parameters) with their ``parameters`` as MAAS stores them (3.5 source: ``ScriptSetManager``,
``ScriptForm.get_script_param_dict``, ``ParametersForm``; docs/simulator.md, "Testing scripts
and results").
"""

from __future__ import annotations

import copy
import fnmatch
import ipaddress
import os
import re
from collections.abc import Callable
from typing import Any

from maas_simulator.hardware import GPU, NETWORK, STORAGE, NodeDevice
from maas_simulator.interfaces import Interface, children, is_enabled
from maas_simulator.nodes import Machine, ScriptResult, ScriptSet
from maas_simulator.scripts import Catalogue, Script
from maas_simulator.storage import BlockDevice

# the retention configs: max_node_<type>_results, per script (and device), not per set
RETENTION = {0: 10, 1: 3, 2: 10, 3: 3}


class ParameterErrors(Exception):
    """``ParametersForm`` refused the input: its errors by field (a 400 JSON body)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(str(errors))
        self.errors = errors


# -- selection ------------------------------------------------------------------------------------


def hw_pairs(m: Machine) -> set[str]:
    """``_get_hw_pairs``: ``key:value`` of the SMBIOS facts MAAS recorded."""
    prefixes = ("system_", "mainboard_", "firmware_", "chassis_")
    return {f"{k}:{v}" for k, v in m.hardware_info.items() if k.startswith(prefixes)}


PCI_CLASSES = {GPU: "03", NETWORK: "02", STORAGE: "01"}


def modalias(d: NodeDevice) -> str:
    vendor, product = d.vendor_id.upper(), d.product_id.upper()
    klass = PCI_CLASSES.get(d.hardware_type, "06")
    return f"pci:v0000{vendor}d0000{product}sv0000{vendor}sd00000000bc{klass}sc00i00"


def for_hardware_matches(script: Script, m: Machine) -> bool:
    """A ``for_hardware`` script applies when an SMBIOS pair matches or a PCI/USB id or
    modalias pattern matches one of the machine's devices."""
    if not script.for_hardware:
        return True
    if hw_pairs(m) & set(script.for_hardware):
        return True
    patterns = []
    for entry in script.for_hardware:
        kind, _, value = entry.partition(":")
        if kind == "modalias":
            patterns.append(value)
        elif kind == "pci" and value.count(":") == 1:
            vendor, device = value.upper().split(":")
            patterns.append(f"pci:v0000{vendor}d0000{device}sv*sd*bc*sc*i*")
    aliases = [modalias(d) for d in m.node_devices]
    return any(fnmatch.fnmatchcase(a, p) for a in aliases for p in patterns)


def select(catalogue: Catalogue, m: Machine, names: list[str], type_: int) -> list[Script]:
    """``_add_user_selected_scripts``: scripts of the type named, tagged or numbered in
    ``names``, in catalogue order, those ``for_hardware`` only where the hardware matches."""
    wanted = set(names)
    ids = {int(n) for n in names if n.isdigit()}
    return [
        s
        for s in catalogue.of_type(type_)
        if (s.name in wanted or wanted & set(s.tags) or s.id in ids) and for_hardware_matches(s, m)
    ]


def script_param_dict(
    catalogue: Catalogue, names: list[str], cleaned: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """``get_script_param_dict``: a field naming a selected script (any script whose name is
    *in* the field's name, as MAAS tests it) goes to that script, the rest of the name being
    the parameter; any other field goes to every selected script declaring a parameter of
    that name. Empty values are dropped."""
    wanted = set(names)
    scripts = [s for s in catalogue if s.name in wanted or wanted & set(s.tags)]
    params: dict[str, dict[str, Any]] = {}
    for name, value in cleaned.items():
        if not value:
            continue
        targeted = False
        for script in scripts:
            if script.name in name:
                params.setdefault(script.name, {})[name.replace(script.name, "").strip("_-")] = (
                    value
                )
                targeted = True
        if not targeted:
            for script in scripts:
                if name in script.parameters and name not in params.get(script.name, {}):
                    params.setdefault(script.name, {})[name] = value
    return params


# -- parameters -----------------------------------------------------------------------------------


def disk_value(d: BlockDevice) -> dict[str, Any]:
    """``BlockDevice.serialize``."""
    return {"id": d.id, "name": d.name, "id_path": d.id_path, "model": d.model, "serial": d.serial}


def interface_value(i: Interface) -> dict[str, Any]:
    """``Interface.serialize``."""
    return {
        "id": i.id,
        "name": i.name,
        "mac_address": i.mac_address,
        "vendor": i.vendor,
        "product": i.product,
    }


def configured_interfaces(m: Machine) -> list[Interface]:
    """``ParametersForm._get_interfaces``: enabled interfaces with no children and a link
    other than LINK_UP (the boot interface while commissioning if none is)."""
    found = [
        i
        for i in m.interfaces
        if is_enabled(i, m.interfaces)
        and not children(i, m.interfaces)
        and i.links
        and any(link.mode != "link_up" for link in i.links)
    ]
    if not found and m.status == 1 and m.boot_interface is not None:  # COMMISSIONING
        found = [m.boot_interface]
    return found


# ``_validate_and_clean_url``: the schemes curl knows, and icmp
URL_SCHEMES = frozenset(
    [
        "icmp",
        "file",
        "ftp",
        "ftps",
        "gopher",
        "http",
        "https",
        "imap",
        "imaps",
        "ldap",
        "ldaps",
        "pop3",
        "pop3s",
        "rtmp",
        "rtsp",
        "scp",
        "sftp",
        "smb",
        "smbs",
        "smtp",
        "smtps",
        "telnet",
        "tftp",
    ]
)
HOST_LABEL = r"[a-z0-9\u00a1-\uffff](?:[a-z0-9\u00a1-\uffff-]{0,61}[a-z0-9\u00a1-\uffff])?"
URL = re.compile(  # Django's URLValidator
    r"^(?P<scheme>[a-z0-9.+-]*)://"
    r"(?:[^\s:@/]+(?::[^\s:@/]*)?@)?"
    r"(?P<host>\[[0-9a-f:.]+\]|(?:\d{1,3}\.){3}\d{1,3}|"
    rf"{HOST_LABEL}(?:\.(?!-){HOST_LABEL})*\.?|localhost)"
    r"(?::(?P<port>\d{1,5}))?"
    r"(?:[/?#][^\s]*)?\Z",
    re.IGNORECASE,
)


def _url_ok(url: str) -> bool:
    """One URL as MAAS's form checks it: a bare address or host is taken as ``http://``; the
    scheme one curl knows; Django's ``URLValidator`` for the rest (a comma inside the host or
    the port, as two URLs joined without ``allow_list`` make, is refused)."""
    try:
        ipaddress.ip_address(url)
    except ValueError:
        if "://" not in url:
            url = f"http://{url}"
    else:
        url = f"http://[{url}]" if ":" in url else f"http://{url}"
    found = URL.match(url)
    if found is None or found["scheme"].lower() not in URL_SCHEMES:
        return False
    if found["port"] is not None and int(found["port"]) > 65535:
        return False
    host = found["host"]
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
    elif re.fullmatch(r"[\d.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return False
    return True


class _Input:
    """``ParametersForm`` for one script: the input given and the defaults, cleaned into
    one parameter set per result."""

    def __init__(self, m: Machine, script: Script, given: dict[str, Any]) -> None:
        self.m, self.script, self.given = m, script, given
        self.errors: dict[str, list[str]] = {}

    def error(self, field: str, message: str) -> None:
        self.errors.setdefault(field, []).append(message)

    def split(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``_setup_input``: single-result parameters and per-device ones, defaults filled."""
        declared = self.script.parameters
        single: dict[str, Any] = {}
        multi: dict[str, Any] = {}
        for name, value in self.given.items():
            if name not in declared:
                self.error("input", f"Unknown parameter '{name}' for {self.script.name}")
                continue
            target = multi if declared[name]["type"] in ("storage", "interface") else single
            target[name] = {**copy.deepcopy(declared[name]), "value": value}
        for name, param in declared.items():
            if param["type"] in ("storage", "interface"):
                if name in multi:
                    continue
                default = param.get("default", "all")
                if not default and param.get("required", True):
                    self.error(name, "Field is required")
                elif default:
                    multi[name] = {**copy.deepcopy(param), "value": default}
            elif name not in single:
                if param["type"] == "runtime":
                    default = param.get("default", self.script.timeout)
                    if isinstance(default, int):
                        single[name] = {**copy.deepcopy(param), "value": default}
                    elif param.get("required", True):
                        self.error(name, "Field is required")
                    continue
                default = param.get("default", "")
                if not default and param.get("required", False):
                    self.error(name, "Field is required")
                elif default:
                    single[name] = {**copy.deepcopy(param), "value": default}
        return single, multi

    def check_single(self, name: str, param: dict[str, Any]) -> None:
        value, kind = param["value"], param["type"]
        if kind == "runtime":
            if isinstance(value, str) and value.isdigit():
                value = param["value"] = int(value)
            if not isinstance(value, int):
                self.error(name, "Must be an int")
            elif value < param.get("min", 0):
                self.error(name, f"Must be greater than {param.get('min', 0)}")
            elif param.get("max") is not None and value > param["max"]:
                self.error(name, f"Must be less than {param['max']}")
        elif kind == "url":
            urls = str(value).split(",") if param.get("allow_list") else [str(value)]
            if not all(_url_ok(u) for u in urls):
                self.error(name, "Invalid URL")
        elif kind in ("string", "password"):
            if "min" in param and len(str(value)) < param["min"]:
                self.error(name, "Input too short")
            if "max" in param and len(str(value)) > param["max"]:
                self.error(name, "Input too long")
        elif kind == "choice":
            choices = [c if isinstance(c, str) else c[0] for c in param.get("choices", [])]
            if value not in choices:
                self.error(name, f'Invalid choice "{value}"')

    def disks(self, name: str, value: Any) -> list[BlockDevice] | None:
        """The disks a storage value names (None: the placeholder, no disk known yet)."""
        physical = self.m.storage.physical
        if value == "all":
            return list(physical) or None
        if isinstance(value, int) or str(value).isdigit():
            found = [d for d in physical if d.id == int(value)]
            if not found:
                self.error(name, "Physical block id does not exist")
            return found
        disks: list[BlockDevice] = []
        for ref in str(value).split(","):
            if ":" in ref:
                model, _, serial = ref.partition(":")
                pair = [d for d in physical if d.model == model and d.serial == serial]
                if pair:
                    disks += pair
                    continue
            found = [
                d
                for d in physical
                if ref in (d.name, d.model, d.serial)
                or d.name == os.path.basename(ref)
                or ref in d.tags
            ]
            if not found:
                self.error(name, f"Unknown storage device for {self.where}")
            disks += found
        return disks

    def interfaces(self, name: str, value: Any) -> list[Interface] | None:
        """The interfaces an interface value names (None: the placeholder)."""
        configured = configured_interfaces(self.m)
        if value == "all":
            return configured or None
        if isinstance(value, int) or str(value).isdigit():
            found = [i for i in configured if i.id == int(value)]
            if len(found) != 1:
                self.error(name, "Interface id does not exist")
            return found
        chosen: list[Interface] = []
        for ref in str(value).split(","):
            if ":" in ref and ref.count(":") == 1:
                vendor, _, product = ref.partition(":")
                pair = [i for i in configured if (i.vendor, i.product) == (vendor, product)]
                if pair:
                    chosen += pair
                    continue
            found = [
                i
                for i in configured
                if ref.lower() == i.mac_address
                or ref in (i.name, i.vendor, i.product)
                or ref in i.tags
            ]
            if not found:
                self.error(name, f"Unknown interface for {self.where}")
            chosen += found
        return chosen

    @property
    def where(self) -> str:
        return f"{self.m.hostname}.maas({self.m.system_id})"

    def clean(self) -> list[dict[str, Any]]:
        """``clean_input``: one parameter dict per result."""
        single, multi = self.split()
        for name, param in single.items():
            self.check_single(name, param)
        sets: list[dict[str, Any]] = []
        for name, param in multi.items():
            if param["type"] == "storage":
                devices: list[Any] | None = self.disks(name, param["value"])
                as_value: Callable[[Any], dict[str, Any]] = disk_value
            else:
                devices = self.interfaces(name, param["value"])
                as_value = interface_value
            if devices is None:  # "all" before commissioning found any: kept as is
                sets.append({**copy.deepcopy(single), name: param})
                continue
            for device in devices:
                sets.append({**copy.deepcopy(single), name: {**param, "value": as_value(device)}})
        if self.errors:
            raise ParameterErrors(self.errors)
        return sets or [single]


def new_results(
    m: Machine, script: Script, given: dict[str, Any], new_id: Callable[[], int], now: float
) -> list[ScriptResult]:
    """``add_pending_script``: Pending results of ``script`` for ``given`` input."""
    results = []
    for params in _Input(m, script, given).clean():
        disk = interface = None
        for param in params.values():
            value = param.get("value")
            if isinstance(value, dict) and param["type"] == "storage":
                disk = (int(value["id"]), str(value["name"]))
            elif isinstance(value, dict) and param["type"] == "interface":
                interface = (int(value["id"]), str(value["name"]))
        results.append(
            ScriptResult(
                id=new_id(),
                name=script.name,
                status=0,
                output=b"",
                started=None,
                ended=None,
                script=script,
                parameters=params,
                disk=disk,
                interface=interface,
                created=now,
                updated=now,
            )
        )
    return results


def clean_old(m: Machine, new: ScriptSet) -> None:
    """``_clean_old``: older pending or running results of the type end Aborted; each script
    (on each device) keeps its newest ``max_node_<type>_results`` runs; a storage test's
    never-regenerated placeholder goes; emptied sets go."""
    limit = RETENTION[new.type]
    sets = [s for s in m.script_sets if s.type == new.type]
    for ss in sets:
        if ss is new:
            continue
        for r in ss.results:
            if r.status in (0, 1, 7, 10):
                r.status = 5
    keys = {r.device_key for r in new.results}
    for key in keys:
        runs = [(ss, r) for ss in sets for r in ss.results if r.device_key == key]
        for ss, r in runs[: max(len(runs) - limit, 0)]:
            ss.results.remove(r)
    # LP:1731075: a storage test made before the disks were known has the placeholder value
    # "all"; when commissioning failed it was never regenerated and goes now.
    for ss in sets:
        if ss is not new:
            ss.results = [r for r in ss.results if not _storage_placeholder(r)]
    m.script_sets = [s for s in m.script_sets if s.results or s is new]


def _storage_placeholder(r: ScriptResult) -> bool:
    return any(
        isinstance(p, dict) and p.get("type") == "storage" and p.get("value") == "all"
        for p in r.parameters.values()
    )

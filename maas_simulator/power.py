"""Power types and their BMC settings, checked as MAAS 3.5's forms check them
(``WithPowerTypeMixin``, ``DictCharField``, the drivers' ``settings`` in
``provisioningserver/drivers/power/*.py``; docs/simulator.md, "Machines").

``power_form`` answers the power type and parameters a create or an update stores, or raises
MAAS's 400: an unknown power type, a required parameter missing or blank (``<label>: This field
is required.``), a choice not offered, a parameter the driver does not know. Parameters not
sent keep the machine's values (also across a change of type, for the names both share).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from maas_simulator.errors import ApiError, invalid


@dataclass(frozen=True)
class Setting:
    name: str
    label: str
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] | None = None


def _s(name: str, label: str, *, required: bool = False, **kw: Any) -> Setting:
    return Setting(name, label, required, **kw)


ADDRESS = "power_address"
# Each driver's settings, required ones with their labels (3.5 source). Choice lists are checked
# for IPMI; other drivers' choice fields take any value.
DRIVERS: dict[str, tuple[Setting, ...]] = {
    "amt": (_s("power_pass", "Power password"), _s(ADDRESS, "Power address", required=True)),
    "apc": (
        _s(ADDRESS, "IP for APC PDU", required=True),
        _s("node_outlet", "APC PDU node outlet number (1-16)", required=True),
        _s("power_on_delay", "Power ON outlet delay (seconds)", default="5"),
        _s("pdu_type", "PDU type", default="RPDU"),
    ),
    "dli": (
        _s("outlet_id", "Outlet ID", required=True),
        _s(ADDRESS, "Power address", required=True),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
    ),
    "eaton": (
        _s(ADDRESS, "IP for Eaton PDU", required=True),
        _s("node_outlet", "Eaton PDU node outlet number (1-24)", required=True),
        _s("power_on_delay", "Power ON outlet delay (seconds)", default="5"),
    ),
    "hmc": (
        _s(ADDRESS, "IP for HMC", required=True),
        _s("power_user", "HMC username"),
        _s("power_pass", "HMC password"),
        _s("server_name", "HMC Managed System server name", required=True),
        _s("lpar", "HMC logical partition", required=True),
    ),
    "hmcz": (
        _s(ADDRESS, "HMC Address", required=True),
        _s("power_user", "HMC username", required=True),
        _s("power_pass", "HMC password", required=True),
        _s("power_partition_name", "HMC partition name", required=True),
        _s(
            "power_verify_ssl",
            "Verify certificate presented by the HMC during SSL/TLS handshake",
            required=True,
            default="y",
        ),
    ),
    "ipmi": (
        _s(
            "power_driver",
            "Power driver",
            required=True,
            default="LAN_2_0",
            choices=("LAN", "LAN_2_0"),
        ),
        _s("power_boot_type", "Power boot type", default="auto", choices=("auto", "legacy", "efi")),
        _s(ADDRESS, "IP address", required=True),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
        _s("k_g", "K_g BMC key"),
        _s("cipher_suite_id", "Cipher Suite ID", default="3", choices=("17", "3", "", "8", "12")),
        _s(
            "privilege_level",
            "Privilege Level",
            default="OPERATOR",
            choices=("USER", "OPERATOR", "ADMIN"),
        ),
        _s("workaround_flags", "Workaround Flags", default=["opensesspriv"]),
        _s("mac_address", "Power MAC"),
        _s("power_off_mode", "Power off mode", default="hard", choices=("soft", "hard")),
    ),
    "lxd": (
        _s(ADDRESS, "LXD address", required=True),
        _s("instance_name", "Instance name", required=True),
        _s("project", "LXD project", required=True, default="default"),
        _s("password", "LXD password (optional)"),
        _s("certificate", "LXD certificate (optional)"),
        _s("key", "LXD private key (optional)"),
    ),
    "manual": (),
    "moonshot": (
        _s(ADDRESS, "Power address", required=True),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
        _s("power_hwaddress", "Power hardware address", required=True),
    ),
    "mscm": (
        _s(ADDRESS, "IP for MSCM CLI API", required=True),
        _s("power_user", "MSCM CLI API user"),
        _s("power_pass", "MSCM CLI API password"),
        _s(
            "node_id",
            "Node ID - Must adhere to cXnY format (X=cartridge number, Y=node number).",
            required=True,
        ),
    ),
    "msftocs": (
        _s(ADDRESS, "Power address", required=True),
        _s("power_port", "Power port"),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
        _s("blade_id", "Blade ID (Typically 1-24)", required=True),
    ),
    "nova": (
        _s("nova_id", "Host UUID", required=True),
        _s("os_tenantname", "Tenant name", required=True),
        _s("os_username", "Username", required=True),
        _s("os_password", "Password", required=True),
        _s("os_authurl", "Auth URL", required=True),
    ),
    "openbmc": (
        _s(ADDRESS, "OpenBMC address", required=True),
        _s("power_user", "OpenBMC user", required=True),
        _s("power_pass", "OpenBMC password", required=True),
    ),
    "proxmox": (
        _s(ADDRESS, "Proxmox host name or IP", required=True),
        _s("power_user", "Proxmox username, including realm", required=True),
        _s("power_pass", "Proxmox password, required if a token name and secret aren't given"),
        _s("power_token_name", "Proxmox API token name"),
        _s("power_token_secret", "Proxmox API token secret"),
        _s("power_vm_name", "Node ID", required=True),
        _s(
            "power_verify_ssl",
            "Verify SSL connections with system CA certificates",
            required=True,
            default="n",
        ),
    ),
    "raritan": (
        _s(ADDRESS, "IP for Raritan PDU", required=True),
        _s("node_outlet", "Raritan PDU node outlet number", required=True),
        _s("power_on_delay", "Power ON outlet delay (seconds)", default="5"),
    ),
    "recs_box": (
        _s("node_id", "Node ID", required=True),
        _s(ADDRESS, "Power address", required=True),
        _s("power_port", "Power port"),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
    ),
    "redfish": (
        _s(ADDRESS, "Redfish address", required=True),
        _s("power_user", "Redfish user", required=True),
        _s("power_pass", "Redfish password", required=True),
        _s("node_id", "Node ID"),
    ),
    "sm15k": (
        _s("system_id", "System ID", required=True),
        _s(ADDRESS, "Power address", required=True),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
        _s("power_control", "Power control type", required=True, default="ipmi"),
    ),
    "ucsm": (
        _s("uuid", "Server UUID", required=True),
        _s(ADDRESS, "URL for XML API", required=True),
        _s("power_user", "API user"),
        _s("power_pass", "API password"),
    ),
    "virsh": (
        _s(ADDRESS, "Address", required=True),
        _s("power_pass", "Password (optional)"),
        _s("power_id", "Virsh VM ID", required=True),
    ),
    "vmware": (
        _s("power_vm_name", "VM Name (if UUID unknown)"),
        _s("power_uuid", "VM UUID (if known)"),
        _s(ADDRESS, "VMware IP", required=True),
        _s("power_user", "VMware username", required=True),
        _s("power_pass", "VMware password", required=True),
        _s("power_port", "VMware API port (optional)"),
        _s("power_protocol", "VMware API protocol (optional)"),
    ),
    "webhook": (
        _s("power_on_uri", "URI to power on the node", required=True),
        _s("power_off_uri", "URI to power off the node", required=True),
        _s("power_query_uri", "URI to query the nodes power status", required=True),
        _s(
            "power_on_regex",
            "Regex to confirm the node is on",
            required=True,
            default=r"status.*\:.*running",
        ),
        _s(
            "power_off_regex",
            "Regex to confirm the node is off",
            required=True,
            default=r"status.*\:.*stopped",
        ),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
        _s("power_token", "Power token, will be used in place of power_user and power_pass"),
        _s(
            "power_verify_ssl",
            "Verify SSL connections with system CA certificates",
            required=True,
            default="n",
        ),
    ),
    "wedge": (
        _s(ADDRESS, "IP address", required=True),
        _s("power_user", "Power user"),
        _s("power_pass", "Power password"),
    ),
}
PREFIX = "power_parameters_"
SKIP_CHECK = PREFIX + "skip_check"


def power_form(
    data: dict[str, list[str]], current_type: str | None, current: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The power type and parameters to store (None: the request sets neither).

    ``data`` is the request's form; ``current_type`` the machine's power type (None when
    creating one), ``current`` its parameters."""
    errors: dict[str, list[str]] = {}
    given_type = data["power_type"][0] if data.get("power_type") else None
    if given_type is not None and given_type != "" and given_type not in DRIVERS:
        errors["power_type"] = [
            f"Select a valid choice. {given_type} is not one of the available choices."
        ]
    kind = given_type if given_type in DRIVERS or given_type == "" else (current_type or "")
    # The parameters already known: the JSON blob (python-libmaas), then the machine's own.
    known: dict[str, Any] = {}
    blob = data["power_parameters"][0] if data.get("power_parameters") else ""
    if blob.strip():
        try:
            known = json.loads(blob)
        except ValueError as exc:
            # raised while the form is set up, before any field is checked: a text 400
            raise ApiError(400, "Failed to parse JSON power_parameters") from exc
    for key, value in current.items():
        if known.get(key) is None:
            known[key] = value
    sent = {
        k[len(PREFIX) :]: v[0]
        for k, v in data.items()
        if k.startswith(PREFIX) and k != SKIP_CHECK and v
    }
    skip = data.get(SKIP_CHECK, [""])[0] == "true"
    settings = DRIVERS.get(kind, ())
    names = {s.name for s in settings}
    values = {name: known[name] for name in names if name in known} | sent
    if skip:
        params: dict[str, Any] = dict(values)
    elif kind == "":
        params = {}
    else:
        params = _clean(settings, values, errors)
    if errors:
        raise invalid(errors)
    if given_type is None and not sent and current_type is not None:
        return None  # set_values: nothing about power was sent
    return kind, params


def _clean(
    settings: tuple[Setting, ...], values: dict[str, Any], errors: dict[str, list[str]]
) -> dict[str, Any]:
    """``DictCharField.clean``: unknown names, then every field (its default when not given)."""
    unknown = sorted(set(values) - {s.name for s in settings})
    if unknown:
        errors["power_parameters"] = [f"Unknown parameter(s): {', '.join(unknown)}."]
        return {}
    if not values and any(s.required for s in settings):
        errors["power_parameters"] = ["This field is required."]
        return {}
    problems, cleaned = [], {}
    for s in settings:
        value = values.get(s.name)
        if value is None and s.default not in (None, ""):
            value = s.default
        if s.required and value in (None, "", [], {}):
            problems.append(f"{s.label}: This field is required.")
            continue
        if s.choices is not None and value not in s.choices and value is not None:
            listed = ", ".join(f"'{c}'" for c in s.choices)
            problems.append(
                f"{s.label}: '{value}' is not a valid {s.name}.  It should be one of: {listed}."
            )
            continue
        cleaned[s.name] = "" if value is None else value
    if problems:
        errors["power_parameters"] = problems
    return cleaned

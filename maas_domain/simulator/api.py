"""The MAAS REST API 2.0 wire format, served from the simulator's model.

A resource is a path template with actions ``(name, method, op)``; the same table routes requests
and produces the ``describe/`` document real clients (python-libmaas) build themselves from.
Errors use MAAS's codes, content types and texts (maas-api.md §1.3, §2, §3.5, §11).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

from maas_domain.maas.status import INTERFACE_EDITABLE, NodeStatus
from maas_domain.simulator.model import (
    API_PREFIX,
    LEVELS,
    ApiError,
    Link,
    Machine,
    Simulator,
    User,
    conflict,
    invalid,
)

S = NodeStatus
TRUE = {"1", "true", "yes", "on"}
MAC = re.compile(r"^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$", re.IGNORECASE)
OAUTH_PARAMS = (
    "oauth_consumer_key",
    "oauth_token",
    "oauth_signature",
    "oauth_signature_method",
    "oauth_timestamp",
    "oauth_nonce",
)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    form: dict[str, list[str]]
    host: str
    user: User | None = None
    params: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str | None = None) -> str | None:
        for source in (self.query, self.form):
            if source.get(name):
                return source[name][0]
        return default

    def all(self, name: str) -> list[str]:
        return self.query.get(name, []) + self.form.get(name, [])

    def flag(self, name: str) -> bool:
        return (self.get(name) or "").strip().lower() in TRUE


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Simulator, Request], Any]


@dataclass
class Action:
    name: str
    method: str
    op: str | None
    fn: Handler
    admin: bool = False  # @admin_method: 403 "This method is reserved for admin users."
    anon: bool = False
    doc: str = ""
    perm: str | None = None  # NodePermission checked on the path's machine: 403, empty body


@dataclass
class Resource:
    name: str  # MAAS handler class name, e.g. MachineHandler
    path: str  # e.g. /MAAS/api/2.0/machines/{system_id}/
    actions: list[Action]
    anon_name: str | None = None
    auth: bool = True  # False: the resource has no authenticated handler (version/)

    def __post_init__(self) -> None:
        self.params = re.findall(r"{(\w+)}", self.path)
        pattern = re.sub(
            r"{(\w+)}",
            r"(?P<\1>[^/]+)",
            re.escape(self.path).replace(r"\{", "{").replace(r"\}", "}"),
        )
        self.regex = re.compile(f"^{pattern}$")


# -- request parsing ------------------------------------------------------------------------------


def parse_form(content_type: str, body: bytes) -> dict[str, list[str]]:
    """Multipart (with base64 parts decoded, as real clients send) or urlencoded bodies."""
    if not body:
        return {}
    if content_type.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
        )
        form: dict[str, list[str]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not name:
                continue
            payload = part.get_payload(decode=True)
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
            form.setdefault(str(name), []).append(text)
        return form
    if content_type.startswith("application/x-www-form-urlencoded"):
        return parse_qs(body.decode(), keep_blank_values=True)
    return {}


def parse_oauth(header: str) -> dict[str, str] | None:
    if not header.lower().startswith("oauth "):
        return None
    params = {}
    for part in header[6:].split(","):
        if "realm" in part or "=" not in part:
            continue
        key, _, value = part.strip().partition("=")
        params[key.strip()] = unquote(value.strip().strip('"'))
    return params


def oauth_error(message: str) -> ApiError:
    """piston's ``send_oauth_error``: 401 with an OAuth challenge header."""
    return ApiError(
        401, f"Authorization Error: {message}", headers={"WWW-Authenticate": 'OAuth realm="OAuth"'}
    )


def authenticate(sim: Simulator, header: str | None) -> User | None:
    """OAuth1 PLAINTEXT as MAAS checks it. Raise 401 with MAAS's texts; None = anonymous."""
    params = parse_oauth(header or "")
    if params is None:
        return None
    if not all(p in params for p in OAUTH_PARAMS):
        return None
    user = next(
        (u for u in sim.users.values() if u.consumer_key == params["oauth_consumer_key"]), None
    )
    if user is None:
        raise oauth_error("Invalid API key.")
    if params["oauth_token"] != user.token_key:
        raise oauth_error(f"'Invalid access token: {params['oauth_token']}'")
    if params.get("oauth_version", "1.0") != "1.0":
        raise oauth_error("'OAuth version must be 1.0'")
    if (
        params["oauth_signature_method"] != "PLAINTEXT"
        or params["oauth_signature"] != f"&{user.token_secret}"
    ):
        raise oauth_error("'Invalid signature.'")
    return user


# -- helpers ------------------------------------------------------------------------------------


def machine_or_404(sim: Simulator, req: Request) -> Machine:
    m = sim.machines.get(req.params["system_id"])
    if m is None:
        raise ApiError(404, "No Machine matches the given query.")
    return m


def node_or_404(sim: Simulator, req: Request) -> Machine:
    m = sim.machines.get(req.params["system_id"])
    if m is None:
        raise ApiError(404, "No Node matches the given query.")
    return m


def raw(data: bytes) -> Response:
    return Response(200, data)


def user_json(u: User) -> dict[str, Any]:
    return {
        "username": u.username,
        "email": u.email or f"{u.username}@example.test",
        "is_local": True,
        "is_superuser": u.is_superuser,
        "resource_uri": f"{API_PREFIX}users/{u.username}/",
    }


def _bool_field(value: str | None) -> bool:
    return (value or "").strip().lower() in TRUE


# -- handlers: identity and site ----------------------------------------------------------------


def version(sim: Simulator, req: Request) -> Any:
    return {
        "capabilities": [
            "networks-management",
            "static-ipaddresses",
            "ipv6-deployment-ubuntu",
            "devices-management",
            "storage-deployment-ubuntu",
            "network-deployment-ubuntu",
            "bridging-interface-ubuntu",
            "bridging-automatic-ubuntu",
            "authenticate-api",
        ],
        "version": "3.5.10",
        "subversion": "",
    }


def whoami(sim: Simulator, req: Request) -> Any:
    assert req.user is not None
    return user_json(req.user)


def users_list(sim: Simulator, req: Request) -> Any:
    return [user_json(u) for u in sim.users.values()]


def list_tokens(sim: Simulator, req: Request) -> Any:
    assert req.user is not None
    u = req.user
    return [{"name": "simulator", "token": f"{u.consumer_key}:{u.token_key}:{u.token_secret}"}]


def get_config(sim: Simulator, req: Request) -> Any:
    name = req.get("name")
    if not name:
        raise ApiError(400, "No provided name!")
    if name not in sim.config:
        valid = ", ".join(sorted(sim.config))
        raise invalid(
            {name: [f"{name} is not a valid config setting (valid settings are: {valid})."]}
        )
    return sim.config[name]


def boot_resources(sim: Simulator, req: Request) -> Any:
    return [
        {
            "id": b.id,
            "type": b.type,
            "name": b.name,
            "architecture": b.architecture,
            "resource_uri": f"{API_PREFIX}boot-resources/{b.id}/",
            "last_deployed": None,
        }
        for b in sim.boot_resources
    ]


def boot_is_importing(sim: Simulator, req: Request) -> Any:
    return False


def subnets(sim: Simulator, req: Request) -> Any:
    return [s.as_json() for s in sorted(sim.subnets.values(), key=lambda s: s.id)]


def subnet_read(sim: Simulator, req: Request) -> Any:
    ref = req.params["id"]
    for s in sim.subnets.values():
        if ref == str(s.id) or ref in (f"cidr:{s.cidr}", f"name:{s.name}"):
            return s.as_json()
    raise ApiError(404, "No Subnet matches the given query.")


def fabrics(sim: Simulator, req: Request) -> Any:
    seen: dict[int, Any] = {}
    for s in sim.subnets.values():
        fabric = seen.setdefault(
            s.fabric_id,
            {
                "id": s.fabric_id,
                "name": f"fabric-{s.fabric_id}",
                "class_type": None,
                "vlans": [],
                "resource_uri": f"{API_PREFIX}fabrics/{s.fabric_id}/",
            },
        )
        fabric["vlans"].append(s.vlan())
    return list(seen.values())


def zones(sim: Simulator, req: Request) -> Any:
    return [
        {
            "id": 1,
            "name": "default",
            "description": "",
            "resource_uri": f"{API_PREFIX}zones/default/",
        }
    ]


def pools(sim: Simulator, req: Request) -> Any:
    return [
        {
            "id": 0,
            "name": "default",
            "description": "",
            "resource_uri": f"{API_PREFIX}resourcepool/0/",
        }
    ]


def rack_controllers(sim: Simulator, req: Request) -> Any:
    services = [
        {"name": n, "status": "running", "status_info": ""}
        for n in ("http", "dhcpd", "rackd", "tftp")
    ]
    return [
        {
            "system_id": "rack01",
            "hostname": "rack01",
            "node_type": 2,
            "node_type_name": "Rack controller",
            "service_set": services,
            "resource_uri": f"{API_PREFIX}rackcontrollers/rack01/",
        }
    ]


# -- handlers: machines -------------------------------------------------------------------------

STATUS_BY_NAME = {s.name.lower(): s for s in NodeStatus}


def machines_list(sim: Simulator, req: Request) -> Response:
    hostnames = set(req.all("hostname"))
    ids = set(req.all("id"))
    macs = {m.lower().replace("-", ":") for m in req.all("mac_address")}
    for mac in req.all("mac_address"):
        if not MAC.match(mac):
            raise ApiError(400, "Invalid parameter: invalid MAC address format")
    statuses = set()
    for name in req.all("status"):
        if name not in STATUS_BY_NAME:
            raise invalid({"status": [f"'{name}' is not a valid status."]})
        statuses.add(STATUS_BY_NAME[name])
    chunks = []
    for sid in sim.order:
        m = sim.machines.get(sid)
        if m is None:
            continue
        if hostnames and m.hostname not in hostnames:
            continue
        if ids and sid not in ids:
            continue
        if macs and not macs & {i.mac_address for i in m.interfaces}:
            continue
        if statuses and m.status not in statuses:
            continue
        chunks.append(sim.machine_json(m))
    return raw(b"[" + b",".join(chunks) + b"]")


def _power_params_from(req: Request) -> dict[str, Any]:
    params: dict[str, Any] = {}
    blob = req.get("power_parameters")
    if blob:
        try:
            params.update(json.loads(blob))
        except ValueError as exc:
            raise invalid({"power_parameters": ["Invalid JSON."]}) from exc
    for key, values in {**req.query, **req.form}.items():
        if key.startswith("power_parameters_") and key != "power_parameters_skip_check":
            params[key[len("power_parameters_") :]] = values[0]
    return params


def _valid_architectures(sim: Simulator) -> list[str]:
    arches = sorted({b.architecture.split("/")[0] for b in sim.boot_resources})
    return [f"{a}/generic" for a in arches] + [f"{a}/ga-22.04" for a in arches]


def machines_create(sim: Simulator, req: Request) -> Response:
    arch = req.get("architecture") or ""
    if arch and "/" not in arch:
        arch = f"{arch}/generic"
    errors: dict[str, list[str]] = {}
    valid_arches = _valid_architectures(sim)
    if arch not in valid_arches:
        choices = ", ".join(f"'{a}'" for a in valid_arches)
        errors["architecture"] = [
            f"'{arch}' is not a valid architecture.  It should be one of: {choices}."
        ]
    macs = [m.lower().replace("-", ":") for m in req.all("mac_addresses")]
    power_type = req.get("power_type") or ""
    if not macs and power_type != "ipmi":
        # An IPMI machine may be added by its BMC alone; commissioning finds its NICs.
        errors["mac_addresses"] = ["This field is required."]
    in_use = {i.mac_address: m.hostname for m in sim.machines.values() for i in m.interfaces}
    for mac in macs:
        if not MAC.match(mac):
            errors.setdefault("mac_addresses", []).append(f"'{mac}' is not a valid MAC address.")
        elif mac in in_use:
            errors.setdefault("mac_addresses", []).append(
                f"MAC address {mac} already in use on {in_use[mac]}."
            )
    hostname = req.get("hostname")
    if (
        hostname
        and not sim.allow_duplicate_hostnames
        and any(m.hostname == hostname for m in sim.machines.values())
    ):
        errors["hostname"] = ["Node with this Hostname already exists."]
    power = _power_params_from(req)
    if (
        power_type == "ipmi"
        and not req.flag("power_parameters_skip_check")
        and not power.get("power_address")
    ):
        errors["power_parameters"] = ["power_address: This field is required."]
    if errors:
        raise invalid(errors)
    assert req.user is not None
    power.setdefault("power_driver", "LAN_2_0") if power_type == "ipmi" else None
    m = sim.add_machine(
        hostname=hostname,
        power_type=power_type,
        power_parameters=power,
        mac_addresses=macs,
        architecture=arch,
    )
    commission = req.get("commission")
    if req.user.is_superuser and (commission is None or _bool_field(commission)):
        # MAAS ignores errors of the implicit commissioning (LP:1600328)
        with contextlib.suppress(ApiError):
            sim.commission(m, req.user, {})
    return raw(sim.machine_json(m))


def _is_registered(sim: Simulator, req: Request, ignore: set[NodeStatus]) -> bool:
    mac = req.query.get("mac_address", [""])[0]
    if not mac:
        raise ApiError(400, "No provided mac_address!")
    if not MAC.match(mac):
        raise invalid({"mac_address": [f"'{mac}' is not a valid MAC address."]})
    mac = mac.lower().replace("-", ":")
    return any(
        i.mac_address == mac
        for m in sim.machines.values()
        if m.status not in ignore
        for i in m.interfaces
    )


def machines_is_registered(sim: Simulator, req: Request) -> Any:
    return _is_registered(sim, req, {S.RETIRED})


def anon_machines_is_registered(sim: Simulator, req: Request) -> Any:
    # enlistment must be able to run for machines MAAS only half knows
    return _is_registered(sim, req, {S.NEW, S.COMMISSIONING, S.RETIRED})


def machines_enlist(sim: Simulator, req: Request) -> Response:
    """Anonymous POST /machines/: enlistment creates a NEW machine."""
    macs = [m.lower() for m in req.all("mac_addresses")]
    m = sim.add_machine(hostname=req.get("hostname"), mac_addresses=macs or None)
    return raw(sim.machine_json(m))


def machines_power_parameters(sim: Simulator, req: Request) -> Any:
    ids = set(req.all("id"))
    return {
        sid: dict(m.power_parameters) for sid, m in sim.machines.items() if not ids or sid in ids
    }


def machines_allocate(sim: Simulator, req: Request) -> Response:
    """Only the ``system_id`` and ``name`` constraints are simulated."""
    user = req.user
    assert user is not None
    sid = req.get("system_id")
    name = req.get("name")
    for m in (sim.machines[s] for s in sim.order if s in sim.machines):
        if (
            m.status != S.READY
            or not has_perm(user, "edit", m)
            or (sid and m.system_id != sid)
            or (name and name not in (m.hostname, f"{m.hostname}.maas"))
        ):
            continue
        m.owner = user.username
        sim.request_event(m, "User acquiring node", "acquire", req.get("comment") or "", user)
        sim.set_status(m, S.ALLOCATED)
        data = json.loads(sim.machine_json(m))
        data["constraints_by_type"] = {}
        return raw(json.dumps(data).encode())
    if sid:
        message = f"No machine with system ID {sid} available."
    elif name:
        message = (
            f"No available machine matches constraints: [('name', ['{name}'])] "
            f'(resolved to "name={name}")'
        )
    else:
        message = "No machine available."
    raise ApiError(409, message)


def machine_read(sim: Simulator, req: Request) -> Response:
    return raw(sim.machine_json(machine_or_404(sim, req)))


def machine_update(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    if req.get("hostname"):
        m.hostname = req.get("hostname") or m.hostname
    if req.get("power_type") is not None:
        m.power_type = req.get("power_type") or ""
        m.power_parameters = {}
    m.power_parameters.update(_power_params_from(req))
    m.touch(sim.now())
    return raw(sim.machine_json(m))


def machine_delete(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    sim.start_op(m, "delete")
    del sim.machines[m.system_id]
    return Response(204, b"", content_type="text/plain; charset=utf-8")


def machine_commission(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    params: dict[str, Any] = {
        k: req.flag(k) for k in ("enable_ssh", "skip_bmc_config", "skip_networking", "skip_storage")
    }
    params["testing_scripts"] = ",".join(req.all("testing_scripts"))
    sim.commission(m, req.user, params)
    return raw(sim.machine_json(m))


def machine_deploy(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    series = (req.get("distro_series") or sim.config["default_distro_series"]).split("/")[-1]
    available = {
        b.name.split("/")[-1]
        for b in sim.boot_resources
        if b.architecture.split("/")[0] == m.architecture.split("/")[0]
    }
    if series not in {b.name.split("/")[-1] for b in sim.boot_resources}:
        choices = ", ".join(f"'{b.name}'" for b in sim.boot_resources)
        raise invalid(
            {
                "distro_series": [
                    f"'{series}' is not a valid distro_series.  It should be one of: {choices}."
                ]
            }
        )
    if series not in available:
        raise ApiError(
            400, f"Deployment operating system ubuntu/{series} is unavailable for {m.architecture}."
        )
    user_data = req.get("user_data")
    sim.deploy(
        m,
        req.user,
        {
            "distro_series": series,
            "user_data": served_user_data(user_data.encode()) if user_data else None,
            "hwe_kernel": req.get("hwe_kernel"),
            "enable_hw_sync": req.flag("enable_hw_sync"),
        },
    )
    return raw(sim.machine_json(m))


def served_user_data(stored: bytes) -> bytes:
    """What the metadata server hands cloud-init for the ``user_data`` MAAS stored.

    MAAS 3.5 stores the posted value as is and decodes it when it is base64 (strict, or once
    line breaks and spaces are removed: python-libmaas sends ``base64.encodebytes``); any other
    value is served unchanged. Nothing is refused at deploy time.
    """
    stripped = b"".join(stored.split())
    for candidate in (stored, stripped):
        try:
            decoded = base64.b64decode(candidate, validate=True)
        except (binascii.Error, ValueError):
            continue
        if base64.b64encode(decoded) == candidate:
            return decoded
    return stored


def machine_release(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    sim.release(
        m,
        req.user,
        {
            "erase": req.flag("erase") if req.get("erase") is not None else None,
            "secure_erase": req.flag("secure_erase"),
            "quick_erase": req.flag("quick_erase"),
            "force": req.flag("force"),
            "comment": req.get("comment"),
        },
    )
    return raw(sim.machine_json(m))


def machine_abort(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    sim.abort(m, req.user, req.get("comment") or "")
    return raw(sim.machine_json(m))


def machine_mark_broken(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    sim.mark_broken(m, req.user, req.get("comment") or req.get("error_description") or "")
    return raw(sim.machine_json(m))


def machine_mark_fixed(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    sim.mark_fixed(m, req.user, req.get("comment") or "")
    return raw(sim.machine_json(m))


def machine_lock(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    if m.locked:
        raise conflict("Machine is already locked")
    sim.lock_machine(m, req.user, req.get("comment") or "")
    return raw(sim.machine_json(m))


def machine_unlock(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    if not m.locked:
        raise conflict("Machine is not locked")
    sim.unlock_machine(m, req.user, req.get("comment") or "")
    return raw(sim.machine_json(m))


def machine_power_on(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    sim.power(m, req.user, on=True, comment=req.get("comment") or "")
    return raw(sim.machine_json(m))


def machine_power_off(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    if m.power_type == "manual":
        return raw(b"null")
    sim.power(m, req.user, on=False, comment=req.get("comment") or "")
    return raw(sim.machine_json(m))


def machine_query_power(sim: Simulator, req: Request) -> Any:
    return {"state": sim.query_power(machine_or_404(sim, req))}


def machine_power_parameters(sim: Simulator, req: Request) -> Any:
    return dict(machine_or_404(sim, req).power_parameters)


LAYOUTS = ("flat", "lvm", "bcache", "vmfs6", "vmfs7", "custom", "blank")


def machine_set_storage_layout(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    if m.status != S.READY:  # checked before the parameters, as MAAS does
        raise conflict("Cannot change the storage layout on a machine that is not Ready.")
    layout = req.get("storage_layout") or ""
    if layout not in LAYOUTS:
        raise invalid(
            {
                "storage_layout": [
                    "This field is required."
                    if not layout
                    else f"Select a valid choice. {layout} is not one of the available choices."
                ]
            }
        )
    m.storage_layout = layout
    m.touch(sim.now())
    return raw(sim.machine_json(m))


def machine_set_annotations(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    if m.owner is None:
        raise conflict("Cannot set workload annotation: it hasn't been acquired.")
    for key, values in req.form.items():
        if values and values[0]:
            m.owner_data[key] = values[0]
        else:
            m.owner_data.pop(key, None)
    m.touch(sim.now())
    return raw(sim.machine_json(m))


def machine_get_token(sim: Simulator, req: Request) -> Any:
    m = machine_or_404(sim, req)
    digest = hashlib.sha256(m.system_id.encode()).hexdigest()
    return {"token_key": digest[:18], "token_secret": digest[18:50], "consumer_key": digest[50:64]}


# -- handlers: interfaces -----------------------------------------------------------------------


def interfaces_list(sim: Simulator, req: Request) -> Any:
    m = node_or_404(sim, req)
    return [sim.interface_json(m, i) for i in m.interfaces]


def _interface(sim: Simulator, req: Request) -> tuple[Machine, Any]:
    m = node_or_404(sim, req)
    for iface in m.interfaces:
        if str(iface.id) == req.params["id"] or iface.name == req.params["id"]:
            return m, iface
    raise ApiError(404, "No Interface matches the given query.")


def interface_read(sim: Simulator, req: Request) -> Any:
    m, iface = _interface(sim, req)
    return sim.interface_json(m, iface)


def _editable(m: Machine, operation: str) -> None:
    if m.status not in INTERFACE_EDITABLE:
        raise conflict(
            f"Cannot {operation} interface because the machine is not "
            "New, Ready, Allocated, or Broken."
        )


def interface_link_subnet(sim: Simulator, req: Request) -> Any:
    m, iface = _interface(sim, req)
    _editable(m, "link subnet")
    mode = (req.get("mode") or "").lower()
    if mode not in ("auto", "dhcp", "static", "link_up"):
        raise invalid(
            {
                "mode": [
                    "This field is required."
                    if not mode
                    else f"Select a valid choice. {mode} is not one of the available choices."
                ]
            }
        )
    ref = req.get("subnet")
    subnet = None
    if ref:
        subnet = next(
            (s for s in sim.subnets.values() if ref in (str(s.id), f"cidr:{s.cidr}", s.cidr)), None
        )
        if subnet is None:
            raise invalid(
                {
                    "subnet": [
                        "Select a valid choice. That choice is not one of the available choices."
                    ]
                }
            )
    elif mode in ("auto", "static"):
        raise invalid({"subnet": ["This field is required."]})
    if mode == "dhcp" and any(link.mode == "dhcp" for link in iface.links):
        raise invalid({"mode": ["Interface is already set to DHCP."]})
    ip = req.get("ip_address")
    if ip and subnet and ipaddress.ip_address(ip) not in ipaddress.ip_network(subnet.cidr):
        raise invalid({"ip_address": [f"IP address is not in the given subnet '{subnet.name}'."]})
    if mode == "link_up":
        if (
            iface.links
            and not req.flag("force")
            and any(link.mode != "link_up" for link in iface.links)
        ):
            raise invalid(
                {
                    "mode": [
                        "Cannot configure interface to link up (with no IP address) while other "
                        "links are already configured. Specify force=True to override this "
                        "behavior and delete all links."
                    ]
                }
            )
        iface.links = []
    else:
        iface.links = [link for link in iface.links if link.mode != "link_up"]
    iface.links.append(
        Link(sim.new_id(), mode, subnet.id if subnet else None, ip if mode == "static" else None)
    )
    m.touch(sim.now())
    return sim.interface_json(m, iface)


def interface_unlink_subnet(sim: Simulator, req: Request) -> Any:
    m, iface = _interface(sim, req)
    _editable(m, "unlink subnet")
    link_id = req.get("id")
    keep = [link for link in iface.links if str(link.id) != link_id]
    if len(keep) == len(iface.links):
        raise invalid(
            {"id": [f"Select a valid choice. {link_id} is not one of the available choices."]}
        )
    iface.links = keep or [Link(sim.new_id(), "link_up", None)]
    m.touch(sim.now())
    return sim.interface_json(m, iface)


def interface_disconnect(sim: Simulator, req: Request) -> Any:
    m, iface = _interface(sim, req)
    _editable(m, "disconnect")
    iface.links = []
    m.touch(sim.now())
    return sim.interface_json(m, iface)


# -- handlers: events and results ---------------------------------------------------------------


EVENT_URI_PARAMS = frozenset(
    (
        "agent_name",
        "domain",
        "hostname",
        "id",
        "level",
        "limit",
        "mac_address",
        "op",
        "zone",
        "owner",
    )
)


def _int_param(req: Request, name: str, default: int | None) -> int | None:
    """``get_optional_param(..., Int)``: a non-integer is a 400 with formencode's text."""
    value = req.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ApiError(400, f"Invalid {name}: Please enter an integer value") from exc


def events_query(sim: Simulator, req: Request) -> Any:
    after = _int_param(req, "after", None)
    before = _int_param(req, "before", None)
    level = req.get("level") or "INFO"
    limit = _int_param(req, "limit", 100)
    assert limit is not None
    if limit > 1000:
        raise ApiError(400, f"Requested number of events {limit} is greater than limit: 1000")
    limit = max(limit, 1)
    if level not in LEVELS:
        raise ApiError(400, f"Unrecognised log level: {level}")
    if before is not None and after is not None:
        raise ApiError(
            400, "There is undetermined behaviour when both `after` and `before` are specified."
        )
    ids, hostnames = set(req.all("id")), set(req.all("hostname"))
    macs = {m.lower() for m in req.all("mac_address")}
    if ids or hostnames or macs:
        sids = {
            m.system_id
            for m in sim.machines.values()
            if m.system_id in ids
            or m.hostname in hostnames
            or macs & {i.mac_address for i in m.interfaces}
        }
        pool = sorted(
            (e for sid in sids for e in sim.events_by_node.get(sid, [])), key=lambda e: e.id
        )
    else:
        pool = sim.events
    minimum = LEVELS[level]
    if level == "AUDIT":
        selected = [e for e in pool if e.level == "AUDIT"]
    else:
        selected = [e for e in pool if LEVELS[e.level] >= minimum and e.level != "AUDIT"]
    owner = req.get("owner")
    if owner is not None:
        selected = [e for e in selected if e.username == owner]
    if after is not None:
        chosen = [e for e in selected if e.id > after][:limit]
    else:
        if before is not None:
            selected = [e for e in selected if e.id < before]
        chosen = selected[-limit:]
    chosen.reverse()  # always newest first
    # MAAS rebuilds the page links from the request's own filters only (``all_params``:
    # ``before``/``after`` are dropped, then the one that matters is set again).
    base = [(k, x) for k, vs in req.query.items() if k in EVENT_URI_PARAMS for x in vs]

    def uri(**extra: Any) -> str:
        return f"{API_PREFIX}events/?{urlencode(base + list(extra.items()))}"

    if chosen:
        next_uri = uri(after=chosen[0].id)
        prev_uri: str | None = uri(before=chosen[-1].id)
    else:
        # No newer events now (there may be later), or none older than ``before``.
        next_uri = uri(after=before - 1) if before is not None else uri()
        prev_uri = uri(before=after + 1) if after is not None else None
    return {
        "count": len(chosen),
        "events": [e.as_json() for e in chosen],
        "next_uri": next_uri,
        "prev_uri": prev_uri,
    }


RESULT_TYPE_NAMES = {
    "commissioning": 0,
    "commission": 0,
    "0": 0,
    "installation": 1,
    "install": 1,
    "1": 1,
    "testing": 2,
    "test": 2,
    "2": 2,
    "release": 3,
    "3": 3,
}


def results_list(sim: Simulator, req: Request) -> Any:
    m = node_or_404(sim, req)
    wanted = req.get("type")
    if wanted is not None and wanted not in RESULT_TYPE_NAMES:
        raise invalid({"type": [f"Unknown type: {wanted}"]})
    include = req.get("include_output") is not None
    return [
        sim.script_set_json(m, ss, include)
        for ss in m.script_sets
        if wanted is None or ss.type == RESULT_TYPE_NAMES[wanted]
    ]


def results_read(sim: Simulator, req: Request) -> Any:
    m = node_or_404(sim, req)
    ref = req.params["id"]
    current = {"current-commissioning": 0, "current-testing": 2, "current-installation": 1}
    if ref in current:
        sets = [s for s in m.script_sets if s.type == current[ref]]
    elif ref.isdigit():
        sets = [s for s in m.script_sets if s.id == int(ref)]
    else:
        raise ApiError(
            400,
            f'Unknown id "{ref}" must be current-commissioning, current-testing, '
            "current-installation, or the id number of a specific result.",
        )
    if not sets:
        raise ApiError(404, "No ScriptSet matches the given query.")
    return sim.script_set_json(m, sets[-1], req.get("include_output") is not None)


# -- the resource table -------------------------------------------------------------------------


def A(name: str, method: str, op: str | None, fn: Handler, **kw: Any) -> Action:
    return Action(name, method, op, fn, **kw)


P = API_PREFIX
RESOURCES = [
    Resource(
        "VersionHandler",
        f"{P}version/",
        [A("read", "GET", None, version, anon=True)],
        auth=False,
    ),
    Resource(
        "UsersHandler",
        f"{P}users/",
        [A("read", "GET", None, users_list), A("whoami", "GET", "whoami", whoami)],
    ),
    Resource(
        "AccountHandler",
        f"{P}account/",
        [A("list_authorisation_tokens", "GET", "list_authorisation_tokens", list_tokens)],
    ),
    Resource("MaasHandler", f"{P}maas/", [A("get_config", "GET", "get_config", get_config)]),
    Resource(
        "BootResourcesHandler",
        f"{P}boot-resources/",
        [
            A("read", "GET", None, boot_resources),
            A("is_importing", "GET", "is_importing", boot_is_importing),
        ],
    ),
    Resource("SubnetsHandler", f"{P}subnets/", [A("read", "GET", None, subnets)]),
    Resource("SubnetHandler", f"{P}subnets/{{id}}/", [A("read", "GET", None, subnet_read)]),
    Resource("FabricsHandler", f"{P}fabrics/", [A("read", "GET", None, fabrics)]),
    Resource("ZonesHandler", f"{P}zones/", [A("read", "GET", None, zones)]),
    Resource("ResourcePoolsHandler", f"{P}resourcepools/", [A("read", "GET", None, pools)]),
    Resource(
        "RackControllersHandler", f"{P}rackcontrollers/", [A("read", "GET", None, rack_controllers)]
    ),
    Resource(
        "MachinesHandler",
        f"{P}machines/",
        [
            A("read", "GET", None, machines_list),
            A("create", "POST", None, machines_create),
            A("is_registered", "GET", "is_registered", machines_is_registered),
            A("create", "POST", None, machines_enlist, anon=True),
            A("is_registered", "GET", "is_registered", anon_machines_is_registered, anon=True),
            A("power_parameters", "GET", "power_parameters", machines_power_parameters, admin=True),
            A("allocate", "POST", "allocate", machines_allocate),
        ],
        anon_name="AnonMachinesHandler",
    ),
    Resource(
        "MachineHandler",
        f"{P}machines/{{system_id}}/",
        [
            A("read", "GET", None, machine_read, perm="view"),
            A("update", "PUT", None, machine_update, perm="admin"),
            A("delete", "DELETE", None, machine_delete, perm="admin"),
            A("commission", "POST", "commission", machine_commission, perm="admin"),
            A("deploy", "POST", "deploy", machine_deploy, perm="edit"),
            A("release", "POST", "release", machine_release, perm="edit"),
            A("abort", "POST", "abort", machine_abort, perm="edit"),
            A("mark_broken", "POST", "mark_broken", machine_mark_broken, perm="edit"),
            A("mark_fixed", "POST", "mark_fixed", machine_mark_fixed, perm="admin"),
            A("lock", "POST", "lock", machine_lock, perm="lock"),
            A("unlock", "POST", "unlock", machine_unlock, perm="lock"),
            A("power_on", "POST", "power_on", machine_power_on, perm="edit"),
            A("power_off", "POST", "power_off", machine_power_off, perm="edit"),
            A("query_power_state", "GET", "query_power_state", machine_query_power, perm="view"),
            A(
                "power_parameters",
                "GET",
                "power_parameters",
                machine_power_parameters,
                perm="admin_read",
            ),
            A(
                "set_storage_layout",
                "POST",
                "set_storage_layout",
                machine_set_storage_layout,
                perm="admin",
            ),
            A(
                "set_workload_annotations",
                "POST",
                "set_workload_annotations",
                machine_set_annotations,
                perm="edit",
            ),
            A("set_owner_data", "POST", "set_owner_data", machine_set_annotations, perm="edit"),
            A("get_token", "GET", "get_token", machine_get_token, perm="admin_read"),
        ],
    ),
    Resource(
        "InterfacesHandler",
        f"{P}nodes/{{system_id}}/interfaces/",
        [A("read", "GET", None, interfaces_list)],
    ),
    Resource(
        "InterfaceHandler",
        f"{P}nodes/{{system_id}}/interfaces/{{id}}/",
        [
            A("read", "GET", None, interface_read),
            A("link_subnet", "POST", "link_subnet", interface_link_subnet, perm="admin"),
            A("unlink_subnet", "POST", "unlink_subnet", interface_unlink_subnet, perm="admin"),
            A("disconnect", "POST", "disconnect", interface_disconnect, perm="admin"),
        ],
    ),
    Resource("EventsHandler", f"{P}events/", [A("query", "GET", "query", events_query)]),
    Resource(
        "NodeScriptResultsHandler",
        f"{P}nodes/{{system_id}}/results/",
        [A("read", "GET", None, results_list)],
    ),
    Resource(
        "NodeScriptResultHandler",
        f"{P}nodes/{{system_id}}/results/{{id}}/",
        [A("read", "GET", None, results_read)],
    ),
]


def describe(host: str) -> dict[str, Any]:
    """The describe/ document: what python-libmaas builds its client from.

    As MAAS's ``_describe_api``: resources named after their handler class, each with an
    ``anon`` and an ``auth`` handler (or null), resources and actions sorted by name.
    """

    def handler(res: Resource, name: str, anon: bool) -> dict[str, Any]:
        acts = sorted((a for a in res.actions if a.anon == anon), key=lambda a: (a.name, a.op))
        return {
            "name": name,
            "doc": f"Simulated {name}.",
            "path": res.path,
            "params": res.params,
            "uri": f"http://{host}{res.path}",
            "actions": [
                {
                    "name": a.name,
                    "method": a.method,
                    "op": a.op,
                    "restful": a.op is None,
                    "doc": a.doc,
                }
                for a in acts
            ],
        }

    resources: list[dict[str, Any]] = []
    handlers: list[dict[str, Any]] = []
    for res in sorted(RESOURCES, key=lambda r: r.name):
        auth: dict[str, Any] | None = handler(res, res.name, anon=False)
        anon = handler(res, res.anon_name, anon=True) if res.anon_name else None
        if not res.auth:
            anon, auth = handler(res, res.name, anon=True), None
        resources.append({"name": res.name, "anon": anon, "auth": auth})
        handlers.extend(h for h in (auth, anon) if h)
    body = {"doc": "MAAS API", "resources": resources, "handlers": handlers}
    body["hash"] = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()  # noqa: S324
    return body


API_HASH = describe("localhost")["hash"]


def has_perm(user: User, perm: str, m: Machine) -> bool:
    """MAAS's local authorisation backend (no RBAC) for ``NodePermission`` on a machine."""
    can_edit = m.owner is None or m.owner == user.username or user.is_superuser
    if perm == "view":
        return True
    if perm == "edit":
        return not m.locked and can_edit
    if perm == "lock":
        return can_edit
    if perm == "admin_read":
        return user.is_superuser
    if perm == "admin":
        return not m.locked and user.is_superuser
    raise ValueError(perm)


def dispatch(sim: Simulator, req: Request) -> Response:
    """Route one authenticated-or-anonymous request under /MAAS/api/2.0/."""
    for res in RESOURCES:
        match = res.regex.match(req.path)
        if match is None:
            continue
        req.params = match.groupdict()
        op = req.get("op")
        anonymous = req.user is None
        # piston: an authenticated request goes to the handler, an anonymous one to the
        # resource's anonymous handler (version/ has only that one and no authentication).
        candidates = [
            a
            for a in res.actions
            if a.method == req.method and a.op == op and (a.anon == anonymous or not res.auth)
        ]
        if anonymous and not candidates:
            if res.anon_name is None and not any(a.anon for a in res.actions):
                raise ApiError(401, "Forbidden")
            raise ApiError(400, f"Unrecognised signature: method={req.method} op={op}")
        if not candidates:
            raise ApiError(400, f"Unrecognised signature: method={req.method} op={op}")
        action = candidates[0]
        if action.admin and req.user is not None and not req.user.is_superuser:
            raise ApiError(403, "This method is reserved for admin users.")
        if action.perm and req.user is not None:
            m = sim.machines.get(req.params.get("system_id", ""))
            if m is not None and not has_perm(req.user, action.perm, m):
                raise ApiError(403, "")  # PermissionDenied() from get_node_or_404
        result = action.fn(sim, req)
        if isinstance(result, Response):
            return result
        return Response(200, json.dumps(result).encode())
    raise ApiError(404, f"Unknown API endpoint: {req.path}.")

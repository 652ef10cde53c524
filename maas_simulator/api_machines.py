"""Machine handlers: ``machines/`` (list with MAAS's filters, create, enlist, allocate with
constraints, bulk release) and ``machines/{system_id}/`` (read, update, the lifecycle operations,
storage layout, network restore, details)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
from typing import Any

from maas_client.status import RELEASABLE, NodeStatus
from maas_simulator import lifecycle, testing
from maas_simulator.constraints import Filter, usable_architectures
from maas_simulator.errors import ApiError, conflict, invalid
from maas_simulator.interfaces import clear_links
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine
from maas_simulator.outputs import lshw_xml
from maas_simulator.power import power_form
from maas_simulator.render import anon_machine_json, machine_json
from maas_simulator.storage import LAYOUTS, LayoutError, LayoutFieldsError
from maas_simulator.wire import (
    MAC,
    Request,
    Response,
    checkbox,
    deleted,
    form_data,
    has_perm,
    hostname_problem,
    invalid_choice,
    machine_or_404,
    raw,
    string_bool,
)

S = NodeStatus


def machines_list(sim: Simulator, req: Request) -> Response:
    """``GET machines/``: every machine, or those ``ReadNodesForm``'s filters keep (repeated
    values OR-ed, different filters AND-ed). The cached JSON of each machine is sent as is,
    without joining 10,000 of them into one buffer first."""
    chunks: list[bytes] = [b"["]
    query = {k: v for k, v in req.query.items()}
    form = Filter(sim, query, acquire=False).clean() if query else None
    user = req.user
    assert user is not None
    for sid in sim.order:
        m = sim.machines.get(sid)
        if m is None or (form is not None and not form.matches(m)):
            continue
        if not user.is_superuser and m.owner not in (None, user.username):
            continue  # NodePermission.view: another user's machine is not listed
        chunks.append(machine_json(sim, m))
        chunks.append(b",")
    if len(chunks) > 1:
        chunks.pop()
    chunks.append(b"]")
    return Response(200, chunks)


def _power(req: Request, m: Machine | None) -> tuple[str, dict[str, Any]] | None:
    """``WithPowerTypeMixin``: the power type and parameters to store (``power.py``)."""
    fields = {k: v for k, v in {**req.query, **req.form}.items() if k != "op"}
    if m is None:
        return power_form(fields, None, {})
    return power_form(fields, m.power_type, m.power_parameters)


def _valid_architectures(sim: Simulator) -> list[str]:
    return usable_architectures(sim)


def machines_create(sim: Simulator, req: Request) -> Response:
    # get_optional_param(request.data, ..., StringBool): read before the form
    commission = string_bool(req.data, "commission", default=True)
    deployed = string_bool(req.data, "deployed")
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
    if hostname and (problem := hostname_problem(hostname)):
        errors["hostname"] = [problem]
    elif (
        hostname
        and not sim.allow_duplicate_hostnames
        and any(m.hostname == hostname for m in sim.machines.values())
    ):
        errors["hostname"] = ["Node with this Hostname already exists."]
    try:
        power_type, power = _power(req, None) or ("", {})
    except ApiError as exc:
        if not exc.json_body:
            raise
        errors.update(exc.body)
    if power_type not in ("", "ipmi") and "mac_addresses" in errors:  # MachineForm.clean
        errors.setdefault("power_type", []).append(
            f"Can't set power type to {power_type} without network interfaces"
        )
    if errors:
        raise invalid(errors)
    assert req.user is not None
    m = sim.add_machine(
        hostname=hostname,
        power_type=power_type,
        power_parameters=power,
        mac_addresses=macs,
        architecture=arch,
        discovered=False,  # commissioning finds the hardware
    )
    m.power_state = "unknown"  # no power action or query has run yet
    if req.user.is_superuser and commission and not deployed:
        # The same body goes through CommissionForm (its flags are checkboxes); MAAS ignores
        # the form's errors (LP:1600328), but not a power action failing after the commit: the
        # caller gets its 503 and the machine exists (errors.jsonl 160-161)
        try:
            params = commission_form(sim, req)
            lifecycle.commission(sim, m, req.user, params)
        except ApiError as exc:
            if exc.status == 503:
                raise
    return raw(machine_json(sim, m))


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
    return raw(anon_machine_json(sim, m))


def machines_list_allocated(sim: Simulator, req: Request) -> Response:
    """``op=list_allocated``: the machines allocated with the caller's token and still held
    (``get_allocated_visible_machines``; a deploy from Ready allocates with no token)."""
    token = req.token.token_key if req.token is not None else None
    owned = [
        machine_json(sim, m)
        for sid in sim.order
        if (m := sim.machines.get(sid)) is not None and m.owner is not None and m.token == token
    ]
    return Response(200, [b"[", *_joined(owned), b"]"])


def _joined(chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for n, chunk in enumerate(chunks):
        out += [b",", chunk] if n else [chunk]
    return out


def machines_power_parameters(sim: Simulator, req: Request) -> Any:
    ids = set(req.all("id"))
    return {
        sid: dict(m.power_parameters) for sid, m in sim.machines.items() if not ids or sid in ids
    }


def machines_allocate(sim: Simulator, req: Request) -> Response:
    """``AcquireNodeForm``: the cheapest (CPUs + memory/1024) Ready machine the caller may edit
    that meets every constraint; ``agent_name`` and ``comment`` go with the acquisition."""
    user = req.user
    assert user is not None
    form = Filter(sim, req.data, acquire=True).clean()
    candidates = sorted(
        (
            (m.cpu_count + m.memory / 1024.0, n, m)
            for n, m in enumerate(sim.machines[s] for s in sim.order if s in sim.machines)
            if m.status == S.READY and has_perm(user, "edit", m) and form.matches(m)
        ),
        key=lambda item: item[:2],
    )
    if not candidates:
        constraints = form.describe()
        system_id = req.get("system_id")
        if constraints == "":
            message = "No machine available."
        elif system_id is not None:
            message = f"No machine with system ID {system_id} available."
        else:
            given = [(k, v) for k, v in req.data.items() if k != "op"]
            message = (
                f'No available machine matches constraints: {given} (resolved to "{constraints}")'
            )
        raise ApiError(409, message)
    m = candidates[0][2]
    verbose = string_bool(req.form, "verbose")
    if not string_bool(req.form, "dry_run"):
        lifecycle.acquire(
            sim, m, user, req.data.get("agent_name", [""])[0], req.get("comment") or ""
        )
        m.token = req.token.token_key if req.token is not None else None
    data = json.loads(machine_json(sim, m))
    by_type: dict[str, Any] = {}
    storage = form.storage_match(m) if form.storage is not None else {}
    if storage:
        by_type["storage"] = {}
        for device, label in storage.items():
            if label:
                by_type["storage"].setdefault(label, []).append(device)
    interfaces = form.interface_match(m) if form.interfaces is not None else {}
    if interfaces:
        by_type["interfaces"] = interfaces
    if verbose:
        by_type["verbose_storage"] = {m.system_id: storage} if storage else {}
        by_type["verbose_interfaces"] = {m.system_id: interfaces} if interfaces else {}
    data["constraints_by_type"] = by_type
    return raw(json.dumps(data).encode())


def machines_release(sim: Simulator, req: Request) -> Any:
    """Bulk release (``machines=`` system ids, ``comment``): all or nothing, as MAAS checks
    existence, then permission, then state before releasing any. Answers the released ids."""
    user = req.user
    assert user is not None
    system_ids = list(dict.fromkeys(req.data.get("machines", [])))
    unknown = [sid for sid in system_ids if sid not in sim.machines]
    if unknown:
        raise ApiError(400, f"Unknown machine(s): {', '.join(unknown)}.")
    machines = [sim.machines[sid] for sid in system_ids]
    denied = [m.system_id for m in machines if not has_perm(user, "edit", m)]
    if denied:
        raise ApiError(
            403,
            "You don't have the required permission to release the following machine(s): "
            f"{', '.join(denied)}.",
        )
    failed = [
        f"{m.system_id} ('{m.status.label}')"
        for m in machines
        if m.status != S.READY and m.status not in RELEASABLE
    ]
    if failed:
        raise conflict(
            f"Machine(s) cannot be released in their current state: {', '.join(failed)}."
        )
    released = []
    comment = req.data.get("comment", [""])[0]
    for m in sorted(machines, key=lambda m: sim.order.index(m.system_id)):
        if m.status == S.READY:
            continue
        lifecycle.release(sim, m, user, {"scripts": [], "comment": comment})
        released.append(m.system_id)
    return released


def machine_read(sim: Simulator, req: Request) -> Response:
    return raw(machine_json(sim, machine_or_404(sim, req)))


def machine_update(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    power = _power(req, m)  # checked before anything is saved
    hostname = req.get("hostname")
    if hostname and (problem := hostname_problem(hostname)):
        raise invalid({"hostname": [problem]})
    if req.get("hostname"):
        m.hostname = req.get("hostname") or m.hostname
    if power is not None:
        m.power_type, m.power_parameters = power
    m.touch(sim.now())
    return raw(machine_json(sim, m))


def machine_delete(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    sim.start_op(m, "delete")
    for iface in m.interfaces:
        clear_links(sim.net, iface)  # its addresses go back to their subnets
    del sim.machines[m.system_id]
    return deleted()


def machine_commission(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    lifecycle.commission(sim, m, req.user, commission_form(sim, req))
    return raw(machine_json(sim, m))


COMMISSION_FLAGS = ("enable_ssh", "skip_bmc_config", "skip_networking", "skip_storage")


def commission_form(sim: Simulator, req: Request) -> dict[str, Any]:
    """``CommissionForm``: its flags are ``BooleanField``s ("0" is true), its script lists
    comma-separated choices."""
    data = form_data(req)
    params: dict[str, Any] = {
        k: checkbox(data[k]) if k in data else False for k in COMMISSION_FLAGS
    }
    params["testing_scripts"] = ",".join(req.all("testing_scripts"))
    _check_script_choices(sim, "commissioning_scripts", req.all("commissioning_scripts"), 0)
    _check_commissioning_tests(sim, params["testing_scripts"])
    return params


def _check_script_choices(sim: Simulator, field: str, given: list[str], type_: int) -> None:
    """``ScriptForm``'s script list: comma-separated names and tags of scripts of the type."""
    scripts = sim.scripts.of_type(type_)
    choices = {s.name for s in scripts} | {t for s in scripts for t in s.tags}
    names = [n for value in given for n in value.split(",") if value]
    bad = next((n for n in names if n not in choices), None)
    if bad is not None:
        raise invalid(
            {field: [f"Select a valid choice. {bad} is not one of the available choices."]}
        )


def machine_test(sim: Simulator, req: Request) -> Response:
    """``op=test``: the form is the body (``request.data``); answers the machine, Testing."""
    m = machine_or_404(sim, req)
    assert req.user is not None
    testing.start(sim, m, req.user, req.data)
    return raw(machine_json(sim, m))


def machine_override_failed_testing(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    testing.override_failed_testing(sim, m, req.user, req.data.get("comment", [""])[0])
    return raw(machine_json(sim, m))


def _check_commissioning_tests(sim: Simulator, given: str) -> None:
    """``CommissionForm``'s ``testing_scripts``: names or tags of testing scripts, or
    ``none``."""
    if not given:
        return
    testing = sim.scripts.of_type(2)
    choices = {"none"} | {s.name for s in testing} | {t for s in testing for t in s.tags}
    bad = next((n for n in given.split(",") if n not in choices), None)
    if bad is not None:
        raise invalid(
            {
                "testing_scripts": [
                    f"Select a valid choice. {bad} is not one of the available choices."
                ]
            }
        )


def machine_deploy(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    options = allocation_options(req)
    given = req.get("distro_series") or sim.config["default_distro_series"]
    series = given.split("/")[-1]
    available = {
        b.name.split("/")[-1]
        for b in sim.boot_resources
        if b.architecture.split("/")[0] == m.architecture.split("/")[0]
    }
    if series not in {b.name.split("/")[-1] for b in sim.boot_resources}:
        raise invalid_choice("distro_series", given, release_choices(sim))
    if series not in available:
        raise ApiError(
            400, f"Deployment operating system ubuntu/{series} is unavailable for {m.architecture}."
        )
    kernel = deploy_kernel(sim, m, series, req.get("hwe_kernel"))
    user_data = req.get("user_data")
    lifecycle.deploy(
        sim,
        m,
        req.user,
        {
            "distro_series": series,
            "user_data": served_user_data(user_data.encode()) if user_data else None,
            "hwe_kernel": kernel,
            "enable_hw_sync": options["enable_hw_sync"],
            "agent_name": req.data.get("agent_name", [""])[0],
            "comment": req.get("comment"),
        },
    )
    return raw(machine_json(sim, m))


ALLOCATION_FLAGS = (
    "install_rackd",
    "install_kvm",
    "register_vmhost",
    "ephemeral_deploy",
    "bridge_all",
    "bridge_stp",
    "enable_hw_sync",
)
BRIDGE_TYPES = ("standard", "ovs")


def allocation_options(req: Request) -> dict[str, Any]:
    """``get_allocation_options``: the body's flags are formencode ``StringBool``s (``0`` is
    false, ``maybe`` a 400 ``Invalid <name>: …``), ``bridge_fd`` an ``Int``, ``bridge_type`` a
    choice, all read before the machine's state is looked at. Only ``enable_hw_sync`` changes
    what the simulator does (docs/simulator.md, "What is deliberately not simulated")."""
    options: dict[str, Any] = {name: string_bool(req.form, name) for name in ALLOCATION_FLAGS[:4]}
    bridge_type = form_data(req).get("bridge_type", "standard")
    if bridge_type not in BRIDGE_TYPES:
        # MAAS raises compose_invalid_choice_text's template itself: "%(value)s" stays unfilled
        raise invalid(
            {
                "bridge_type": [
                    "'%(value)s' is not a valid bridge_type.  It should be one of: "
                    "'standard', 'ovs'."
                ]
            }
        )
    options["bridge_all"] = string_bool(req.form, "bridge_all")
    options["bridge_stp"] = string_bool(req.form, "bridge_stp")
    fd = req.form.get("bridge_fd")
    if fd and fd[-1]:
        try:
            int(fd[-1])
        except ValueError as exc:
            raise ApiError(400, "Invalid bridge_fd: Please enter an integer value") from exc
    options["enable_hw_sync"] = string_bool(req.form, "enable_hw_sync")
    return options


def deploy_kernel(sim: Simulator, m: Machine, series: str, given: str | None) -> str:
    """``validate_hwe_kernel``: the kernel asked for must be one the series' images offer for
    the machine's architecture; none asked for is the series' GA kernel (what MAAS shows as
    ``hwe_kernel`` once the deploy starts, recorded against MAAS 3.5.10)."""
    arch = m.architecture.split("/")[0]
    kernels = [
        b.architecture.split("/")[-1]
        for b in sim.boot_resources
        if b.name.split("/")[-1] == series and b.architecture.split("/")[0] == arch
    ]
    if given:
        if given not in kernels:
            raise invalid(
                {
                    "hwe_kernel": [
                        f"{given} is not available for ubuntu/{series} on {m.architecture}."
                    ]
                }
            )
        return given
    ga = f"ga-{UBUNTU_VERSIONS.get(series, series)}"
    return ga if ga in kernels or not kernels else sorted(kernels)[0]


UBUNTU_VERSIONS = {  # release titles sort by version
    "trusty": "14.04",
    "xenial": "16.04",
    "bionic": "18.04",
    "focal": "20.04",
    "jammy": "22.04",
    "noble": "24.04",
    "oracular": "24.10",
    "plucky": "25.04",
}


def release_choices(sim: Simulator) -> list[str]:
    """``list_release_choices``: the default (a blank choice), then each release the images
    offer once, whatever architectures have it, ordered by OS and release title."""
    names = {b.name for b in sim.boot_resources}
    ordered = sorted(
        names,
        key=lambda n: (n.split("/")[0], UBUNTU_VERSIONS.get(n.split("/")[-1], n.split("/")[-1])),
    )
    return ["", *ordered]


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
    lifecycle.release(sim, m, req.user, release_form(sim, req))
    return raw(machine_json(sim, m))


def release_form(sim: Simulator, req: Request) -> dict[str, Any]:
    """``ReleaseForm``: ``scripts`` (release scripts by name or tag, or ``none``), ``erase``,
    ``secure_erase``, ``quick_erase`` (Django checkboxes: "0" is true), ``force``,
    ``comment``, and the scripts' parameters. Any erase flag adds ``wipe-disks``; its input is
    built as MAAS's machine handler builds it (``erase`` gives both flags; the request's
    explicit ones then replace that input, as a dict union does)."""
    data = {k: v[-1] for k, v in req.data.items() if v}
    release_scripts = sim.scripts.of_type(3)
    choices = {"none"} | {s.name for s in release_scripts}
    choices |= {t for s in release_scripts for t in s.tags}
    scripts = data["scripts"].split(",") if "scripts" in data else []
    bad = next((n for n in scripts if n not in choices), None)
    if bad is not None:
        raise invalid(
            {"scripts": [f"Select a valid choice. {bad} is not one of the available choices."]}
        )
    flags = {k: checkbox(data[k]) if k in data else False for k in RELEASE_FLAGS}
    if (flags["erase"] or flags["secure_erase"] or flags["quick_erase"]) and (
        "wipe-disks" not in scripts
    ):
        scripts.append("wipe-disks")
    given: dict[str, dict[str, Any]] = {}
    if flags["erase"]:
        given["wipe-disks"] = {
            "secure_erase": flags["secure_erase"],
            "quick_erase": flags["quick_erase"],
        }
    if "wipe-disks" in scripts:  # the true flags, bare or ``wipe-disks_<flag>``
        explicit = {
            k: True
            for k in ("secure_erase", "quick_erase")
            if flags[k] or checkbox(data.get(f"wipe-disks_{k}", ""))
        }
        if explicit:
            given["wipe-disks"] = explicit  # ``params | get_script_param_dict(...)``
    return {"scripts": scripts, "input": given, "comment": data.get("comment") or ""}


RELEASE_FLAGS = ("erase", "secure_erase", "quick_erase", "force")


def machine_abort(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    lifecycle.abort(sim, m, req.user, req.get("comment") or "")
    return raw(machine_json(sim, m))


def machine_mark_broken(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    lifecycle.mark_broken(
        sim, m, req.user, req.get("comment") or req.get("error_description") or ""
    )
    return raw(machine_json(sim, m))


def machine_mark_fixed(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    lifecycle.mark_fixed(sim, m, req.user, req.get("comment") or "")
    return raw(machine_json(sim, m))


def machine_lock(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    if m.locked:
        raise conflict("Machine is already locked")
    lifecycle.lock_machine(sim, m, req.user, req.get("comment") or "")
    return raw(machine_json(sim, m))


def machine_unlock(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    if not m.locked:
        raise conflict("Machine is not locked")
    lifecycle.unlock_machine(sim, m, req.user, req.get("comment") or "")
    return raw(machine_json(sim, m))


def machine_power_on(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    lifecycle.power(sim, m, req.user, on=True, comment=req.get("comment") or "")
    return raw(machine_json(sim, m))


def machine_power_off(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    assert req.user is not None
    if m.power_type == "manual":
        return raw(b"null")
    lifecycle.power(sim, m, req.user, on=False, comment=req.get("comment") or "")
    return raw(machine_json(sim, m))


def machine_query_power(sim: Simulator, req: Request) -> Any:
    return {"state": lifecycle.query_power(sim, machine_or_404(sim, req), req.user)}


def machine_power_parameters(sim: Simulator, req: Request) -> Any:
    return dict(machine_or_404(sim, req).power_parameters)


LAYOUT_PARAMS = ("boot_size", "root_size", "root_device", "vg_name", "lv_name", "lv_size")


def machine_set_storage_layout(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    if m.status != S.READY:  # checked before the parameters, as MAAS does
        raise conflict("Cannot change the storage layout on a machine that is not Ready.")
    layout = req.get("storage_layout") or ""
    if not layout:
        raise invalid({"storage_layout": ["This field is required."]})
    if layout not in LAYOUTS:
        raise invalid_choice("storage_layout", layout, sorted(LAYOUTS))
    params = {k: v[0] for k, v in req.data.items() if k in LAYOUT_PARAMS and v and v[0]}
    root = params.get("root_device")
    if root is not None:
        ids = [str(d.id) for d in m.storage.physical]
        if root not in ids:
            raise invalid_choice("root_device", root, ids)
    try:
        sim.apply_layout(m, layout, params)
    except LayoutFieldsError as exc:
        raise invalid(exc.errors) from exc
    except LayoutError as exc:
        if str(exc) == "missing-boot-disk":
            raise ApiError(
                400, "Machine is missing a boot disk; no storage layout can be applied."
            ) from exc
        raise ApiError(400, f"Failed to configure storage layout '{layout}': {exc}") from exc
    return raw(machine_json(sim, m))


def _restorable(m: Machine, what: str) -> None:
    if m.status not in (S.READY, S.FAILED_TESTING):
        raise conflict(f"Machine must be in a ready or failed testing state to restore {what}")


def machine_restore_networking(sim: Simulator, req: Request) -> Response:
    """``restore_networking_configuration``: the NICs as commissioning saw them, then the
    initial links (boot NIC AUTO, the others LINK_UP)."""
    m = machine_or_404(sim, req)
    _restorable(m, "networking configuration")
    for iface in m.interfaces:
        iface.restore()
    sim.reset_networking(m)
    return raw(machine_json(sim, m))


def machine_restore_storage(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    _restorable(m, "storage configuration.")
    sim.apply_layout(m, sim.config["default_storage_layout"])
    return raw(machine_json(sim, m))


def machine_restore_default(sim: Simulator, req: Request) -> Response:
    m = machine_or_404(sim, req)
    _restorable(m, "default networking and storage configuration.")
    sim.apply_layout(m, sim.config["default_storage_layout"])
    for iface in m.interfaces:
        iface.restore()
    sim.reset_networking(m)
    return raw(machine_json(sim, m))


def machine_details(sim: Simulator, req: Request) -> Response:
    """``op=details``: BSON ``{"lshw": <XML>, "lldp": <XML>}`` from commissioning (null until
    commissioning has run)."""
    m = machine_or_404(sim, req)
    known = m.cpu_count > 0
    return Response(
        200,
        bson_binary_document(
            {
                "lshw": lshw_xml(m, sim.node_devices(m)).encode() if known else None,
                "lldp": LLDP_XML.encode() if known else None,
            }
        ),
        content_type="application/bson",
    )


def bson_binary_document(fields: dict[str, bytes | None]) -> bytes:
    """A BSON document of binary (generic subtype) or null values: all ``details`` needs."""
    body = b""
    for name, value in fields.items():
        key = name.encode() + b"\x00"
        if value is None:
            body += b"\x0a" + key
        else:
            body += b"\x05" + key + struct.pack("<i", len(value)) + b"\x00" + value
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


LLDP_XML = '<?xml version="1.0" encoding="UTF-8"?>\n<lldp label="LLDP neighbors"/>\n'


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
    return raw(machine_json(sim, m))


def machine_get_token(sim: Simulator, req: Request) -> Any:
    m = machine_or_404(sim, req)
    digest = hashlib.sha256(m.system_id.encode()).hexdigest()
    return {"token_key": digest[:18], "token_secret": digest[18:50], "consumer_key": digest[50:64]}

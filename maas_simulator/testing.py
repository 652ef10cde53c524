"""``op=test`` and ``op=override_failed_testing``: MAAS's ``TestForm`` (scripts by name or tag,
their parameters, ``enable_ssh``), ``Node.start_testing`` and the refusals of both, then the run
on the machine (``runner.py``; docs/simulator.md, "Testing scripts and results").

Called by the API with the simulator lock held. Refusals raise MAAS's answers (``errors.py``).
"""

from __future__ import annotations

import re
from typing import Any

from maas_client.status import NodeStatus
from maas_simulator import hwsync, lifecycle, runner
from maas_simulator.errors import ApiError, conflict, invalid
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine, ScriptSet
from maas_simulator.scripts import TESTING, Script
from maas_simulator.scriptsets import (
    ParameterErrors,
    clean_old,
    new_results,
    script_param_dict,
    select,
)
from maas_simulator.users import User
from maas_simulator.wire import checkbox

S = NodeStatus
# node_action.Test.actionable_statuses (MAAS 3.5)
TESTABLE = {
    S.NEW,
    S.READY,
    S.RESERVED,
    S.ALLOCATED,
    S.DEPLOYED,
    S.BROKEN,
    S.MISSING,
    S.RETIRED,
    S.RESCUE_MODE,
    S.FAILED_COMMISSIONING,
    S.FAILED_DEPLOYMENT,
    S.FAILED_RELEASING,
    S.FAILED_DISK_ERASING,
    S.FAILED_ENTERING_RESCUE_MODE,
    S.FAILED_EXITING_RESCUE_MODE,
    S.FAILED_TESTING,
}
BOOT_STEPS = (
    (3, "INFO", "Powering on", ""),
    (10, "INFO", "Performing PXE boot", ""),
    (20, "INFO", "Loading ephemeral", ""),
)
SCRIPTS_AT = 25  # the ephemeral environment is up and the runner starts
NOT_AVAILABLE = "Test is not available because of the current state of the node."
CHOICE = "Select a valid choice. {} is not one of the available choices."
DURATION = re.compile(r"^(?:(\d+) )?(?:(?:(\d+):)?(\d+):)?(\d+)(?:\.\d+)?$")


def _duration(value: str) -> int | None:
    """Django's ``parse_duration`` for the forms MAAS users send: seconds, ``MM:SS``,
    ``HH:MM:SS``, ``D HH:MM:SS`` (None: not a duration)."""
    found = DURATION.match(value.strip())
    if found is None:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _storage_choices(m: Machine) -> set[str]:
    """``_get_storage_choices``: all, and each disk's id, name, model, serial, model:serial,
    tags."""
    choices = {"all"}
    for d in m.storage.physical:
        choices |= {str(d.id), d.name, str(d.model), str(d.serial), f"{d.model}:{d.serial}"}
        choices |= set(d.tags)
    return choices


def _interface_choices(m: Machine) -> set[str]:
    """``_get_interface_choices``: all, and each interface's (without children) id, name, MAC,
    vendor, product, vendor:product, tags."""
    choices = {"all"}
    for i in m.interfaces:
        if any(i.id in x.parents for x in m.interfaces):
            continue
        choices |= {str(i.id), i.name, i.mac_address, str(i.vendor), str(i.product)}
        choices |= {f"{i.vendor}:{i.product}", *i.tags}
    return choices


def _fields(scripts: list[Script]) -> dict[str, dict[str, Any]]:
    """The form's parameter fields: ``<script>_<param>`` for every testing script, and the
    bare ``<param>`` as the first script declaring it has it."""
    fields: dict[str, dict[str, Any]] = {}
    for script in scripts:
        for pname, param in script.parameters.items():
            fields[f"{script.name}_{pname}"] = param
            if pname not in fields and pname not in ("testing_scripts", "enable_ssh"):
                fields[pname] = param
    return fields


def clean_form(
    sim: Simulator, m: Machine, data: dict[str, list[str]]
) -> tuple[list[str], dict[str, Any], bool]:
    """``TestForm.is_valid``: every field's error and the node-state error, then (on a
    Deployed machine) the destructive-script error. Returns the script names and tags, the
    cleaned fields and ``enable_ssh``."""
    errors: dict[str, list[str]] = {}
    testing = sim.scripts.of_type(TESTING)
    names: list[str] | None = None
    if data.get("testing_scripts"):
        given = data["testing_scripts"][-1].split(",")  # the last value, split on commas
        choices = {s.name for s in testing} | {t for s in testing for t in s.tags}
        bad = next((n for n in given if n not in choices), None)
        if bad is not None:
            errors["testing_scripts"] = [CHOICE.format(bad)]
        else:
            names = given
    cleaned: dict[str, Any] = {}
    storage: set[str] | None = None
    interfaces: set[str] | None = None
    for name, param in _fields(testing).items():
        values = data.get(name)
        value = values[-1] if values else None
        kind = param.get("type")
        if kind == "boolean":
            cleaned[name] = checkbox(value) if value is not None else False
            continue
        if value is None or value.strip() == "":
            continue
        if kind == "storage":
            storage = storage if storage is not None else _storage_choices(m)
            if value not in storage:
                errors[name] = [CHOICE.format(value)]
                continue
        elif kind == "interface":
            interfaces = interfaces if interfaces is not None else _interface_choices(m)
            if value not in interfaces:
                errors[name] = [CHOICE.format(value)]
                continue
        elif kind == "runtime":
            seconds = _duration(value)
            if seconds is None:
                errors[name] = ["Enter a valid duration."]
                continue
            cleaned[name] = seconds
            continue
        elif kind == "choice":
            options = [c if isinstance(c, str) else c[0] for c in param.get("choices", [])]
            if value not in options:
                errors[name] = [CHOICE.format(value)]
                continue
        cleaned[name] = value.strip()
    if m.status not in TESTABLE or m.locked or not m.interfaces:
        errors["__all__"] = [NOT_AVAILABLE]
    if m.status == S.DEPLOYED and names is not None:
        wanted = set(names)
        if any(s.destructive and (s.name in wanted or wanted & set(s.tags)) for s in sim.scripts):
            errors.setdefault("testing_scripts", []).append(
                "Destructive tests may only be run on undeployed machines."
            )
    if errors:
        raise invalid(errors)
    enable_ssh = checkbox(data["enable_ssh"][-1]) if data.get("enable_ssh") else False
    return names or [], cleaned, enable_ssh


def start(sim: Simulator, m: Machine, user: User, data: dict[str, list[str]]) -> None:
    """``op=test``: the form, then ``Node.start_testing``'s checks, the testing script set,
    status Testing, and the run."""
    names, cleaned, enable_ssh = clean_form(sim, m, data)
    if m.power_type == "":
        raise ApiError(
            500, "Unconfigured power type. Please configure the power type and try again."
        )
    if m.status == S.NEW and not any(s.type == 0 for s in m.script_sets):
        raise ApiError(
            400,
            "Unable to start machine testing; this node has never been commissioned. Please "
            "use the 'Commission' action to commission & test this machine.",
        )
    names = names or ["commissioning"]
    params = script_param_dict(sim.scripts, names, cleaned)
    if any(s.for_hardware for s in sim.scripts.of_type(TESTING)):
        sim.node_devices(m)  # for_hardware matches them
    now = sim.now()
    results = []
    try:
        for script in select(sim.scripts, m, names, TESTING):
            results += new_results(m, script, params.get(script.name, {}), sim.new_id, now)
    except ParameterErrors as exc:  # the parameters form's errors: JSON without a charset
        raise ApiError(400, exc.errors, json_body=True, content_type="application/json") from exc
    if not results:
        raise ApiError(400, "No testing scripts found!")
    for r in results:
        for param in r.parameters.values():
            if param.get("type") == "interface" and param.get("value") == "all":
                raise ApiError(400, "An interface must be configured to run network testing!")
        if S.DEPLOYED in (m.status, m.previous_status) and r.script and r.script.destructive:
            raise ApiError(400, "Unable to run destructive test while deployed!")
    ss = ScriptSet(id=sim.new_id(), type=2, started=now, results=results)
    m.script_sets.append(ss)
    clean_old(m, ss)
    was_on = m.power_state == "on"
    sim.start_op(m, "test")
    sim.request_event(m, "User starting node testing", "start testing", "", user)
    sim.event(m, "INFO", "Testing", "")
    sim.set_status(m, S.TESTING)
    if m.owner is None:
        m.owner = user.username
    if m.faults.bmc_unreachable:
        sim.schedule(m, 3, lambda sim, mm: lifecycle.power_failure(sim, mm, "on"))
        return
    lifecycle.power_on(sim, m)
    sim.timeline(m, BOOT_STEPS, until=1e9)
    runner.start(sim, m, ss, at=SCRIPTS_AT, enable_ssh=enable_ssh, was_on=was_on)


def override_failed_testing(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    """``Node.override_failed_testing``: Ready, or Deployed when an OS is set; the request
    is logged even when refused."""
    sim.request_event(
        m, "User overrode 'Failed testing' status", "ignore failed tests", comment, user
    )
    if m.status != S.FAILED_TESTING:
        raise conflict("Unable to override node status. Node is not in 'Failed testing' status.")
    target = S.READY if m.osystem == "" else S.DEPLOYED
    sim.start_op(m, "override_failed_testing")
    sim.set_status(m, target)
    m.error_description = ""
    if target == S.DEPLOYED:
        hwsync.resume(sim, m)

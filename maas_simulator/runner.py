"""Testing scripts running on a machine in its ephemeral environment, on the simulator's clock:
each result goes Running, then Passed or Failed with its output; the runner then signals the
region, which moves the machine on (docs/simulator.md, "Testing scripts and results").

A script given a ``url`` parameter checks that each URL answers from the node's network: the
simulator fetches each URL from its own host (a thread, never under the simulator lock); the
machine fault ``node_network_unreachable`` makes every fetch time out. ``script_fails`` makes a
script exit 1 (on one device of a per-device script); ``script_hangs`` makes it never report:
MAAS's script reaper marks it Timed out once its timeout and five minutes have passed and fails
the machine (3.5 source, ``mark_nodes_failed_after_missing_script_timeout``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import requests

from maas_client.status import NodeStatus
from maas_simulator import hwsync
from maas_simulator.model import Simulator, Step
from maas_simulator.nodes import Machine, ScriptResult, ScriptSet
from maas_simulator.outputs import failing, test_output
from maas_simulator.scripts import duration

S = NodeStatus
SCRIPT_SECONDS = 5  # MAAS seconds a script runs unless a runtime parameter says otherwise
REAPER_SLACK = 5 * 60  # the reaper's grace after a script's timeout
FETCH_TIMEOUT = 3.0  # real seconds per URL
# NODE_TESTING_RESET_READY_TRANSITIONS: passing tests from these ends in Ready
RESET_READY = {
    S.NEW,
    S.COMMISSIONING,
    S.FAILED_DEPLOYMENT,
    S.MISSING,
    S.RETIRED,
    S.BROKEN,
    S.FAILED_RELEASING,
    S.FAILED_DISK_ERASING,
    S.FAILED_ENTERING_RESCUE_MODE,
    S.FAILED_EXITING_RESCUE_MODE,
    S.FAILED_TESTING,
}


@dataclass
class Run:
    """One run of a testing script set on a machine."""

    ss: ScriptSet
    op_id: int
    enable_ssh: bool
    was_on: bool  # powered on before: the runner reboots it afterwards, else powers it off
    seconds: float  # how long a script without a runtime parameter runs
    checks: dict[int, list[str]] = field(default_factory=dict)  # result id → URLs
    fetched: dict[int, tuple[bool, bytes]] | None = None  # the URL checks' outcomes
    waiting: set[int] = field(default_factory=set)  # results ended but for their URL checks
    fails: set[int] = field(default_factory=set)
    hangs: set[int] = field(default_factory=set)


def runtime(r: ScriptResult) -> int | None:
    """A runtime parameter's value (seconds): how long the script runs, and its timeout."""
    for param in r.parameters.values():
        if param.get("type") == "runtime" and isinstance(param.get("value"), int):
            return int(param["value"])
    return None


def url_checks(r: ScriptResult) -> list[str]:
    for param in r.parameters.values():
        if param.get("type") == "url" and param.get("value"):
            return [u.strip() for u in str(param["value"]).split(",") if u.strip()]
    return []


def start(
    sim: Simulator,
    m: Machine,
    ss: ScriptSet,
    *,
    at: float,
    seconds: float = SCRIPT_SECONDS,
    enable_ssh: bool = False,
    was_on: bool = False,
) -> None:
    """Schedule the set's scripts: Running at ``at`` (MAAS seconds from now), each ending
    after its run time; a hanging one is left to the reaper."""
    sim.node_devices(m)  # what GPU scripts print about
    hung = set(m.faults.script_hangs)
    run = Run(
        ss,
        m.op_id,
        enable_ssh,
        was_on,
        seconds,
        checks={
            r.id: urls
            for r in ss.results
            if (urls := url_checks(r)) and r.name not in m.faults.script_outputs
        },
        fails=failing(m, ss),
        hangs={r.id for r in ss.results if r.name in hung},
    )
    sim.schedule(m, at, lambda sim, mm: _begin(sim, mm, run))
    if run.checks:
        threading.Thread(
            target=_fetch_all, args=(sim, m, run, m.faults.node_network_unreachable), daemon=True
        ).start()


def _begin(sim: Simulator, m: Machine, run: Run) -> None:
    if not run.ss.results:  # nothing to run: the runner reports at once
        signal(sim, m, run)
        return
    for r in run.ss.results:
        sim.set_result(m, run.ss, r, 1)
    for r in run.ss.results:
        if r.id in run.hangs:
            timeout = runtime(r) or (r.script.timeout if r.script else 0)
            if timeout:
                sim.schedule(m, timeout + REAPER_SLACK, _reaper(run, r, timeout))
            continue
        seconds = runtime(r) or run.seconds
        sim.schedule(m, seconds, _ender(run, r))


def _ender(run: Run, r: ScriptResult) -> Step:
    def end(sim: Simulator, m: Machine) -> None:
        if r.id in run.checks and run.fetched is None:
            run.waiting.add(r.id)  # written once the URL checks are back
            return
        _end(sim, m, run, r)

    return end


def _end(sim: Simulator, m: Machine, run: Run, r: ScriptResult) -> None:
    if r.id in run.checks and run.fetched is not None:
        passed, output = run.fetched[r.id]
    else:
        passed = r.id not in run.fails
        given = m.faults.script_outputs.get(r.name)
        output = given.encode() if given is not None else test_output(m, r, passed)
    sim.set_result(m, run.ss, r, 2 if passed else 3, output=output, exit_status=0 if passed else 1)
    if not run.hangs and all(x.status not in (0, 1) for x in run.ss.results):
        signal(sim, m, run)


def _reaper(run: Run, r: ScriptResult, timeout: int) -> Step:
    def reap(sim: Simulator, m: Machine) -> None:
        if m.status != S.TESTING or r.status != 1:
            return
        sim.set_result(m, run.ss, r, 4)
        sim.mark_failed(
            m, f"{r.name} has run past it's timeout({duration(timeout)})", script_status=5
        )
        if not run.enable_ssh:
            m.power_state = "off"

    return reap


def signal(sim: Simulator, m: Machine, run: Run) -> None:
    """The runner's last signal: OK → back to where testing started (Ready from a failed or
    unusual status, New after Failed commissioning); FAILED → Failed testing with the
    runner's error. Then it powers off, or reboots a machine that was on (stays up with
    ``enable_ssh``)."""
    failed = [r for r in run.ss.results if r.status != 2]
    if not run.enable_ssh:
        m.power_state = "on" if run.was_on else "off"
    if failed:
        m.error_description = f"{len(failed)} test scripts failed to run"
        sim.event(m, "INFO", "Failed testing", "")
        sim.set_status(m, S.FAILED_TESTING)
        return
    previous = m.previous_status
    if previous in RESET_READY:
        target = S.READY
    elif previous == S.FAILED_COMMISSIONING:
        target = S.NEW
    else:
        target = previous
    m.error_description = ""
    if target in (S.READY, S.NEW):
        sim.event(m, "INFO", target.label, "")
    sim.set_status(m, target)
    if target == S.DEPLOYED:
        hwsync.resume(sim, m)


# -- URL checks from the node's network ------------------------------------------------------------


def _fetch(url: str, unreachable: bool) -> tuple[bool, str]:
    if unreachable:
        return False, "FAILED (connection timed out from the node's network)"
    try:
        response = requests.get(url, timeout=FETCH_TIMEOUT, allow_redirects=True)
    except requests.RequestException as exc:
        return False, f"FAILED ({type(exc).__name__})"
    if response.status_code >= 400:
        return False, f"FAILED (HTTP {response.status_code})"
    return True, f"reachable (HTTP {response.status_code})"


def _fetch_all(sim: Simulator, m: Machine, run: Run, unreachable: bool) -> None:
    fetched = {}
    for rid, urls in run.checks.items():
        lines = [(url, *_fetch(url, unreachable)) for url in urls]
        text = "".join(f"{url}: {what}\n" for url, _, what in lines)
        fetched[rid] = (all(ok for _, ok, _ in lines) and rid not in run.fails, text.encode())
    with sim.lock:
        run.fetched = fetched
        if m.op_id != run.op_id or sim.machines.get(m.system_id) is not m:
            return
        for r in run.ss.results:
            if r.id in run.waiting:
                sim.schedule(m, 0, _late(run, r))


def _late(run: Run, r: ScriptResult) -> Step:
    return lambda sim, mm: _end(sim, mm, run, r)

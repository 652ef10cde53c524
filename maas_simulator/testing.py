"""``op=test``: MAAS runs testing scripts on a machine in its ephemeral environment.

A script given a ``url`` parameter (``<script>_url`` or ``url``, comma-separated URLs, as MAAS's
built-in ``internet-connectivity`` takes it) checks that each URL answers from the node's
network: the simulator fetches each URL from its own host (a thread, never under the simulator
lock) and the result is written when the script would have finished. The machine fault
``node_network_unreachable`` makes every fetch time out, as when the node's subnet cannot reach
the control plane. Scripts without a URL pass. A passed run returns the machine to the status it
was tested from (Ready after Failed testing); a failed one ends in Failed testing.
"""

from __future__ import annotations

import threading

import requests

from maas_client.status import NodeStatus
from maas_simulator.errors import invalid
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine, ScriptResult, ScriptSet
from maas_simulator.users import User

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
RUN_SECONDS = 30  # MAAS seconds a test run takes at least
FETCH_TIMEOUT = 3.0  # real seconds per URL


def start(sim: Simulator, m: Machine, user: User, form: dict[str, list[str]]) -> None:
    """Called by the API with the simulator lock held."""
    if m.status not in TESTABLE or m.locked:
        raise invalid(
            {"__all__": ["Test is not available because of the current state of the node."]}
        )
    names = [n for value in form.get("testing_scripts", []) for n in value.split(",") if n]
    names = names or ["smartctl-validate"]
    back_to = S.READY if m.status == S.FAILED_TESTING else m.status
    sim.start_op(m, "test")
    op_id = m.op_id
    sim.request_event(m, "User starting testing", "start testing", "", user)
    sim.set_status(m, S.TESTING)
    sim.schedule_timeout(m, S.TESTING)
    now = sim.now()
    script_set = ScriptSet(id=sim.new_id(), type=2, started=now)
    checks: dict[str, list[str]] = {}
    for name in names:
        script_set.results.append(
            ScriptResult(id=sim.new_id(), name=name, status=1, output=b"", started=now, ended=None)
        )
        value = (form.get(f"{name}_url") or form.get("url") or [""])[0]
        checks[name] = [u.strip() for u in value.split(",") if u.strip()]
    m.script_sets.append(script_set)
    m.power_state = "on"
    sim.event(m, "INFO", "Running test", ", ".join(names))
    unreachable = m.faults.node_network_unreachable
    threading.Thread(
        target=_run,
        args=(sim, m, op_id, script_set, checks, unreachable, back_to),
        daemon=True,
    ).start()


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


def _run(
    sim: Simulator,
    m: Machine,
    op_id: int,
    script_set: ScriptSet,
    checks: dict[str, list[str]],
    unreachable: bool,
    back_to: NodeStatus,
) -> None:
    outcomes: dict[str, tuple[bool, bytes]] = {}
    for name, urls in checks.items():
        lines = [(url, *_fetch(url, unreachable)) for url in urls]
        text = "".join(f"{url}: {what}\n" for url, _, what in lines) or f"{name}: ok\n"
        outcomes[name] = (all(ok for _, ok, _ in lines), text.encode())

    def finish(sim: Simulator, mm: Machine) -> None:
        now = sim.now()
        for result in script_set.results:
            passed, output = outcomes[result.name]
            result.status, result.output, result.ended = (2 if passed else 3), output, now
            result.exit_status = 0 if passed else 1
        script_set.ended = now
        mm.power_state = "off"
        if all(passed for passed, _ in outcomes.values()):
            sim.set_status(mm, back_to)
            sim.event(mm, "INFO", "Ready" if back_to == S.READY else "Tests passed", "")
        else:
            failed = ", ".join(n for n, (passed, _) in outcomes.items() if not passed)
            sim.mark_failed(mm, f"Failed testing: {failed}")

    with sim.lock:
        if m.op_id == op_id and sim.machines.get(m.system_id) is m:
            sim.schedule(m, _remaining(sim, script_set), finish)


def _remaining(sim: Simulator, script_set: ScriptSet) -> float:
    return max(RUN_SECONDS - (sim.now() - script_set.started), 0.0)

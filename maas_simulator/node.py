"""The node side of the simulator: what a deployed machine's first boot does with its user-data.

When MAAS marks a machine Deployed (its installed OS fetched user-data), the node reads the
cloud-config our payload rendered, reads the values the first-boot scripts read (one per file
under ``/etc/gpuaas/node/``, as the scripts read them) and does what the payload's commands do:
it reports the site bundle's outcome (when the payload has one) and the agent's start to the
report URL with its bootstrap token, then calls the enrollment URL with its enrollment token.
Per host, tests can make the site bundle or the agent fail or stay silent, make enrollment fail,
stay silent, delay, or replay the call (to prove a token is accepted once). Calls run on their
own thread: never under the simulator lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import requests
import yaml

from maas_client.status import NodeStatus

log = logging.getLogger("maas.simulator.node")
NODE_DIR = "/etc/gpuaas/node"  # one value per file, as onboarding/cloudconfig.py writes them
CA_FILE = "/etc/gpuaas/ca.pem"  # what the scripts' curl trusts (--cacert), when the payload has it
# The first-boot scripts call with `curl --retry 8 --retry-connrefused --retry-max-time 600`
# (templates/firstboot/): curl retries a refused or timed-out connection and HTTP 408, 429, 500,
# 502, 503 and 504, waiting 1 s and doubling, within 600 s. The node side does the same, so a
# control plane restarting under a batch sees what real nodes do to it.
RETRIES = 8
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_MAX_SECONDS = 600.0


@dataclass
class Behaviour:
    mode: str = "enroll"  # enroll | silent | bad_token
    bundle: str = "ok"  # ok | failed | silent: the site bundle's outcome, reported
    agent: str = "ok"  # ok | failed | silent: the agent's start, reported
    delay: float = 0.0  # real seconds before the call
    repeat: int = 1  # how many times the agent calls (2 = a replay)
    checkin: float = 0.0  # real seconds between a running agent's check-ins (0: none)
    reenroll: bool = True  # handed newer tokens, it enrolls again (False: it only keeps them)


@dataclass
class NodeSide:
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    timeout: float = 10.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        """Running agents stop checking in (the test or the demo is over)."""
        self._stopped.set()

    def set(self, hostname: str, **behaviour: Any) -> None:
        self.behaviours[hostname] = Behaviour(**behaviour)

    def __call__(self, sim: Any, machine: Any) -> None:
        """Called (under the simulator lock) when ``machine`` reaches Deployed."""
        if not machine.user_data:
            return
        config = agent_config(machine.user_data)
        if config is None:
            return
        behaviour = self.behaviours.get(machine.hostname, Behaviour())
        if behaviour.mode == "silent":
            return
        threading.Thread(
            target=self._boot, args=(sim, machine, config, behaviour), daemon=True
        ).start()

    def restart(self, sim: Any, system_id: str) -> None:
        """The agent of a deployed machine restarts (an operator fixed it on the host): it runs
        the payload's commands again with the tokens it holds, as configured now."""
        with sim.lock:
            self(sim, sim.machines[system_id])

    def _boot(self, sim: Any, machine: Any, config: dict[str, Any], behaviour: Behaviour) -> None:
        self._enroll(machine.system_id, config, behaviour)
        if behaviour.checkin > 0 and config.get("checkin_url"):
            self._check_in(sim, machine, config, behaviour)

    def _check_in(
        self, sim: Any, machine: Any, config: dict[str, Any], behaviour: Behaviour
    ) -> None:
        """While the machine stays deployed with this payload, the running agent checks in
        with the bootstrap token it holds; handed newer tokens, it keeps them and (unless
        ``reenroll`` is off: an agent that only swaps its tokens) reports its start and enrolls
        again with them."""
        user_data, unreachable = machine.user_data, 0
        while unreachable < 5:  # the control plane went away for good
            if self._stopped.wait(behaviour.checkin):
                return
            if sim.machines.get(machine.system_id) is not machine or (
                machine.user_data is not user_data or machine.status != NodeStatus.DEPLOYED
            ):
                return
            body = {key: config.get(key) for key in ("onboarding_id", "attempt", "hostname")} | {
                "bootstrap_token": str(config.get("bootstrap_token", ""))
            }
            try:
                answer = requests.post(
                    str(config["checkin_url"]), json=body, timeout=self.timeout,
                    verify=_trust(config),
                )  # fmt: skip
                data, unreachable = (answer.json() if answer.status_code == 200 else {}), 0
            except requests.ConnectionError:
                data, unreachable = {}, unreachable + 1
            except (requests.RequestException, ValueError):
                data = {}
            if data.get("action") != "reenroll":
                continue
            config = {
                **config,
                "attempt": data["attempt"],
                "bootstrap_token": data["bootstrap_token"],
                "enrollment_token": data["enrollment_token"],
            }
            if behaviour.reenroll:
                self._enroll(machine.system_id, {**config, "site_bundle_version": ""}, behaviour)

    def _report(self, system_id: str, config: dict[str, Any], phase: str, outcome: str) -> None:
        body = {
            "onboarding_id": config.get("onboarding_id"),
            "attempt": config.get("attempt"),
            "hostname": config.get("hostname"),
            "bootstrap_token": str(config.get("bootstrap_token", "")),
            "phase": phase,
            "status": outcome,
            "detail": "" if outcome == "ok" else f"{phase} exited 1 (simulated)",
        }
        status = self._post(system_id, str(config["report_url"]), body, config)
        with self._lock:
            self.reports.append(
                {"system_id": system_id, "phase": phase, "outcome": outcome, "status": status}
            )

    def _first_boot(self, system_id: str, config: dict[str, Any], behaviour: Behaviour) -> bool:
        """The payload's commands before enrollment; False when the boot stops there."""
        steps = [("agent", behaviour.agent)]
        if config.get("site_bundle_version"):
            steps.insert(0, ("site_bundle", behaviour.bundle))
        for phase, outcome in steps:
            if outcome == "silent":
                return False
            if config.get("report_url"):
                self._report(system_id, config, phase, outcome)
            if outcome != "ok":
                return False
        return True

    def _post(
        self, system_id: str, url: str, body: dict[str, Any], config: dict[str, Any] | None = None
    ) -> int:
        """POST ``body`` as the scripts' curl does (``RETRIES``): the last answer's status, 0
        if none came."""
        started, wait, status = time.monotonic(), 1.0, 0
        for attempt in range(RETRIES + 1):
            try:
                status = requests.post(
                    url, json=body, timeout=self.timeout, verify=_trust(config or {})
                ).status_code
            except requests.RequestException as exc:
                status = 0
                log.warning("node %s could not reach %s: %s", system_id, url, exc)
            if status and status not in RETRY_STATUSES:
                return status
            if attempt == RETRIES or time.monotonic() - started + wait > RETRY_MAX_SECONDS:
                break
            if self._stopped.wait(wait):  # the test or the demo is over
                break
            wait *= 2
        return status

    def _enroll(self, system_id: str, config: dict[str, Any], behaviour: Behaviour) -> None:
        time.sleep(behaviour.delay)
        if not self._first_boot(system_id, config, behaviour):
            return
        token = str(config.get("enrollment_token", ""))
        if behaviour.mode == "bad_token":
            token = "not-" + token
        body = {
            "onboarding_id": config.get("onboarding_id"),
            "attempt": config.get("attempt"),
            "hostname": config.get("hostname"),
            "enrollment_token": token,
            "agent_version": str(config.get("agent_bootstrap_version", "")),
            "system_id": system_id,
        }
        for _ in range(behaviour.repeat):
            status = self._post(system_id, str(config["enroll_url"]), body, config)
            with self._lock:
                self.calls.append(
                    {
                        "system_id": system_id,
                        "hostname": body["hostname"],
                        "status": status,
                        "attempt": body["attempt"],
                    }
                )


def agent_config(user_data: bytes) -> dict[str, Any] | None:
    """The values our payload writes for the first-boot scripts, one per file under
    ``/etc/gpuaas/node/``, read as the scripts read them (``$(cat file)``: the content without
    its trailing newlines; the numbers unquoted in the JSON they send); None if absent."""
    try:
        cloud = yaml.safe_load(user_data.decode("utf-8", "replace"))
    except yaml.YAMLError:
        return None
    if not isinstance(cloud, dict):
        return None
    values: dict[str, Any] = {}
    for item in cloud.get("write_files") or []:
        path = item.get("path") if isinstance(item, dict) else None
        if isinstance(path, str) and path.startswith(NODE_DIR + "/"):
            values[path.removeprefix(NODE_DIR + "/")] = str(item.get("content") or "").rstrip("\n")
        elif path == CA_FILE:
            values["ca_pem"] = str(item.get("content") or "")
    if "enroll_url" not in values:
        return None
    for number in ("onboarding_id", "attempt"):
        values[number] = int(values[number]) if values.get(number, "").isdigit() else None
    return values


_trusted: dict[str, str] = {}


def _trust(config: dict[str, Any]) -> str | bool:
    """What a simulated node trusts for https: the CA its payload wrote (as the scripts' curl
    does), else the system's."""
    pem = str(config.get("ca_pem") or "")
    if not pem.strip():
        return True
    if pem not in _trusted:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
            f.write(pem)
        _trusted[pem] = f.name
    return _trusted[pem]

"""The node side of the simulator: what a deployed machine's first boot does with its user-data.

When MAAS marks a machine Deployed (its installed OS fetched user-data), the node reads the
cloud-config our payload rendered, finds the node-agent config (``/etc/gpuaas/node-agent.yaml``)
and calls the enrollment URL with its token, the way the real bootstrap script does. Per host,
tests can make the agent fail, stay silent, delay, or replay the call (to prove a token is
accepted once). Calls run on their own thread: never under the simulator lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import requests
import yaml

log = logging.getLogger("maas.simulator.node")
AGENT_CONFIG = "/etc/gpuaas/node-agent.yaml"


@dataclass
class Behaviour:
    mode: str = "enroll"  # enroll | silent | bad_token
    delay: float = 0.0  # real seconds before the call
    repeat: int = 1  # how many times the agent calls (2 = a replay)


@dataclass
class NodeSide:
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    timeout: float = 10.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
            target=self._enroll,
            args=(machine.system_id, config, behaviour),
            daemon=True,
        ).start()

    def _enroll(self, system_id: str, config: dict[str, Any], behaviour: Behaviour) -> None:
        time.sleep(behaviour.delay)
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
            try:
                response = requests.post(str(config["enroll_url"]), json=body, timeout=self.timeout)
                status = response.status_code
            except requests.RequestException as exc:
                status = 0
                log.warning("node %s could not reach %s: %s", system_id, config["enroll_url"], exc)
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
    """The node-agent config our payload writes, parsed from the cloud-config; None if absent."""
    try:
        cloud = yaml.safe_load(user_data.decode("utf-8", "replace"))
    except yaml.YAMLError:
        return None
    if not isinstance(cloud, dict):
        return None
    for item in cloud.get("write_files") or []:
        if isinstance(item, dict) and item.get("path") == AGENT_CONFIG:
            parsed = yaml.safe_load(item.get("content") or "")
            return parsed if isinstance(parsed, dict) else None
    return None

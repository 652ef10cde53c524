"""Hardware sync: a machine deployed with ``enable_hw_sync`` reports its hardware every
``sync_interval`` MAAS seconds, and MAAS re-reads it: ``last_sync`` moves, NIC attributes and
node devices follow the bus, and the changes are INFO events (3.5 source, ``Node.end_deployment``,
the ``_hardware_sync_*`` functions of ``hooks.py``; docs/simulator.md, "Hardware sync").

The machine faults act here: ``gpu_lost_after_deploy`` (the first sync after a deploy finds GPUs
gone from the bus) and ``hw_sync_stops`` (the node's timer never fires: ``last_sync`` keeps the
deploy's stamp).
"""

from __future__ import annotations

import re

from maas_client.status import NodeStatus
from maas_simulator import scripts
from maas_simulator.inventory import apply_nics, gpus_gone, update_node_devices
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine

S = NodeStatus
DEFAULT_INTERVAL = 15 * 60  # config hardware_sync_interval "15m"
# the deploy-info outputs of the current commissioning run that a sync overwrites in place
DEPLOY_INFO = scripts.DEPLOY_INFO  # the commissioning outputs a sync refreshes
DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")


def interval(config: object) -> int:
    """Config ``hardware_sync_interval`` (``15m``, ``1h``, ``30s``, or seconds) in seconds."""
    found = DURATION.match(str(config))
    if found is None:
        return DEFAULT_INTERVAL
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[found[2]]
    return max(int(found[1]) * unit, 1)


def enable(sim: Simulator, m: Machine, on: bool) -> None:
    """``op=deploy``'s ``enable_hw_sync``: the interval is fixed from config now (a later config
    change does not move it)."""
    m.enable_hw_sync = on
    m.sync_interval = interval(sim.config.get("hardware_sync_interval")) if on else None
    m.last_sync = None
    m.synced_since_deploy = False


def start(sim: Simulator, m: Machine) -> None:
    """The deployment ended (status Deployed): ``last_sync`` is stamped, the node's timer runs."""
    if not m.enable_hw_sync:
        return
    m.last_sync = sim.now()
    m.touch(m.last_sync)
    _schedule(sim, m)


def resume(sim: Simulator, m: Machine) -> None:
    """Back to Deployed (tested, or a failed test overridden): the node's last signal counts as
    contact, and its timer runs again."""
    if not m.enable_hw_sync or m.faults.hw_sync_stops:
        return
    m.last_sync = sim.now()
    m.touch(m.last_sync)
    _schedule(sim, m)


def _schedule(sim: Simulator, m: Machine) -> None:
    if m.faults.hw_sync_stops or not m.sync_interval:
        return
    sim.schedule(m, m.sync_interval, _tick)


def _tick(sim: Simulator, m: Machine) -> None:
    if m.status != S.DEPLOYED or not m.enable_hw_sync or m.faults.hw_sync_stops:
        return
    if not m.synced_since_deploy:
        m.synced_since_deploy = True
        lost = m.faults.gpu_lost_after_deploy
        m.hardware.gpus_lost = max(m.hardware.gpus_lost, lost)
    sync(sim, m)
    _schedule(sim, m)


def sync(sim: Simulator, m: Machine) -> None:
    """One report: the hook re-reads disks, interfaces and node devices, in that order, with
    MAAS's events (a block device and an interface are "updated" on every sync, a PCI device
    only when something changed), and ``last_sync`` moves."""
    now = sim.now()
    sim.node_devices(m)  # MAAS's rows as they were, before the re-read
    for disk in m.storage.physical:
        _notify(sim, m, "Node Block Device", "block device", disk.name, "updated")
    apply_nics(m)
    for iface in m.interfaces:
        if iface.type == "physical":
            _notify(sim, m, "Node Interface", "interface", iface.name, "updated")
    for action, device in update_node_devices(m, sim.new_device_id, gpus_gone(m)):
        _notify(sim, m, "Node PCI Device", "pci device", str(device.device_number), action)
    commissioning = [s for s in m.script_sets if s.type == 0]
    if commissioning:
        for r in commissioning[-1].results:
            if r.name in DEPLOY_INFO:
                r.updated = now  # its output overwritten in place; started/ended kept
    m.last_sync = now
    m.touch(now)


def _notify(sim: Simulator, m: Machine, kind: str, what: str, name: str, action: str) -> None:
    """``_hardware_sync_notify``: only while Deployed with hardware sync on."""
    if m.enable_hw_sync and m.status == S.DEPLOYED:
        sim.event(
            m,
            "INFO",
            f"{kind} hardware sync state change",
            f"{what} {name} was {action} on node {m.system_id}",
            action=action,
        )

"""No system id is handed out twice (docs/simulator.md, "--reserve-system-ids"): a restarted
simulator never gives a new host the system id a control plane's node still holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from maas_simulator import scenario
from maas_simulator.model import Simulator

ROOT = Path(__file__).resolve().parents[2]
HOSTS = {"machines": [{"hostname": f"h{i}", "status": "ready"} for i in range(5)]}


def ids(sim: Simulator) -> list[str]:
    scenario.load(sim, HOSTS, api_key="a:b:c")
    return list(sim.order)


def test_a_reserved_system_id_is_never_handed_out() -> None:
    first_run = ids(Simulator(seed=0))
    restarted = Simulator(seed=0)  # the same seed: the same ids, unless reserved
    assert ids(Simulator(seed=0)) == first_run
    restarted.reserved_system_ids = set(first_run[:3])
    again = ids(restarted)
    assert not set(again) & set(first_run[:3]), (again, first_run)
    assert len(set(again)) == 5


def test_the_command_reads_the_reserved_ids_and_refuses_an_unreadable_file(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "simulate_maas", "--port", "0", "--api-key-file",
         str(tmp_path / "key"), "--reserve-system-ids", str(tmp_path / "missing")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "--reserve-system-ids" in done.stderr

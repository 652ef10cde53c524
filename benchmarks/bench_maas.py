"""MAAS client + simulator figures.

* listing 10,000 machines (each with its disks, partitions and NICs): server time to answer,
  bytes, and client time to typed objects;
* a filtered listing and an allocation with constraints over the 10,000;
* request latency of a small authenticated read (p50/p95) over keep-alive;
* concurrent clients: reads per second with 16 threads.

Usage: bench_maas.py [machines] (default 10,000)
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

import requests

from maas_client.client import MaasClient
from maas_simulator import scenario
from maas_simulator.model import Simulator
from maas_simulator.server import SimulatorServer

KEY = "BenchConsumer12345:BenchToken12345678:BenchSecretABCDEFGHIJKLMNOPQRSTU"
MACHINES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000


def main() -> None:
    sim = Simulator(scale=60)
    started = time.perf_counter()
    scenario.load(sim, {"generate": {"count": MACHINES}}, api_key=KEY)
    print(f"simulator: generated {MACHINES:,} machines in {time.perf_counter() - started:.2f}s")
    server = SimulatorServer(sim).start()
    client = MaasClient(server.url, KEY)
    try:
        client.list_machines()  # warm the per-machine JSON cache
        raw = []
        for _ in range(5):
            t0 = time.perf_counter()
            response = client.session.get(client.root + "machines/", timeout=30)
            raw.append(time.perf_counter() - t0)
        size = len(response.content)
        typed = []
        for _ in range(3):
            t0 = time.perf_counter()
            machines = client.list_machines()
            typed.append(time.perf_counter() - t0)
        assert len(machines) == MACHINES
        print(
            f"list {MACHINES:,} machines: HTTP answer "
            f"{statistics.median(raw) * 1000:.0f} ms median "
            f"({size / 1e6:.1f} MB), to typed objects "
            f"{statistics.median(typed) * 1000:.0f} ms median"
        )

        filtered = []
        for _ in range(5):
            t0 = time.perf_counter()
            response = client.session.get(
                client.root + "machines/",
                params={"status": "ready", "hostname": f"gen{MACHINES - 1:05d}", "zone": "default"},
                timeout=30,
            )
            filtered.append(time.perf_counter() - t0)
        assert len(response.json()) == 1
        allocations = []
        for _ in range(5):
            t0 = time.perf_counter()
            answer = client.session.post(
                client.root + "machines/",
                params={"op": "allocate"},
                data={"cpu_count": "64", "mem": "4096", "arch": "amd64", "agent_name": "bench"},
                timeout=30,
            )
            allocations.append(time.perf_counter() - t0)
            assert answer.status_code == 200, answer.text
        print(
            f"filtered listing (3 filters, {MACHINES:,}): "
            f"{statistics.median(filtered) * 1000:.0f} ms "
            f"median; allocate with constraints: {statistics.median(allocations) * 1000:.0f} ms "
            "median"
        )

        sid = machines[0].system_id
        latencies = []
        for _ in range(300):
            t0 = time.perf_counter()
            client.get_machine(sid)
            latencies.append(time.perf_counter() - t0)
        latencies.sort()
        print(
            f"get_machine latency: p50 {latencies[150] * 1000:.2f} ms, "
            f"p95 {latencies[285] * 1000:.2f} ms"
        )

        done = 0
        lock = threading.Lock()
        deadline = time.perf_counter() + 3

        def worker() -> None:
            nonlocal done
            own = MaasClient(server.url, KEY)
            while time.perf_counter() < deadline:
                own.get_machine(sid)
                with lock:
                    done += 1

        threads = [threading.Thread(target=worker) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"16 concurrent clients: {done / 3:.0f} reads/s")
    finally:
        client.close()
        server.stop()
        requests.Session().close()


if __name__ == "__main__":
    main()

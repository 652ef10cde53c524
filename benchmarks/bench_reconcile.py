"""Reconcile a site of 10,000 machines and report seconds, SQL queries and MAAS requests per run,
and what reading the machine listing costs a process (time and peak RSS).

A scratch PostgreSQL database (``maascp_bench_recon``), the simulator as its own process with
10,100 Deployed machines and 10,000 active nodes matching them, 1% of them drifting (hostname,
power address, missing) plus 100 Deployed machines we do not know (leaks). The first run creates
every node_maas_state row and the drift records; later runs are the steady state. Target: under
2 s per run, one machine listing, a constant number of queries. Usage: bench_reconcile.py
[machines] (``BENCH_PROFILE=<run>`` prints a profile and the slowest queries of that run).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.stack import (
    PG_SERVER,
    SimulatorProcess,
    bench_broker,
    drop_db,
    recreate_db,
    scratch_db,
    seed_site,
)

MACHINES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
DB = scratch_db("bench_recon")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ["MAASCP_DATABASE_URL"] = f"{PG_SERVER}/{DB}"
os.environ["MAASCP_BROKER_URL"] = bench_broker()
os.environ.setdefault(
    "MAASCP_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "bench")
)
recreate_db(DB)

import django

django.setup()

from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from maas_client.client import MaasClient
from maas_domain.models import Sku
from reconciliation import services
from reconciliation.models import DriftRecord

KEY = SimulatorProcess.KEY
# A process that only reads the listing (the client, no Django): its peak RSS is what the
# parse costs on top of an interpreter with the client imported.
LISTING_ALONE = """
import json, sys, time
from maas_client.client import MaasClient
def hwm():  # VmHWM, not ru_maxrss: that one keeps the parent's peak across fork and exec
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024
client = MaasClient(sys.argv[1], sys.argv[2], read_timeout=300)
client.version()
before = hwm()
started, cpu = time.perf_counter(), time.process_time()
machines = client.list_machines() if sys.argv[3] == "typed" else client.machine_summaries()
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"machines": len(machines), "seconds": seconds, "cpu": cpu, "before": before,
                  "peak": hwm()}))
"""


def listing_alone(url: str, how: str = "summaries") -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", LISTING_ALONE, url, KEY, how],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    call_command("migrate", verbosity=0)
    sim = SimulatorProcess(Path(tempfile.mkdtemp(prefix="maascp-recon-")), count=MACHINES + 100)
    try:
        sim.wait()
        run(sim)
    finally:
        sim.stop()
        connection.close()
        drop_db(DB)


def run(sim: SimulatorProcess) -> None:
    sku = Sku.objects.create(code="bench", name="bench")
    # the last 100 machines stay unknown
    site, drifting = seed_site("bench", sim.url, KEY, sku, known=MACHINES)
    print(
        f"reconcile bench: {MACHINES:,} nodes, {MACHINES + 100:,} MAAS machines, "
        f"{drifting} drifting nodes, 100 unknown machines (Deployed to our user: leaks)"
    )

    # the listing alone, as the run does it, in a process of its own (time and peak RSS)
    alone = [listing_alone(sim.url) for _ in range(3)]
    best = min(alone, key=lambda a: a["seconds"])
    each = ", ".join(f"{a['seconds'] * 1000:.0f}" for a in alone)
    typed = listing_alone(sim.url, "typed")
    client = MaasClient(sim.url, KEY, read_timeout=300)
    t0 = time.perf_counter()
    client.power_addresses()
    power_time = time.perf_counter() - t0
    client.close()
    print(
        f"  MAAS reads: summaries {best['seconds'] * 1000:.0f} ms (of 3: "
        f"{each} ms; the simulator's answer included; CPU of the reading process "
        f"{best['cpu'] * 1000:.0f} ms), peak RSS {best['peak']:.0f} MB in a process of "
        f"{best['before']:.0f} MB "
        f"before the listing; typed list_machines (the whole body parsed) "
        f"{typed['seconds'] * 1000:.0f} ms, peak RSS {typed['peak']:.0f} MB; "
        f"power parameters {power_time * 1000:.0f} ms"
    )

    worst = 0.0
    for i in range(1, 5):
        sim.reset_counters()
        run, _ = services.reconcile_request(site=site, trigger="command")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here: this run's peak
        t0, cpu = time.perf_counter(), time.process_time()
        prof = None
        if os.environ.get("BENCH_PROFILE") and i == int(os.environ["BENCH_PROFILE"]):
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        with CaptureQueriesContext(connection) as ctx:
            done = services.reconcile_execute(run.pk)
        if prof is not None:
            import pstats

            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
            for q in sorted(ctx.captured_queries, key=lambda q: -float(q["time"]))[:5]:
                print("   ", q["time"], q["sql"][:150])
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
        assert done is not None and done.state == "succeeded", done and done.reason
        counters = sim.counters()
        worst = max(worst, wall)
        print(
            f"  run {i} ({'first' if i == 1 else 'steady'}): {wall:.2f} s (CPU {cpu:.2f} s), "
            f"{len(ctx.captured_queries)} SQL queries, {sum(counters.values())} MAAS requests "
            f"({counters['GET machines.read']} machine listing), {done.machines_seen:,} "
            f"machines, drift +{done.drift_opened} -{done.drift_cleared} ({done.drift_open} open), "
            f"peak RSS {vm_hwm_mb():.0f} MB"
        )
    by_kind = sorted(
        DriftRecord.objects.filter(state="open")
        .order_by()
        .values_list("kind", flat=True)
        .distinct()
    )
    print(f"  open drift kinds: {', '.join(by_kind)}")
    verdict = "OK" if worst < 2.0 else "OVER"
    print(
        f"  worst run {worst:.2f} s (target < 2 s): {verdict}; this process's peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (Django, "
        f"{MACHINES:,} nodes built for the set-up, the runs); simulator "
        f"{sim.peak_rss_mb():.0f} MB"
    )


def vm_hwm_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


if __name__ == "__main__":
    main()

"""Reconcile a site of 10,000 machines and report seconds, SQL queries and MAAS requests per run.

A scratch PostgreSQL database (``maascp_bench_recon``), the simulator with 10,000 Deployed
machines and 10,000 active nodes matching them, 1% of them drifting (hostname, power address,
missing) plus 100 Deployed machines we do not know (leaks). The first run creates every
node_maas_state row and the drift records; later runs are the steady state. Target: under 2 s
per run, one machine listing, a constant number of queries. Usage: bench_reconcile.py [machines]
(``BENCH_PROFILE=1`` prints a profile and the slowest queries of one steady run).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
MACHINES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
DB = os.environ.get("MAASCP_BENCH_RECON_DB", "maascp_bench_recon")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ["MAASCP_DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:5432/{DB}"
os.environ.setdefault("MAASCP_BROKER_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault(
    "MAASCP_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "bench")
)

import psycopg

with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
    c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    c.execute(f"CREATE DATABASE {DB}")

import django

django.setup()

import requests
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from maas_client.client import MaasClient
from maas_domain.models import MaasSite, Node, Sku
from maas_domain.services.credentials import site_credentials_write
from maas_simulator import scenario
from maas_simulator.model import Simulator
from maas_simulator.server import SimulatorServer
from reconciliation import services
from reconciliation.models import DriftRecord

KEY = "BenchConsumer12345:BenchToken12345678:BenchSecretABCDEFGHIJKLMNOPQRSTU"


def main() -> None:
    call_command("migrate", verbosity=0)
    sim = Simulator(scale=60)
    scenario.load(sim, {"generate": {"count": MACHINES + 100, "status": "deployed"}}, api_key=KEY)
    server = SimulatorServer(sim).start()
    control = server.url.replace("/MAAS/", "/_sim/")
    try:
        client = MaasClient(server.url, KEY)
        machines = client.machine_summaries()
        power = client.power_addresses()
        client.close()
        site = MaasSite.objects.create(name="bench", maas_url=server.url, maas_user="admin")
        site_credentials_write(actor=None, site=site, payload={"maas_api_key": KEY})
        sku = Sku.objects.create(code="bench", name="bench")
        drifting = MACHINES // 100
        nodes = []
        for i, m in enumerate(machines[:MACHINES]):  # the last 100 machines stay unknown
            hostname, ip, sid = m.hostname, power[m.system_id], m.system_id
            if i < drifting // 3:
                hostname = f"{hostname}-ours"
            elif i < 2 * drifting // 3:
                ip = "10.99.0.1"
            elif i < drifting:
                sid = f"gone{i}"
            nodes.append(
                Node(
                    site=site,
                    sku=sku,
                    hostname=hostname,
                    ipmi_ip=ip,
                    maas_system_id=sid,
                    state="active",
                )
            )
        Node.objects.bulk_create(nodes, batch_size=2000)
        print(
            f"reconcile bench: {MACHINES:,} nodes, {MACHINES + 100:,} MAAS machines, "
            f"{drifting} drifting nodes, 100 unknown machines (Deployed to our user: leaks)"
        )

        # the listing alone, as the run does it
        client = MaasClient(server.url, KEY)
        client.machine_summaries()
        t0 = time.perf_counter()
        client.machine_summaries()
        listing = time.perf_counter() - t0
        t0 = time.perf_counter()
        client.list_machines()
        typed = time.perf_counter() - t0
        t0 = time.perf_counter()
        client.power_addresses()
        power_time = time.perf_counter() - t0
        client.close()
        print(
            f"  MAAS reads: summaries {listing * 1000:.0f} ms (typed list_machines "
            f"{typed * 1000:.0f} ms), power parameters {power_time * 1000:.0f} ms"
        )

        worst = 0.0
        for i in range(1, 5):
            requests.delete(control + "counters", timeout=10)
            run, _ = services.reconcile_request(site=site, trigger="command")
            t0 = time.perf_counter()
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
            wall = time.perf_counter() - t0
            assert done is not None and done.state == "succeeded", done and done.reason
            counters = requests.get(control + "counters", timeout=10).json()["counters"]
            maas_requests = sum(r["count"] for r in counters)
            listings = sum(r["count"] for r in counters if r["action"] == "machines.read")
            worst = max(worst, wall)
            print(
                f"  run {i} ({'first' if i == 1 else 'steady'}): {wall:.2f} s, "
                f"{len(ctx.captured_queries)} SQL queries, {maas_requests} MAAS requests "
                f"({listings} machine listing), {done.machines_seen:,} machines, "
                f"drift +{done.drift_opened} -{done.drift_cleared} ({done.drift_open} open)"
            )
        by_kind = sorted(
            DriftRecord.objects.filter(state="open")
            .order_by()
            .values_list("kind", flat=True)
            .distinct()
        )
        print(f"  open drift kinds: {', '.join(by_kind)}")
        verdict = "OK" if worst < 2.0 else "OVER"
        print(f"  worst run {worst:.2f} s (target < 2 s): {verdict}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""Onboard a batch, then decommission part of it in each mode, through the real engine; report
wall time and MAAS requests per node for every phase.

Runs against a scratch PostgreSQL database and the benchmarks' Redis DB (benchmarks/stack.py,
``MAASCP_BENCH_REDIS_DB``; ``MAASCP_BENCH_BROKER_URL`` names another broker): the simulator
(fast clock, with its node side enrolling over HTTP), an in-process WSGI server for the node
endpoints, a real Celery worker (threads) and a sweep ticker standing in for beat. Phases:
onboard ``nodes`` (one batch), then storage cleanup, reimage and full decommission of
``decommissions`` of them each.
Usage: bench_workflows.py [nodes] [limit] [decommissions]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.stack import PG_SERVER, bench_broker, recreate_db, scratch_db

NODES = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 100
DECOMMISSIONS = int(sys.argv[3]) if len(sys.argv) > 3 else 100
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
DB = scratch_db("bench")
os.environ["MAASCP_DATABASE_URL"] = f"{PG_SERVER}/{DB}"
os.environ["MAASCP_BROKER_URL"] = os.environ.get("MAASCP_BENCH_BROKER_URL") or bench_broker()
os.environ.setdefault(
    "MAASCP_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "bench")
)

recreate_db(DB)

import django

django.setup()

import redis
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application
from django.db import connections

from config import celery_app
from decommission.models import Decommission
from decommission.services import decommission_start
from devtools.demo import demo_ca_pem
from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.probe import site_probe
from maas_simulator import scenario
from maas_simulator.model import Simulator
from maas_simulator.node import NodeSide
from maas_simulator.server import SimulatorServer
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding
from workflows.scheduling import sweep

KEY = "BenchConsumer12345:BenchToken12345678:BenchSecretABCDEFGHIJKLMNOPQRSTU"


class Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    call_command("migrate", verbosity=0)
    redis.Redis.from_url(str(settings.CELERY_BROKER_URL)).flushdb()
    settings.WORKFLOW_DISPATCH_GRACE_SECONDS = 30
    sim = Simulator(scale=600)
    scenario.load(sim, {}, api_key=KEY)
    scenario.add_machines(
        sim,
        [
            {
                "hostname": f"b{i:05d}",
                "status": "new",
                "power_address": f"10.70.{i // 250}.{i % 250 + 1}",
            }
            for i in range(NODES)
        ],
    )
    sim.node_side = NodeSide()
    server = SimulatorServer(sim).start()
    web = ThreadedWSGIServer(("127.0.0.1", 0), Quiet)
    web.set_app(get_wsgi_application())
    threading.Thread(target=web.serve_forever, daemon=True).start()
    settings.NODE_API_URL = f"http://127.0.0.1:{web.server_address[1]}"

    admin = get_user_model().objects.create_user("bench", is_staff=True, is_superuser=True)
    site = MaasSite.objects.create(
        name="bench",
        maas_url=server.url,
        pxe_subnet="10.20.0.0/16",
        ca_bundle_pem=demo_ca_pem(),
        policy={"max_concurrent_workflows": LIMIT},
    )
    site_credentials_write(
        actor=admin,
        site=site,
        payload={"maas_api_key": KEY, "ipmi": {"username": "maas", "password": "x"}},
    )
    profile = SiteProfile.objects.create(site=site, name="p", distro_series="jammy")
    sku = Sku.objects.create(code="k", name="k")
    assert site_probe(actor=admin, site_id=site.pk)["health"] == "healthy"
    server.state.counters.clear()

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(1.0):
            sweep()
            connections.close_all()

    rows = [
        {"hostname": f"b{i:05d}", "ipmi_ip": f"10.70.{i // 250}.{i % 250 + 1}"}
        for i in range(NODES)
    ]
    with start_worker(
        celery_app,
        pool="threads",
        concurrency=8,
        perform_ping_check=False,
        loglevel="ERROR",
        shutdown_timeout=30,
    ):
        threading.Thread(target=beat, daemon=True).start()
        started = time.perf_counter()
        batch = onboarding_start_batch(
            actor=admin, site_id=site.pk, profile_id=profile.pk, sku_id=sku.pk, rows=rows
        )
        accept = time.perf_counter() - started
        print(f"batch accept ({NODES} rows, one transaction): {accept * 1000:.0f} ms")
        flows = Onboarding.objects.filter(batch=batch)
        report(server, "onboard", flows, NODES, started)
        nodes = list(
            flows.filter(state="succeeded").order_by("id").values_list("node_id", flat=True)
        )
        for mode in ("storage_cleanup", "reimage", "full"):
            server.state.counters.clear()
            started = time.perf_counter()
            ids = [
                decommission_start(
                    actor=admin, node_id=pk, mode=mode, confirm=True, profile_id=profile.pk
                ).pk
                for pk in nodes[:DECOMMISSIONS]
            ]
            report(server, mode, Decommission.objects.filter(pk__in=ids), len(ids), started)
        stop.set()
    server.stop()
    web.shutdown()


def report(server: SimulatorServer, phase: str, flows: Any, count: int, started: float) -> None:
    """Wait for ``flows`` to settle; print wall time, end states and MAAS requests per node."""
    cpu = time.process_time()
    while flows.filter(state__in=("pending", "running", "waiting")).exists():
        time.sleep(1)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    states = Counter(flows.values_list("state", flat=True))
    by_action: Counter[str] = Counter()
    for (method, action, _sid, _status), n in server.state.counters.items():
        by_action[f"{method} {action}"] += n
    total = sum(by_action.values())
    print(f"{phase}: {count} nodes (limit {LIMIT}) in {elapsed:.1f}s: {dict(states)}")
    print(f"  MAAS requests: {total} total, {total / max(count, 1):.2f} per node")
    per_node = cpu * 1000 / max(count, 1)
    print(f"  CPU of this process (engine, simulator, node side): {per_node:.0f} ms per node")
    for action, n in by_action.most_common():
        print(f"    {action:<36} {n:>7}  ({n / max(count, 1):.2f}/node)")


if __name__ == "__main__":
    main()

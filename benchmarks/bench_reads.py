"""Admin and API reads at scale, served the production way: 100,000 onboardings and 2,000,000
timeline events in PostgreSQL, gunicorn (2 workers x 4 threads, concurrency 8). Per page it prints
the latency of one client alone (p50/p95: what a request costs), then p95 and requests per second
with 8 clients at once (the server's concurrency; on 2 cores that is mostly queueing) with the
mean and the CPU every process on the machine used per request (clients, gunicorn, PostgreSQL):
with 8 clients always waiting, the mean latency cannot be below 8 x that / cores (and, with the
clients on another machine, 8 x the server side's CPU / cores: the clients' share is printed).
Then the SQL queries the page runs (the same at page sizes 10 and 100).
Usage: bench_reads.py [workflows] [events_per_workflow] [requests per page and load]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.stack import (
    PG_SERVER,
    bench_broker,
    free_port,
    machine_busy_seconds,
    recreate_db,
    scratch_db,
)

WORKFLOWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
EVENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
REQUESTS = int(sys.argv[3]) if len(sys.argv) > 3 else 320  # per page and load level
DB = scratch_db("bench_reads")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ["MAASCP_DATABASE_URL"] = f"{PG_SERVER}/{DB}"
os.environ["MAASCP_BROKER_URL"] = bench_broker()
os.environ.setdefault("MAASCP_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var/bench"))
os.environ["MAASCP_LOG_LEVEL"] = "WARNING"

recreate_db(DB)

import django

django.setup()

import requests
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, setup_test_environment

from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.services.tokens import api_token_create

CLIENTS = 8
CORES = os.cpu_count() or 1


def populate() -> tuple[int, int]:
    """Rows in bulk with SQL; returns (a failed onboarding with 100 events, its hostname)."""
    call_command("migrate", verbosity=0)
    site = MaasSite.objects.create(name="dc0", maas_url="http://maas0.test:5240/MAAS/")
    profile = SiteProfile.objects.create(site=site, name="h100")
    sku = Sku.objects.create(code="gpu-8x", name="8x GPU", gpu_count=8)
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO node_onboardings (state, site_id, hostname, maas_system_id, stage,
                checkpoint, attempt, correlation_id, reason, failure_class, dispatch,
                lease_owner, lost_leases, stage_tries, stage_data, wait_system_id,
                created_at, updated_at, profile_id, sku_id, ipmi_ip, created_machine, pxe_mac,
                confirmed_host, bootstrap_token_hash, enrollment_token_hash,
                site_bundle_version, agent_bootstrap_version, parent_kind, batch_canary,
                node_failure, node_failure_detail, hardware_report, acceptance_report,
                layout_kept, recommission, deploys)
            SELECT CASE WHEN i %% 100 < 80 THEN 'succeeded' WHEN i %% 100 < 88 THEN 'failed'
                        WHEN i %% 100 < 93 THEN 'running' WHEN i %% 100 < 98 THEN 'waiting'
                        ELSE 'pending' END,
                   %s, 'gpu' || lpad(i::text, 6, '0'), 'sys' || i, 'complete', '', 1 + i %% 3,
                   'c' || i, '', '', 0, '', 0, 0, '{}', '',
                   now() - (i || ' seconds')::interval, now(), %s, %s,
                   ('10.' || (i / 65536 %% 256) || '.' || (i / 256 %% 256) || '.'
                    || (i %% 256))::inet,
                   false, '', '', '', '', '', '', '', false, '', '', '{}', '{}',
                   false, false, true
            FROM generate_series(1, %s) AS i
            """,
            [site.pk, profile.pk, sku.pk, WORKFLOWS],
        )
        cur.execute(
            """
            INSERT INTO node_onboarding_events (onboarding_id, at, kind, stage, attempt, message,
                data, actor_name)
            SELECT o.id, o.created_at + (n || ' seconds')::interval, 'stage.completed', 'deploy',
                   1, 'deploy done: MAAS says Deployed (jammy)', '{"n": 1}', ''
            FROM node_onboardings o, generate_series(1, %s) AS n
            """,
            [EVENTS],
        )
        cur.execute("SELECT id, hostname FROM node_onboardings WHERE state = 'failed' LIMIT 1")
        detail_id, hostname = cur.fetchone()
        cur.execute(
            """
            INSERT INTO node_onboarding_events (onboarding_id, at, kind, stage, attempt, message,
                data, actor_name)
            SELECT %s, now() + (n || ' seconds')::interval, 'maas.observed', 'deploy', 1,
                   'MAAS: Deploying', '{}', ''
            FROM generate_series(1, %s) AS n
            """,
            [detail_id, max(100 - EVENTS, 0)],
        )
        cur.execute("ANALYZE")
    print(
        f"inserted {WORKFLOWS:,} onboardings and {WORKFLOWS * EVENTS:,} timeline events in "
        f"{time.perf_counter() - started:.0f}s"
    )
    return detail_id, hostname


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200, url
    return len(ctx.captured_queries)


def load(
    base: str, url: str, headers: dict[str, str], cookies: dict[str, str], clients: int
) -> tuple[list[float], float]:
    """``clients`` clients at once sending ``REQUESTS`` requests in all: latencies, wall time."""
    times: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        session = requests.Session()
        session.headers.update(headers)
        session.cookies.update(cookies)
        for _ in range(REQUESTS // clients):
            started = time.perf_counter()
            answer = session.get(base + url, timeout=30)
            elapsed = (time.perf_counter() - started) * 1000
            assert answer.status_code == 200, (url, answer.status_code)
            with lock:
                times.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times, time.perf_counter() - started


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def main() -> None:
    detail_id, hostname = populate()
    user = get_user_model().objects.create_user("bench", is_staff=True, is_superuser=True)
    token = api_token_create(actor=None, user=user, name="reads", scope="read")[1]
    setup_test_environment()
    django_client = Client()
    django_client.force_login(user)
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "python:config.gunicorn",
         "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--threads", "4"],
        env={**os.environ, "MAASCP_API_MUTATIONS_PER_MINUTE": "100000"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{base}/health/live", timeout=2)
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        session = django_client.cookies["sessionid"].value
        needle = hostname[:-1]  # a substring, not a prefix match
        api = "/api/v1/admin/onboardings"
        admin = "/admin/onboarding/onboarding/"
        pages = [
            ("API list (default page)", api, f"{api}?limit=10", f"{api}?limit=100"),
            ("API list, state=failed", f"{api}?state=failed", None, None),
            ("API hostname search", f"{api}?search={needle}", None, None),
            ("API detail, 100 events", f"{api}/{detail_id}?diagnostics=false", None, None),
            ("admin list", admin, None, None),
            ("admin hostname search", f"{admin}?q={needle}", None, None),
            ("admin workflow page", f"{admin}{detail_id}/change/", None, None),
        ]
        print(
            f"reads over {WORKFLOWS:,} workflows ({WORKFLOWS * EVENTS:,} events), gunicorn 2x4, "
            f"{REQUESTS} requests per page and load: 1 client | {CLIENTS} clients at once"
        )
        for label, url, small, large in pages:
            is_api = url.startswith("/api/")
            headers = {"Authorization": f"Bearer {token}"} if is_api else {}
            cookies = {} if is_api else {"sessionid": session}
            load(base, url, headers, cookies, CLIENTS)  # warm
            alone, _ = load(base, url, headers, cookies, 1)
            cpu, own = machine_busy_seconds(), time.process_time()
            busy, wall = load(base, url, headers, cookies, CLIENTS)
            # every process's CPU per request (the clients', gunicorn's, PostgreSQL's): with
            # CLIENTS always waiting, the mean latency is at least CLIENTS x that / CORES; the
            # clients' share is this process's (its threads are the clients)
            per_request = (machine_busy_seconds() - cpu) / len(busy) * 1000
            clients = (time.process_time() - own) / len(busy) * 1000
            counted = queries(django_client, url)
            sizes = ""
            if small and large:
                sizes = f"  (page 10: {queries(django_client, small)}, "
                sizes += f"page 100: {queries(django_client, large)} queries)"
            print(
                f"  {label:<24} p50 {statistics.median(alone):5.1f} ms  p95 {p95(alone):5.1f} ms"
                f" | p95 {p95(busy):6.1f} ms  {len(busy) / wall:4.0f} req/s"
                f"  mean {statistics.mean(busy):5.1f} ms  CPU {per_request:4.1f} ms/req"
                f" (clients {clients:3.1f}; mean >= {CLIENTS * per_request / CORES:5.1f},"
                f" {CLIENTS * (per_request - clients) / CORES:5.1f} without the clients)"
                f" | {counted:2d} queries{sizes}"
            )
    finally:
        web.terminate()
        web.wait()


if __name__ == "__main__":
    main()

"""Time the operators' admin list pages over 100,000 onboarding rows (figures printed, not
asserted). Creates a scratch PostgreSQL database, bulk-inserts the rows, then renders the
changelist (default page, filters, search, a big page) and a workflow page through Django's test
client, printing milliseconds and SQL query counts. Usage: bench_admin.py [rows]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.stack import PG_SERVER, bench_broker, recreate_db, scratch_db

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
DB = scratch_db("bench_admin")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ["MAASCP_DATABASE_URL"] = f"{PG_SERVER}/{DB}"
os.environ["MAASCP_BROKER_URL"] = bench_broker()
os.environ.setdefault(
    "MAASCP_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "bench")
)
recreate_db(DB)

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, setup_test_environment

from maas_domain.models import MaasSite, SiteProfile, Sku
from onboarding.models import Onboarding, OnboardingBatch

STATES = ["succeeded"] * 80 + ["failed"] * 8 + ["running"] * 5 + ["waiting"] * 5 + ["pending"] * 2
STAGES = ["complete", "deploy", "commission", "discover", "enrollment"]


def setup() -> Client:
    call_command("migrate", verbosity=0)
    sites = [
        MaasSite.objects.create(name=f"dc{i}", maas_url=f"http://maas{i}.test:5240/MAAS/")
        for i in range(5)
    ]
    profiles = [SiteProfile.objects.create(site=s, name="h100") for s in sites]
    sku = Sku.objects.create(code="gpu-8x", name="8x GPU", gpu_count=8)
    batch = OnboardingBatch.objects.create(
        site=sites[0],
        profile=profiles[0],
        sku=sku,
        size=1000,
        created_by="bench",
        correlation_id="bench",
    )
    started = time.perf_counter()
    chunk: list[Onboarding] = []
    for i in range(ROWS):
        state = STATES[i % len(STATES)]
        chunk.append(
            Onboarding(
                site=sites[i % 5],
                profile=profiles[i % 5],
                sku=sku,
                batch=batch if i < 1000 else None,
                hostname=f"gpu{i:06d}",
                ipmi_ip=f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
                # one open onboarding per host is enforced: hostnames are unique here anyway
                state=state,
                stage="complete" if state == "succeeded" else STAGES[i % len(STAGES)],
                attempt=1 + i % 3,
                failure_class="curtin" if state == "failed" else "",
                reason="curtin failed" if state == "failed" else "",
                correlation_id=f"c{i}",
            )
        )
        if len(chunk) == 5000:
            Onboarding.objects.bulk_create(chunk)
            chunk = []
    Onboarding.objects.bulk_create(chunk)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"inserted {ROWS:,} onboardings in {time.perf_counter() - started:.1f}s")
    user = get_user_model().objects.create_user("bench", is_staff=True, is_superuser=True)
    setup_test_environment()
    client = Client()
    client.force_login(user)
    return client


def timed(client: Client, label: str, url: str, runs: int = 5) -> None:
    client.get(url)  # warm
    times = []
    queries = 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(ctx.captured_queries)
    slowest = max(ctx.captured_queries, key=lambda q: float(q["time"]))
    print(
        f"{label:<38} median {statistics.median(times):7.1f} ms  max {max(times):7.1f} ms  "
        f"{queries:2d} queries  (slowest SQL {float(slowest['time']) * 1000:.1f} ms)"
    )


def main() -> None:
    client = setup()
    base = "/admin/onboarding/onboarding/"
    wf = Onboarding.objects.filter(state="failed").first()
    assert wf is not None
    print(f"admin pages over {Onboarding.objects.count():,} onboarding rows:")
    timed(client, "list, default page (50)", base)
    far = max(1, min(1000, ROWS // 100))  # pages of 50 rows; at a tiny size, the last ones
    timed(client, f"list, page {far}", f"{base}?p={far}")
    timed(client, "list, state=failed", f"{base}?state__exact=failed")
    timed(client, "list, needs attention", f"{base}?attention=operator")
    timed(client, "list, stage=deploy + site", f"{base}?stage=deploy&site__id__exact=1")
    timed(client, "list, search hostname", f"{base}?q=gpu04217")
    failed_page = max(1, min(20, ROWS // 2500))  # 8% failed, 50 a page
    timed(
        client, f"list, failed, page {failed_page}", f"{base}?state__exact=failed&p={failed_page}"
    )
    timed(client, "workflow page", f"{base}{wf.pk}/change/")
    timed(client, "batch list", "/admin/onboarding/onboardingbatch/")
    timed(client, "batch page (1,000 nodes)", f"/admin/onboarding/onboardingbatch/{1}/change/")


if __name__ == "__main__":
    main()

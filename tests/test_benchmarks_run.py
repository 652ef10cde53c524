"""Every benchmark of ``make bench`` runs to its end at a tiny size, so none can rot unseen (one
stopped on a unique index for months). Nothing here is timed or compared with a target: times
and memory live in ``make bench`` (docs/benchmarks.md); this only says each script still runs.

Each script gets this test process's Redis DB (each xdist worker its own) and scratch databases
named with a tag of this worker, copied from one migrated template (so no run pays for a
migrate).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings

from benchmarks.stack import PG_SERVER

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("MAASCP_DATABASE_URL", "").startswith("postgres"),
        reason="the benchmarks need PostgreSQL and Redis (make check)",
    ),
]
ROOT = Path(__file__).resolve().parent.parent
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
TAG = f"{os.environ.get('MAASCP_BENCH_DB_TAG', '')}_smoke_{WORKER}"


def _psql(sql: str) -> None:
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as c:
        c.execute(sql)


@pytest.fixture(scope="module")
def bench_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    template = f"maascp_bench_template{TAG}"
    folder = tmp_path_factory.mktemp("bench")
    env = {
        **os.environ,
        "MAASCP_BENCH_REDIS_DB": urlsplit(str(settings.CELERY_BROKER_URL)).path.strip("/") or "0",
        "MAASCP_BENCH_DB_TAG": TAG,
        "MAASCP_DATA_DIR": str(folder / "data"),
        "MAASCP_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    _psql(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")
    _psql(f"CREATE DATABASE {template}")
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput"],
        env={**env, "MAASCP_DATABASE_URL": f"{PG_SERVER}/{template}"},
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    yield {**env, "MAASCP_BENCH_TEMPLATE_DB": template}
    _psql(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")


RUNS = {
    # script and tiny arguments: the line its last step prints
    "reconcile": (["bench_reconcile.py", "30"], "worst run"),
    "fleet": (
        ["bench_fleet.py", "--sites", "2", "--machines", "30", "--rounds", "1", "--no-doc"],
        "== round 1",
    ),
    "maas": (["bench_maas.py", "20"], "concurrent clients"),
    "admin": (["bench_admin.py", "200"], "batch page"),
    "reads": (["bench_reads.py", "100", "1", "8"], "admin workflow page"),
    "workflows": (["bench_workflows.py", "3", "3", "1"], "full: 1 nodes"),
    # the scenario whose code is a superset of the others' (a batch, then every worker killed
    # and restarted); tests/test_engine_budget.py runs the same stack with the threads pool
    "engine": (
        ["bench_engine.py", "--only", "recovery_short", "--nodes", "4", "--no-doc"],
        "recovery ",
    ),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_benchmark_runs_to_its_end_at_a_tiny_size(
    name: str, bench_env: dict[str, str], tmp_path: Path
) -> None:
    args, last = RUNS[name]
    if "--no-doc" in args:  # the scripts that write a JSON file write it here
        args = [*args, "--json", str(tmp_path / "bench.json")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / args[0]), *args[1:]],
        env=bench_env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert last in done.stdout, output[-4000:]

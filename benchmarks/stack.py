"""The production shape on one machine, for benchmarks and the count-budget test: PostgreSQL
and Redis (the machine's), the MAAS simulator as its own process, the API under gunicorn,
prefork Celery workers and beat, each started with counters (``benchmarks/instrumented.py``).

``Stack`` owns a scratch database and a Redis DB; ``run_batch`` submits a batch of onboardings
through the HTTP API, waits for every workflow to end, stops the processes and returns the
figures (docs/benchmarks.md explains each).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import requests
import yaml

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Scenario:
    name: str
    nodes: int
    limit: int
    scale: float  # simulator clock: MAAS seconds per second
    workers: int = 8  # concurrency of each worker (processes for prefork, threads for threads)
    pool: str = "prefork"
    processes: int = 1  # worker processes (celery worker commands) started
    sweep_seconds: int = 2
    lease_seconds: int = 90
    dispatch_grace_seconds: int = 120  # production default: an unclaimed message is re-sent after
    kill_workers_at: float | None = None  # share of nodes past commission when workers die


@dataclass
class Result:
    scenario: Scenario
    accept_seconds: float = 0.0
    wall_seconds: float = 0.0
    ideal_seconds: float = 0.0
    states: dict[str, int] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)
    maas_by_operation: dict[str, int] = field(default_factory=dict)
    mutations: list[dict[str, Any]] = field(default_factory=list)
    statements: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    machine_busy_seconds: float = 0.0  # every process on the machine, from /proc/stat
    rss_mb: dict[str, float] = field(default_factory=dict)
    recovery: dict[str, Any] = field(default_factory=dict)
    # host, stage, failure class, reason of every workflow that did not succeed
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return max(self.scenario.nodes, 1)

    def per_node(self, value: float) -> float:
        return value / self.n

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["scenario"] = self.scenario.__dict__
        d.pop("durations")
        d["duration_p50"], d["duration_p95"], d["duration_max"] = self.duration_stats()
        d["mutations"] = len(self.mutations)
        return d

    def duration_stats(self) -> tuple[float, float, float]:
        if not self.durations:
            return (0.0, 0.0, 0.0)
        ordered = sorted(self.durations)
        p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
        return (statistics.median(ordered), p95, ordered[-1])


def maas_seconds_per_onboarding() -> float:
    """MAAS-side time of one onboarding in MAAS seconds: commissioning, then deploying to the
    first boot (the node enrolls at once), as the simulator plays them."""
    from maas_simulator import lifecycle

    return float(lifecycle.COMMISSION_READY_AT + lifecycle.DEPLOY_FIRST_BOOT_AT)


def _server(variable: str, default: str) -> str:
    """``scheme://user@host:port`` of the server a ``MAASCP_*`` URL names (the scratch database
    and Redis DB go on the same server as the checks use)."""
    parts = urlsplit(os.environ.get(variable, ""))
    if parts.scheme not in ("postgres", "postgresql", "redis") or not parts.netloc:
        parts = urlsplit(default)  # not a server (embedded SQLite, file broker): the local one
    return f"{parts.scheme}://{parts.netloc}"


PG_SERVER = _server("MAASCP_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432")
REDIS_SERVER = _server("MAASCP_BROKER_URL", "redis://127.0.0.1:6379")
# Where a benchmark's scratch state goes, so runs beside other runs on one machine keep apart:
# MAASCP_BENCH_REDIS_DB (default 9) is the Redis DB every benchmark takes (and flushes), and
# MAASCP_BENCH_DB_TAG (default none) is appended to every scratch database's name.
# MAASCP_BENCH_TEMPLATE_DB: scratch databases are copies of that (migrated) database, so a
# benchmark's migrate has nothing to do (tests/test_benchmarks_run.py, at tiny sizes).
BENCH_REDIS_DB = int(os.environ.get("MAASCP_BENCH_REDIS_DB") or 9)
DB_TAG = os.environ.get("MAASCP_BENCH_DB_TAG", "")
TEMPLATE_DB = os.environ.get("MAASCP_BENCH_TEMPLATE_DB", "")
if not re.fullmatch(r"[a-z0-9_]{0,30}", DB_TAG) or not re.fullmatch(r"[a-z0-9_]*", TEMPLATE_DB):
    raise SystemExit("MAASCP_BENCH_DB_TAG (at most 30), MAASCP_BENCH_TEMPLATE_DB: a-z, 0-9, _")


def describe_machine() -> str:
    """For the dated sections of docs/benchmarks.md."""
    cpus = os.cpu_count()
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.machine()}, {cpus} CPUs{mem}, Python {platform.python_version()}"


def scratch_db(label: str) -> str:
    """The name of a benchmark's scratch database (dropped and created by the benchmark)."""
    return f"maascp_{label}{DB_TAG}"


def bench_broker() -> str:
    return f"{REDIS_SERVER}/{BENCH_REDIS_DB}"


def recreate_db(name: str) -> None:
    drop_db(name)
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {TEMPLATE_DB}" if TEMPLATE_DB else ""))


def drop_db(name: str) -> None:
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class SimulatorProcess:
    """``manage.py simulate_maas`` as its own process (MAAS is another host: its CPU and memory
    are not the client's), with ``count`` generated machines in ``status``."""

    KEY = "BenchConsumer12345:BenchToken12345678:BenchSecretABCDEFGHIJKLMNOPQRSTU"

    def __init__(
        self,
        folder: Path,
        *,
        count: int,
        status: str = "deployed",
        prefix: str = "gen",
        ipmi_network: str = "10.200.0.0/16",
        seed: int = 0,
        env: dict[str, str] | None = None,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "key").write_text(self.KEY)
        spec = {"count": count, "status": status, "prefix": prefix, "ipmi_network": ipmi_network}
        (folder / "scenario.json").write_text(json.dumps({"generate": spec}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/MAAS/"
        self.log = folder / "simulator.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    PY, str(ROOT / "manage.py"), "simulate_maas", "--port", str(self.port),
                    "--api-key-file", str(folder / "key"),
                    "--scenario", str(folder / "scenario.json"), "--seed", str(seed),
                ],
                env={**(env or os.environ), "PYTHONPATH": str(ROOT)},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait(self, timeout: float = 600) -> None:
        """Until it answers (generating thousands of machines takes a while)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"simulator exited: {self.log.read_text()[-2000:]}")
            try:
                if requests.get(f"{self.url}api/2.0/version/", timeout=2).status_code < 500:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{self.url} did not answer within {timeout}s")

    def counters(self) -> Counter[str]:
        """Requests since the last reset, by ``METHOD action`` (``GET machines.read``)."""
        answer = requests.get(self.url.replace("/MAAS/", "/_sim/counters"), timeout=30).json()
        counts: Counter[str] = Counter()
        for row in answer["counters"]:
            counts[f"{row['method']} {row['action']}"] += row["count"]
        return counts

    def reset_counters(self) -> None:
        requests.delete(self.url.replace("/MAAS/", "/_sim/counters"), timeout=30)

    def cpu_seconds(self) -> float:
        """User and system CPU the process has used so far."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        """The process's peak resident set so far (VmHWM), in MB."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def machine_busy_seconds() -> float:
    """CPU seconds every process on this machine has used since boot (``/proc/stat``: all but
    idle and iowait), 0 where there is no /proc: a run's difference says whether the cores were
    the limit (busy close to wall x cores)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(f) for f in fields]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class Stack:
    def __init__(
        self, scenario: Scenario, *, redis_db: int = BENCH_REDIS_DB, label: str = "bench"
    ) -> None:
        self.s = scenario
        self.db = f"{scratch_db(label)}_{os.getpid()}"
        self.redis_url = f"{REDIS_SERVER}/{redis_db}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"maascp-{label}-"))
        self.stats_dir = self.dir / "stats"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sim_port, self.web_port = free_port(), free_port()
        self.key = "BenchConsumer12345:BenchToken12345678:BenchSecretABCDEFGHIJKLMNOPQRSTU"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "MAASCP_DATABASE_URL": f"{PG_SERVER}/{self.db}",
            "MAASCP_BROKER_URL": self.redis_url,
            "MAASCP_DATA_DIR": str(self.dir / "data"),
            "MAASCP_WORKFLOW_SWEEP_SECONDS": str(scenario.sweep_seconds),
            "MAASCP_WORKFLOW_LEASE_SECONDS": str(scenario.lease_seconds),
            "MAASCP_WORKFLOW_DISPATCH_GRACE_SECONDS": str(scenario.dispatch_grace_seconds),
            "MAASCP_NODE_API_URL": f"http://127.0.0.1:{self.web_port}",
            "MAASCP_LOG_LEVEL": "INFO",  # production's: every MAAS call is a log line
            "MAASCP_BENCH_STATS": str(self.stats_dir),
            # every simulated node (and the preflight checks) reaches the node routes from
            # 127.0.0.1: the per-address limit is for real node networks
            "MAASCP_NODE_REQUESTS_PER_MINUTE": "1000000",
            "PYTHONPATH": str(ROOT),
        }

    # -- set-up ------------------------------------------------------------------------------

    def _psql(self, sql: str) -> None:
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as c:
            c.execute(sql)

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [PY, str(ROOT / "manage.py"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def _start(self, name: str, cmd: list[str]) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        self.procs[name] = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def setup(self) -> str:
        """Database, simulator machines, site, credentials, profile, SKU; returns an API token."""
        import redis

        recreate_db(self.db)
        redis.Redis.from_url(self.redis_url).flushdb()
        (self.dir / "data").mkdir()
        (self.dir / "key").write_text(self.key)
        machines = [
            {
                "hostname": f"b{i:05d}",
                "status": "new",
                "power_address": f"10.{70 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}",
            }
            for i in range(self.s.nodes)
        ]
        (self.dir / "scenario.yaml").write_text(yaml.safe_dump({"machines": machines}))
        self._manage("migrate", "--noinput")
        self._start(
            "simulator",
            [
                PY,
                str(ROOT / "manage.py"),
                "simulate_maas",
                "--port",
                str(self.sim_port),
                "--api-key-file",
                str(self.dir / "key"),
                "--scenario",
                str(self.dir / "scenario.yaml"),
                "--time-scale",
                str(self.s.scale),
            ],
        )
        self._wait_http(f"{self.sim_url}api/2.0/version/")
        token = self._manage(
            "shell",
            "-c",
            _SETUP.format(
                maas_url=self.sim_url, key=self.key, limit=self.s.limit, run=secrets.token_hex(4)
            ),
        ).strip()
        self.start_processes()
        self._wait_http(f"http://127.0.0.1:{self.web_port}/health/live")
        return token.splitlines()[-1]

    def start_processes(self, *, only_workers: bool = False) -> None:
        for i in range(self.s.processes):
            self._start(
                f"worker-{len(self.procs)}" if only_workers or i else "worker",
                [
                    PY, "-m", "celery", "-A", "benchmarks.instrumented", "worker",
                    "--pool", self.s.pool, "--concurrency", str(self.s.workers),
                    "--hostname", f"w{len(self.procs)}@%h",
                    "--without-gossip", "--without-mingle", "--without-heartbeat",
                    "--loglevel", "WARNING",
                ],
            )  # fmt: skip
        if only_workers:
            return
        self._start(
            "beat",
            [
                PY, "-m", "celery", "-A", "benchmarks.instrumented", "beat",
                "--loglevel", "WARNING", "--schedule", str(self.dir / "beat-schedule"),
            ],
        )  # fmt: skip
        self._start(
            "web",
            [
                PY, "-m", "gunicorn", "config.wsgi",
                "-c", str(ROOT / "benchmarks/gunicorn_conf.py"),
                "--bind", f"127.0.0.1:{self.web_port}", "--workers", "2", "--threads", "4",
            ],
        )  # fmt: skip

    @property
    def sim_url(self) -> str:
        return f"http://127.0.0.1:{self.sim_port}/MAAS/"

    def _wait_http(self, url: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    tail = (self.dir / f"{name}.log").read_text()[-2000:]
                    raise RuntimeError(f"{name} exited at start-up:\n{tail}")
            try:
                if requests.get(url, timeout=2).status_code < 500:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{url} did not answer within {timeout}s")

    # -- running a batch ---------------------------------------------------------------------

    def db_rows(self, sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(f"{PG_SERVER}/{self.db}") as c:
            return list(c.execute(sql).fetchall())

    def run_batch(self, token: str) -> Result:
        result = Result(self.s)
        result.ideal_seconds = (
            maas_seconds_per_onboarding() / self.s.scale * math.ceil(self.s.nodes / self.s.limit)
        )
        rows = [
            {
                "hostname": f"b{i:05d}",
                "ipmi_ip": f"10.{70 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}",
            }
            for i in range(self.s.nodes)
        ]
        site, profile, sku = self.db_rows(
            "SELECT s.id, p.id, (SELECT id FROM skus LIMIT 1) FROM maas_sites s "
            "JOIN maas_site_profiles p ON p.site_id = s.id LIMIT 1"
        )[0]
        requests.delete(self.sim_url.replace("/MAAS/", "/_sim/counters"), timeout=10)
        self._profile()
        busy_before = machine_busy_seconds()
        started = time.perf_counter()
        answer = requests.post(
            f"http://127.0.0.1:{self.web_port}/api/v1/admin/onboardings/batch",
            json={"site_id": site, "profile_id": profile, "sku_id": sku, "rows": rows},
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
        result.accept_seconds = time.perf_counter() - started
        if answer.status_code != 202:
            raise RuntimeError(f"batch refused: {answer.status_code} {answer.text[:500]}")
        killed = False
        while True:
            counts = dict(self.db_rows("SELECT state, count(*) FROM node_onboardings GROUP BY 1"))
            open_ = sum(counts.get(s, 0) for s in ("pending", "running", "waiting"))
            if not open_:
                break
            if self.s.kill_workers_at is not None and not killed:
                past = self.db_rows(
                    "SELECT count(*) FROM node_onboardings WHERE checkpoint NOT IN "
                    "('', 'preflight', 'discover')"
                )[0][0]
                if past >= self.s.kill_workers_at * self.s.nodes:
                    result.recovery = self._kill_and_restart_workers()
                    killed = True
            if time.perf_counter() - started > 3600:
                raise RuntimeError(f"batch did not settle within an hour: {counts}")
            time.sleep(0.25)
        result.wall_seconds = time.perf_counter() - started
        result.machine_busy_seconds = machine_busy_seconds() - busy_before
        result.states = dict(
            self.db_rows("SELECT state, count(*) FROM node_onboardings GROUP BY 1")
        )
        result.failures = [
            (str(h), str(st), str(fc), str(r)[:300])
            for h, st, fc, r in self.db_rows(
                "SELECT hostname, stage, failure_class, reason FROM node_onboardings "
                "WHERE state <> 'succeeded' ORDER BY hostname"
            )
        ]
        result.durations = [
            float(r[0])
            for r in self.db_rows(
                "SELECT EXTRACT(EPOCH FROM finished_at - created_at) FROM node_onboardings"
            )
            if r[0] is not None
        ]
        if killed:
            result.recovery["progress_again_seconds"] = self._progress_after(result.recovery)
        counters = requests.get(self.sim_url.replace("/MAAS/", "/_sim/counters"), timeout=30).json()
        ops: Counter[str] = Counter()
        for row in counters["counters"]:
            ops[f"{row['method']} {row['action']}"] += row["count"]
        result.maas_by_operation = dict(ops.most_common())
        result.mutations = counters["mutations"]
        self.stop()
        self._collect(result)
        return result

    def _profile(self) -> None:
        """MAASCP_BENCH_PROFILE=FILE: sample the workers (GIL holders, so CPU) with py-spy for
        the first 60 s of the batch; raw stacks for docs/benchmarks.md."""
        profile = os.environ.get("MAASCP_BENCH_PROFILE")
        if not profile:
            return
        time.sleep(3)  # the workers are past their start-up imports
        self._start(
            "py-spy",
            [
                str(Path(PY).parent / "py-spy"), "record", "--subprocesses", "--nonblocking",
                "--gil", "-r", "100", "-d", "60", "-f", "raw", "-o", profile,
                "--pid", str(self.procs["worker"].pid),
            ],
        )  # fmt: skip

    def _kill_and_restart_workers(self) -> dict[str, Any]:
        """Every worker process dies at once (kill -9 of the whole process group); new ones
        start three seconds later."""
        at = time.time()
        for name in [n for n in self.procs if n.startswith("worker")]:
            proc = self.procs.pop(name)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(3)
        self.start_processes(only_workers=True)
        return {"killed_at": at, "restarted_at": time.time()}

    def _progress_after(self, recovery: dict[str, Any]) -> float:
        """Seconds from the restart until the last workflow open at the kill moved again."""
        rows = self.db_rows(
            "SELECT EXTRACT(EPOCH FROM min(e.at)) FROM node_onboardings w "
            "JOIN node_onboarding_events e ON e.onboarding_id = w.id "
            f"AND e.at > to_timestamp({recovery['killed_at']}) "
            f"WHERE w.created_at < to_timestamp({recovery['killed_at']}) GROUP BY w.id"
        )
        moved = [float(r[0]) for r in rows if r[0] is not None]
        return max(moved) - recovery["restarted_at"] if moved else float("nan")

    # -- stopping and collecting ---------------------------------------------------------------

    def stop(self) -> None:
        spy = self.procs.pop("py-spy", None)
        if spy is not None:
            spy.wait(timeout=120)  # it writes its samples when its duration ends
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _collect(self, result: Result) -> None:
        statements: Counter[str] = Counter()
        tasks: Counter[str] = Counter()
        cpu: Counter[str] = Counter()
        rss: dict[str, float] = {}
        for path in self.stats_dir.glob("*.json"):
            body = json.loads(path.read_text())
            kind = "worker" if body["kind"].startswith("worker") else body["kind"]
            statements[kind] += body["statements"]
            tasks.update(body["tasks"])
            cpu[kind] += body["cpu_seconds"]
            rss[kind] = max(rss.get(kind, 0.0), body["max_rss_kb"] / 1024)
        result.statements, result.tasks = dict(statements), dict(tasks)
        result.cpu, result.rss_mb = dict(cpu), rss

    def log_tail(self, name: str, chars: int = 3000) -> str:
        """The end of one process's log (``web``, ``worker``, ``beat``, ``simulator``)."""
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def teardown(self) -> None:
        self.stop()
        with contextlib.suppress(psycopg.Error):
            self._psql(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        shutil.rmtree(self.dir, ignore_errors=True)


_SETUP = """
from django.contrib.auth import get_user_model
from devtools.demo import demo_ca_pem
from maas_domain.services.tokens import api_token_create
from maas_domain.models import MaasSite, SiteProfile, Sku
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.probe import site_probe
admin = get_user_model().objects.create_user("bench-{run}", is_staff=True, is_superuser=True)
site = MaasSite.objects.create(name="bench", maas_url="{maas_url}", pxe_subnet="10.20.0.0/16",
    ca_bundle_pem=demo_ca_pem(), policy={{"max_concurrent_workflows": {limit}}})
site_credentials_write(actor=admin, site=site,
    payload={{"maas_api_key": "{key}", "ipmi": {{"username": "maas", "password": "x"}}}})
SiteProfile.objects.create(site=site, name="p", distro_series="jammy")
Sku.objects.create(code="k", name="k")
assert site_probe(actor=admin, site_id=site.pk)["health"] == "healthy"
print(api_token_create(actor=None, user=admin, name="bench", scope="admin")[1])
"""


def seed_site(name: str, url: str, key: str, sku: Any, known: int | None = None) -> tuple[Any, int]:
    """A site on the simulator at ``url`` with an active node for each of its first ``known``
    machines (default: all but 1%); the rest stay unknown. 1% of the nodes drift (a third each:
    our hostname differs, our BMC address differs, our system id is gone from MAAS). Returns the
    site and how many nodes drift. Call with Django set up."""
    from maas_client.client import MaasClient
    from maas_domain.models import MaasSite, Node
    from maas_domain.services.credentials import site_credentials_write

    client = MaasClient(url, key, read_timeout=300)
    machines = client.machine_summaries()  # also warms the simulator's JSON cache
    power = client.power_addresses()
    client.close()
    site = MaasSite.objects.create(name=name, maas_url=url, maas_user="admin")
    site_credentials_write(actor=None, site=site, payload={"maas_api_key": key})
    known = len(machines) - len(machines) // 100 if known is None else known
    drifting = known // 100
    nodes = []
    for i, m in enumerate(machines[:known]):
        hostname, ip, sid = m.hostname, power[m.system_id], m.system_id
        if i < drifting // 3:
            hostname = f"{hostname}-ours"
        elif i < 2 * drifting // 3:
            ip = f"10.99.{i // 250}.{i % 250 + 1}"  # one BMC per live node: distinct addresses
        elif i < drifting:
            sid = f"gone{i}"
        nodes.append(Node(site=site, sku=sku, hostname=hostname, ipmi_ip=ip,
                          maas_system_id=sid, state="active"))  # fmt: skip
    Node.objects.bulk_create(nodes, batch_size=2000)
    return site, drifting

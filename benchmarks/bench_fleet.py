"""A fleet of many sites reconciled from one beat tick, in the production shape: 20 sites of
5,000 machines (100,000 machines), each site its own simulated MAAS region (a process of its
own), a scratch PostgreSQL database, Redis, prefork Celery workers and beat started with
counters (``benchmarks/instrumented.py``).

Each site: ``machines`` Deployed machines; active nodes for all but 1% of them (those are
machines we do not know, Deployed to our user: leaks), 1% of the nodes drifting (hostname,
power address, missing). Each round starts beat and the workers afresh (so its counters and
peak RSS are its own) with ``reconciliation-dispatch`` due at once, and waits until every
site's run has ended. Round 1 creates the node_maas_state rows and opens the drift; round 2 is
the steady state. Per round: wall time from the beat's tick (the first run queued) to the last
run finished, each run's duration, MAAS requests per site by operation (counted by the
simulators), SQL statements per site (the reconcile task's own, and every process's), Celery
messages, CPU and peak RSS per process kind.

Targets (docs/reconciliation.md, "Performance"): every site reconciled within 60 s of the
tick; no process of ours above 300 MB peak RSS; one machine listing per site per run.

Usage: bench_fleet.py [--sites 20] [--machines 5000] [--rounds 2] [--concurrency 4]
                      [--json FILE] [--no-doc]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import (
    PG_SERVER,
    PY,
    SimulatorProcess,
    bench_broker,
    describe_machine,
    drop_db,
    recreate_db,
    scratch_db,
    seed_site,
)

DB = f"{scratch_db('bench_fleet')}_{os.getpid()}"
WORK = Path(tempfile.mkdtemp(prefix="maascp-fleet-"))
ENV = {
    **os.environ,
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "MAASCP_DATABASE_URL": f"{PG_SERVER}/{DB}",
    "MAASCP_BROKER_URL": bench_broker(),
    "MAASCP_DATA_DIR": str(WORK / "data"),
    "MAASCP_LOG_LEVEL": "INFO",  # production's: every MAAS call is a log line
    "MAASCP_BENCH_STATS": str(WORK / "stats"),
    # the benchmark is the only beat and starts each round itself
    "MAASCP_RECONCILE_MIN_GAP_SECONDS": "0",
    "PYTHONPATH": str(ROOT),
}
os.environ.update(ENV)
TARGET_SECONDS = 60.0
TARGET_RSS_MB = 300.0


@dataclass
class Round:
    number: int
    sites: int
    wall: float = 0.0  # the tick (first run queued) to the last run finished
    durations: list[float] = field(default_factory=list)  # each run's own (ReconcileRun)
    states: dict[str, int] = field(default_factory=dict)
    maas: Counter[str] = field(default_factory=Counter)  # all sites, by operation
    run_requests: list[int] = field(default_factory=list)  # ReconcileRun.maas_requests
    statements: dict[str, int] = field(default_factory=dict)  # by process kind
    task_statements: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)
    drift: tuple[int, int, int] = (0, 0, 0)  # opened, cleared, open (all sites)
    machines_seen: int = 0


def start(name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
    with (WORK / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            cmd, env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def setup_sites(sims: list[SimulatorProcess]) -> None:
    """Sites, credentials and nodes (per site, as the simulator lists its machines)."""
    import django

    django.setup()
    from maas_domain.models import Sku

    sku = Sku.objects.create(code="bench", name="bench")
    for n, sim in enumerate(sims):
        seed_site(f"dc{n:02d}", sim.url, sim.KEY, sku)  # 1% of each site's machines leak
    from django.db import connection

    connection.close()


def run_round(number: int, sims: list[SimulatorProcess], concurrency: int) -> Round:
    import psycopg

    stats = WORK / "stats"
    shutil.rmtree(stats, ignore_errors=True)
    stats.mkdir()
    for sim in sims:
        sim.reset_counters()
    sim_cpu = sum(sim.cpu_seconds() for sim in sims)
    with psycopg.connect(f"{PG_SERVER}/{DB}", autocommit=True) as c:
        # due at once when beat starts (beat is not running: nothing of its state to race)
        c.execute(
            "UPDATE django_celery_beat_periodictask SET enabled = true, "
            "last_run_at = now() - interval '1 day' WHERE name = 'reconciliation-dispatch'"
        )
        before = c.execute("SELECT coalesce(max(id), 0) FROM reconcile_runs").fetchone()
    last_id = int(before[0]) if before else 0
    worker = start(
        f"worker-{number}",
        [
            PY, "-m", "celery", "-A", "benchmarks.instrumented", "worker",
            "--pool", "prefork", "--concurrency", str(concurrency),
            "--hostname", f"fleet{number}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel", "WARNING",
        ],
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(stats.glob("ready-*")):  # written by the worker when it takes messages
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker did not start: {tail(f'worker-{number}')}")
        time.sleep(0.2)
    beat = start(
        f"beat-{number}",
        [
            PY, "-m", "celery", "-A", "benchmarks.instrumented", "beat",
            "--loglevel", "WARNING", "--schedule", str(WORK / f"beat-schedule-{number}"),
        ],
    )  # fmt: skip
    result = Round(number, len(sims))
    try:
        deadline = time.monotonic() + 1800
        with psycopg.connect(f"{PG_SERVER}/{DB}", autocommit=True) as c:
            while True:
                rows = c.execute(
                    "SELECT state, count(*) FROM reconcile_runs WHERE id > %s GROUP BY 1",
                    [last_id],
                ).fetchall()
                states = {str(s): int(n) for s, n in rows}
                ended = states.get("succeeded", 0) + states.get("failed", 0)
                if ended >= len(sims):
                    break
                for name, proc in (("worker", worker), ("beat", beat)):
                    if proc.poll() is not None:
                        raise RuntimeError(f"{name} exited: {tail(f'{name}-{number}')}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"round {number} did not end: {states}")
                time.sleep(0.25)
            result.states = states
            (wall,) = c.execute(
                "SELECT EXTRACT(EPOCH FROM max(finished_at) - min(queued_at)) "
                "FROM reconcile_runs WHERE id > %s",
                [last_id],
            ).fetchone() or (0,)
            result.wall = float(wall)
            for duration, requests_, seen, opened, cleared, open_ in c.execute(
                "SELECT duration_ms, maas_requests, machines_seen, drift_opened, drift_cleared, "
                "drift_open FROM reconcile_runs WHERE id > %s",
                [last_id],
            ).fetchall():
                result.durations.append(int(duration or 0) / 1000)
                result.run_requests.append(int(requests_))
                result.machines_seen += int(seen)
                o, cl, op = result.drift
                result.drift = (o + int(opened), cl + int(cleared), op + int(open_))
    finally:
        stop(beat)
        stop(worker)
    for sim in sims:
        result.maas.update(sim.counters())
    collect(result, stats)
    result.cpu["simulators"] = sum(sim.cpu_seconds() for sim in sims) - sim_cpu
    result.rss_mb["simulator"] = max(sim.peak_rss_mb() for sim in sims)
    return result


def collect(result: Round, stats: Path) -> None:
    statements: Counter[str] = Counter()
    task_statements: Counter[str] = Counter()
    tasks: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    for path in stats.glob("*.json"):
        body = json.loads(path.read_text())
        kind = body["kind"]
        statements[kind] += body["statements"]
        task_statements.update(body.get("task_statements", {}))
        tasks.update(body["tasks"])
        cpu[kind] += body["cpu_seconds"]
        mb = body["max_rss_kb"] / 1024
        result.rss_mb[kind] = max(result.rss_mb.get(kind, 0.0), mb)
    result.statements = dict(statements)
    result.task_statements = dict(task_statements)
    result.tasks = dict(tasks)
    result.cpu = dict(cpu)


def tail(name: str, chars: int = 2000) -> str:
    path = WORK / f"{name}.log"
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def table(r: Round, machines: int) -> str:
    n = r.sites
    cores = os.cpu_count() or 1
    durations = sorted(r.durations)
    reconcile_sql = r.task_statements.get("reconciliation.reconcile_site", 0)
    ours = {k: v for k, v in r.rss_mb.items() if k != "simulator"}
    worst = max(ours.values(), default=0.0)
    lines = [
        f"== round {r.number} ({'first' if r.number == 1 else 'steady'}): {n} sites x "
        f"{machines:,} machines ({r.machines_seen:,} seen)",
        f"  ended                   {dict(sorted(r.states.items()))}",
        f"  wall from the tick      {r.wall:.1f} s (target {TARGET_SECONDS:.0f} s: "
        f"{'yes' if r.wall <= TARGET_SECONDS and r.states == {'succeeded': n} else 'NO'})",
        f"  each run                p50 {durations[len(durations) // 2]:.1f} s   "
        f"max {durations[-1]:.1f} s"
        if durations
        else "  each run                -",
        f"  MAAS requests per site  {sum(r.maas.values()) / n:.2f}   "
        + "  ".join(f"{op} {c / n:.2f}" for op, c in sorted(r.maas.items()))
        + f"   (runs counted {sum(r.run_requests) / n:.2f})",
        f"  SQL per site            reconcile task {reconcile_sql / n:.1f}   all processes "
        f"{sum(r.statements.values()) / n:.1f}   "
        + "  ".join(f"{k} {v}" for k, v in sorted(r.statements.items())),
        "  Celery messages         " + "  ".join(f"{k} {v}" for k, v in sorted(r.tasks.items())),
        "  CPU                     "
        + "  ".join(f"{k} {v:.1f} s" for k, v in sorted(r.cpu.items()))
        + f"   (all of it over {cores} cores: {sum(r.cpu.values()) / cores:.1f} s; "
        "PostgreSQL's not counted)",
        "  peak RSS                "
        + "  ".join(f"{k} {v:.0f} MB" for k, v in sorted(r.rss_mb.items()))
        + f"   (ours at most {worst:.0f} MB, target {TARGET_RSS_MB:.0f}: "
        + ("yes" if worst <= TARGET_RSS_MB else "NO")
        + ")",
        f"  drift                   +{r.drift[0]} -{r.drift[1]} ({r.drift[2]} open)",
    ]
    return "\n".join(lines)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=20)
    parser.add_argument("--machines", type=int, default=5000, help="per site")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4, help="prefork worker processes")
    parser.add_argument("--json", default=str(ROOT / "var" / "bench-fleet.json"))
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    if not 1 <= args.sites <= 150 or not 1 <= args.machines <= 60_000:
        parser.error("1-150 sites (a /16 of BMC addresses each) of 1-60,000 machines")
    import redis

    redis.Redis.from_url(bench_broker()).flushdb()
    recreate_db(DB)
    started = time.perf_counter()
    sims = [
        SimulatorProcess(
            WORK / f"sim{n:02d}",
            count=args.machines,
            prefix=f"dc{n:02d}m",
            ipmi_network=f"10.{100 + n}.0.0/16",
            seed=n,
        )
        for n in range(args.sites)
    ]
    rounds: list[Round] = []
    try:
        migrate = subprocess.run(
            [PY, str(ROOT / "manage.py"), "migrate", "--noinput"],
            env=ENV,
            capture_output=True,
            text=True,
            check=False,
        )
        if migrate.returncode:
            raise RuntimeError(f"migrate failed: {migrate.stderr[-2000:]}")
        for sim in sims:
            sim.wait(timeout=1800)
        setup_sites(sims)
        load = os.getloadavg()
        print(
            f"fleet bench: {args.sites} sites x {args.machines:,} machines, set up in "
            f"{time.perf_counter() - started:.0f} s (load average {load[0]:.1f} {load[1]:.1f} "
            f"{load[2]:.1f}; this process's peak RSS "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)",
            flush=True,
        )
        for number in range(1, args.rounds + 1):
            result = run_round(number, sims, args.concurrency)
            rounds.append(result)
            print(table(result, args.machines), flush=True)
    finally:
        for sim in sims:
            sim.stop()
        drop_db(DB)
        shutil.rmtree(WORK, ignore_errors=True)
    load = os.getloadavg()
    note = f"load average after the run {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    print(f"  {note}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps([r.__dict__ for r in rounds], indent=2, default=str))
    if not args.no_doc:
        doc = ROOT / "docs" / "benchmarks.md"
        with doc.open("a") as out:
            out.write(
                f"\n### {datetime.date.today().isoformat()} — {describe_machine()}\n\n"
                f"`bench_fleet.py --sites {args.sites} --machines {args.machines} "
                f"--concurrency {args.concurrency}` ({note})\n\n```\n"
            )
            out.write("\n".join(table(r, args.machines) for r in rounds))
            out.write("\n```\n")


if __name__ == "__main__":
    main()

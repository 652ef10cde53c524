"""Engine throughput in the production shape (benchmarks/stack.py): one table per scenario, a
JSON file, and a dated section appended to docs/benchmarks.md.

Scenarios (``--only NAME`` to run some):
  burst      200 onboardings admitted at once on the fast clock (600x), prefork pool
  burst_threads  the same on one worker process with 8 threads (side by side: CPU per node)
  wave1000   1,000 in one batch, admission limit 1,000, one onboarding ~60 s of MAAS time
  wave100    the same 1,000 with limit 100 (ten waves)
  recovery   200 at once; every worker is killed mid-batch and restarted (production lease and
             dispatch grace: 90 s, 120 s)
  recovery_short  the same with a 10 s lease and a 15 s dispatch grace
Usage: bench_engine.py [--only burst,recovery] [--nodes N] [--json FILE] [--no-doc]
(``--nodes`` runs each scenario with N onboardings, its limit at most N: a smoke run)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stack import (
    Result,
    Scenario,
    Stack,
    describe_machine,
    maas_seconds_per_onboarding,
)

CORES = os.cpu_count() or 1
SCALE_60S = maas_seconds_per_onboarding() / 60.0  # one onboarding's MAAS time is about 60 s
SCENARIOS = {
    "burst": Scenario("burst", nodes=200, limit=200, scale=600.0, sweep_seconds=1),
    "burst_threads": Scenario(
        "burst_threads", nodes=200, limit=200, scale=600.0, sweep_seconds=1, pool="threads"
    ),
    "wave1000": Scenario("wave1000", nodes=1000, limit=1000, scale=SCALE_60S),
    "wave100": Scenario("wave100", nodes=1000, limit=100, scale=SCALE_60S),
    "recovery": Scenario("recovery", nodes=200, limit=200, scale=60.0, kill_workers_at=0.3),
    "recovery_short": Scenario(
        "recovery_short",
        nodes=200,
        limit=200,
        scale=60.0,
        kill_workers_at=0.3,
        lease_seconds=10,
        dispatch_grace_seconds=15,
    ),
}


def table(r: Result) -> str:
    s = r.scenario
    p50, p95, top = r.duration_stats()
    lines = [
        f"== {s.name}: {s.nodes} onboardings, limit {s.limit}, simulator clock {s.scale:g}x, "
        f"{s.processes} worker process(es), pool {s.pool} x {s.workers}, "
        f"sweep {s.sweep_seconds}s",
        f"  ended                   {dict(sorted(r.states.items()))}",
        f"  accept (HTTP)           {r.accept_seconds * 1000:.0f} ms",
        f"  wall                    {r.wall_seconds:.1f} s   ideal {r.ideal_seconds:.1f} s   "
        f"ratio {r.wall_seconds / max(r.ideal_seconds, 1e-9):.2f}",
        f"  nodes per minute        {60 * s.nodes / max(r.wall_seconds, 1e-9):.0f}",
        f"  per-node duration       p50 {p50:.1f} s   p95 {p95:.1f} s   max {top:.1f} s",
        f"  MAAS requests per node  {r.per_node(sum(r.maas_by_operation.values())):.2f}",
    ]
    for op, n in r.maas_by_operation.items():
        lines.append(f"      {op:<34} {r.per_node(n):6.2f}")
    lines += [
        f"  SQL statements per node {r.per_node(sum(r.statements.values())):.1f}   "
        + "  ".join(f"{k} {r.per_node(v):.1f}" for k, v in sorted(r.statements.items())),
        f"  Celery messages per node {r.per_node(sum(r.tasks.values())):.2f}   "
        + "  ".join(f"{k} {r.per_node(v):.2f}" for k, v in sorted(r.tasks.items())),
        f"  CPU per node            worker {r.per_node(r.cpu.get('worker', 0)) * 1000:.0f} ms   "
        + "  ".join(
            f"{k} {r.per_node(v) * 1000:.0f} ms" for k, v in sorted(r.cpu.items()) if k != "worker"
        ),
        "  peak RSS                "
        + "  ".join(f"{k} {v:.0f} MB" for k, v in sorted(r.rss_mb.items())),
        f"  machine CPU busy        {r.machine_busy_seconds:.1f} s of "
        f"{r.wall_seconds * CORES:.1f} s ({CORES} cores x wall: "
        f"{100 * r.machine_busy_seconds / max(r.wall_seconds * CORES, 1e-9):.0f}%), "
        f"{r.per_node(r.machine_busy_seconds) * 1000:.0f} ms per node: every process "
        "(ours, the simulator, PostgreSQL, Redis)",
    ]
    if r.recovery:
        twice = duplicate_mutations(r)
        lines.append(
            f"  recovery                all workers killed, restarted 3 s later; every open "
            f"workflow moved again {r.recovery['progress_again_seconds']:.1f} s after the "
            f"restart (lease {s.lease_seconds} s, dispatch grace {s.dispatch_grace_seconds} s); "
            f"duplicate MAAS mutations: {twice}"
        )
    return "\n".join(lines)


def duplicate_mutations(r: Result) -> int:
    """State-changing MAAS calls sent twice for one machine (an onboarding sends each once)."""
    seen = Counter((m["action"], m["system_id"]) for m in r.mutations)
    return sum(n - 1 for n in seen.values() if n > 1)


def main() -> None:
    # a SIGTERM ends the run through ``finally``, so the stack's processes and database go too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--json", default=str(Path("var") / "bench-engine.json"))
    parser.add_argument("--no-doc", action="store_true")
    parser.add_argument("--nodes", type=int, default=0)
    args = parser.parse_args()
    results = []
    for name in args.only.split(","):
        scenario = SCENARIOS[name]
        if args.nodes:
            scenario = dataclasses.replace(
                scenario, nodes=args.nodes, limit=min(scenario.limit, args.nodes)
            )
        stack = Stack(scenario)
        try:
            token = stack.setup()
            result = stack.run_batch(token)
        finally:
            stack.teardown()
        print(table(result), flush=True)
        results.append(result)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps([r.as_dict() for r in results], indent=2, default=str))
    if not args.no_doc:
        doc = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
        with doc.open("a") as out:
            out.write(f"\n### {datetime.date.today().isoformat()} — {describe_machine()}\n\n```\n")
            out.write("\n".join(table(r) for r in results))
            out.write("\n```\n")


if __name__ == "__main__":
    main()

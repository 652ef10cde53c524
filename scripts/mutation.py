"""Mutation testing of the safety-bearing modules, each against its fast tests (`make mutation`).

mutmut (3.x, a dev dependency) does the work: it copies the project, writes every mutant of the
module under test into the copy behind a switch, runs the module's fast test files once to learn
which test reaches which function, then runs, for each mutant, only those tests (forked from a
process that has already imported everything). mutmut's own command runs one test selection for
the whole configuration (`[tool.mutmut]` in pyproject.toml, every module below against every test
file below); this driver runs it once per module with that module's tests only, so a module's
score says what *its* test layer notices. docs/mutation.md: how to read the scores, the sampled
mode, the mutants judged equivalent.

    .venv/bin/python scripts/mutation.py [--sample N] [--seed S] [MODULE ...]

`--sample N` tests N mutants per module drawn with seed S (printed; the same seed and source
draw the same mutants); 0 (the default of this script) tests all. Each module runs in its own
copy under var/mutation/<module>/ (rebuilt every run: a score is never a stale cache's). Every
surviving mutant is printed as a diff. The database and Redis settings come from the
environment (`MAASCP_*`); the make target gives the run its own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "var" / "mutation"


@dataclass(frozen=True)
class Target:
    sources: tuple[str, ...]  # globs, relative to the repository
    tests: tuple[str, ...]  # its fast test layer: seconds to a minute in all


# The safety-bearing modules (issue 22, item 7) and the test files that cover each.
TARGETS: dict[str, Target] = {
    "urlsafety": Target(("maas_domain/urlsafety.py",), ("tests/test_urlsafety.py",)),
    "policy": Target(("maas_domain/policy.py",), ("tests/test_policy.py",)),
    "compare": Target(("reconciliation/compare.py",), ("tests/reconciliation/test_compare.py",)),
    "verbs": Target(("workflows/verbs.py",), ("tests/workflow/test_verbs.py",)),
    "step": Target(
        ("workflows/step.py",), ("tests/workflow/test_engine.py", "tests/workflow/test_chain.py")
    ),
    "decommission-stages": Target(
        ("decommission/stages/*.py",), ("tests/decommission/test_stages.py",)
    ),
    "repair-stages": Target(("repair/stages/*.py",), ("tests/repair/test_stages.py",)),
    "onboarding-stages": Target(
        ("onboarding/stages/*.py",),
        (
            "tests/onboarding/test_stages.py",
            "tests/onboarding/test_hardware_stages.py",
            "tests/onboarding/test_live_stages.py",
        ),
    ),
}

# What the copy holds besides the packages mutmut copies (`source_paths` in pyproject.toml):
# nothing of the machine's state (var/), the virtualenv or git.
LEFT_OUT = {".git", ".venv", "var", "mutants", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(TARGETS))
    parser.add_argument("--sample", type=int, default=0, help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=None, help="the sample's seed")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    if args.child:
        return run_one(args.modules[0], sample=args.sample, seed=args.seed)
    if data := os.environ.get("MAASCP_DATA_DIR"):
        Path(data).mkdir(parents=True, exist_ok=True)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    modules = args.modules or list(TARGETS)
    if args.sample:
        print(f"mutation: sampled mode, {args.sample} mutants per module, seed {seed}")
    results: dict[str, dict[str, object]] = {}
    for module in modules:
        print(f"\n=== {module}: {', '.join(TARGETS[module].sources)}", flush=True)
        command = [sys.executable, __file__, "--child", module, "--sample", str(args.sample)]
        code = subprocess.call([*command, "--seed", str(seed)])  # noqa: S603 (our own script)
        result_file = WORK / module / "result.json"
        if code != 0 or not result_file.exists():
            print(f"mutation: {module} did not finish (exit {code})")
            results[module] = {}
            continue
        results[module] = json.loads(result_file.read_text())
    print_table(results, sampled=args.sample, seed=seed)
    return 0 if all(results.values()) else 1


def print_table(results: dict[str, dict[str, object]], *, sampled: int, seed: int) -> None:
    what = f"sample of {sampled} per module, seed {seed}" if sampled else "all mutants"
    print(f"\nMutation score per module ({what}; killed includes timeouts)")
    print(f"{'module':<22}{'killed/total':>14}{'score':>8}  survived")
    for module, result in results.items():
        if not result:
            print(f"{module:<22}{'-':>14}{'-':>8}  (did not finish)")
            continue
        killed, total = int(str(result["killed"])), int(str(result["total"]))
        score = f"{100 * killed / total:.0f}%" if total else "-"
        survivors = result["survived"]
        assert isinstance(survivors, list)
        print(f"{module:<22}{f'{killed}/{total}':>14}{score:>8}  {len(survivors)}")


def run_one(module: str, *, sample: int, seed: int | None) -> int:
    """In a process of its own: mutmut's configuration and state are global."""
    target = TARGETS[module]
    stage = WORK / module
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in LEFT_OUT:
            (stage / entry.name).symlink_to(entry)
    os.chdir(stage)
    # In the copy, `import maas_domain` must find the mutated package, not the editable install.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]

    from mutmut.__main__ import _run, create_mutants
    from mutmut.configuration import config
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths

    cfg = config()
    cfg.only_mutate = list(target.sources)
    cfg.pytest_add_cli_args_test_selection = list(target.tests)

    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    create_mutants(1)
    paths = sorted({p for pattern in target.sources for p in Path().glob(pattern)})
    data = {}
    for path in paths:
        data[path] = SourceFileMutationData(path=path)
        data[path].load()
    names = sorted(name for d in data.values() for name in d.exit_code_by_key)
    if sample and sample < len(names):
        names = sorted(random.Random(seed).sample(names, sample))  # noqa: S311 (not a secret)
        print(f"{module}: {len(names)} mutants drawn (seed {seed})", flush=True)
    else:
        print(f"{module}: all {len(names)} mutants", flush=True)

    try:
        _run(names, max_children=1)
    except SystemExit as stop:  # mutmut exits on a failing clean run
        if stop.code:
            return int(stop.code) if isinstance(stop.code, int) else 1

    statuses: dict[str, str] = {}
    for path in paths:
        data[path].load()
        for name, code in data[path].exit_code_by_key.items():
            if name in names:
                statuses[name] = status_by_exit_code[code]
    killed = sorted(n for n, s in statuses.items() if s in ("killed", "timeout"))
    survived = sorted(n for n in statuses if n not in killed)
    for name in survived:
        print(f"\n--- survived ({statuses[name]}): {name}")
        path = next(p for p, d in data.items() if name in d.exit_code_by_key)
        print(get_diff_for_mutant(name, path=path))
    result = {"killed": len(killed), "total": len(statuses), "survived": survived, "seed": seed}
    (stage / "result.json").write_text(json.dumps(result, indent=1))
    print(f"\n{module}: {len(killed)}/{len(statuses)} killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

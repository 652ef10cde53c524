"""Every product function at radon's rank C or better (`scripts/lint`, docs/architecture.md,
"Complexity").

radon counts what ruff's mccabe rule (C901) does not: each boolean operator is a branch, so
`a and b or c` adds two. Rank C is a cyclomatic complexity of at most 20; a function ranked D
(21) or worse is split along its seams (one checker per type, sub-steps, one rule per kind,
effects as data). Every function counts: methods, and closures and functions nested in others
(radon's own `cc` command lists those only with --show-closures).

    .venv/bin/python scripts/complexity.py [PATH ...]

Without paths it reads the product packages (not the simulator, the tests, the benchmarks or
the migrations). Exit 1 names each function over the limit, and each temporary exception that
is no longer needed (so the list below only shrinks).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from radon.complexity import cc_rank
from radon.visitors import Class, ComplexityVisitor, Function

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "maas_client", "maas_domain", "workflows", "onboarding", "decommission",
            "reconciliation", "repair", "maasctl", "devtools")  # fmt: skip
LIMIT = 20  # rank C's upper bound; 21 is D
# Temporary exceptions, by "path:qualified name": each is being split in another change (issue
# 32, item 5) and comes off this list when it lands.
EXCEPTIONS = {
    "onboarding/stages/discover.py:discover",  # in another change: onboarding's discover stage
}


def _functions(blocks: list[Function | Class], prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """(qualified name, line, complexity) of every function, method and closure in ``blocks``."""
    for block in blocks:
        name = f"{prefix}{block.name}"
        if isinstance(block, Class):
            yield from _functions([*block.methods, *block.inner_classes], f"{name}.")
        else:
            yield name, block.lineno, block.complexity
            yield from _functions(block.closures, f"{name}.")


def _modules(paths: list[str]) -> Iterator[Path]:
    for path in map(Path, paths):
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        yield from (f for f in files if "migrations" not in f.parts)


def main(argv: list[str]) -> int:
    paths = argv or [str(ROOT / p) for p in PACKAGES]
    over: list[str] = []
    seen: set[str] = set()
    for module in _modules(paths):
        full = module.resolve()
        where = full.relative_to(ROOT).as_posix() if full.is_relative_to(ROOT) else str(full)
        visitor = ComplexityVisitor.from_code(module.read_text())
        for name, line, complexity in _functions([*visitor.functions, *visitor.classes]):
            if complexity <= LIMIT:
                continue
            key = f"{where}:{name}"
            if key in EXCEPTIONS:
                seen.add(key)
                continue
            over.append(f"{where}:{line} {name} - {cc_rank(complexity)} ({complexity})")
    stale = sorted(EXCEPTIONS - seen) if not argv else []
    for found in over:
        print(f"complexity: {found}: over rank C (at most {LIMIT}); split it along its seams")
    for key in stale:
        print(f"complexity: {key} is rank C now: remove it from EXCEPTIONS (scripts/complexity.py)")
    return 1 if over or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

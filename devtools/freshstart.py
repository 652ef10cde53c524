"""`make run` starts consistent (README, "Two commands"): the bundled MAAS simulators keep
their state in memory only, so every start of the stack meets a MAAS that has forgotten the
last run. A database that remembered it would show every node onboarded before as critical
drift (MAAS no longer has its machine), and a new host could get the system id a live node
still holds. So a start resets the embedded database with the simulator, and says so in the
banner; the admin login and the API token are kept (they live in the data folder).

``--keep-database`` keeps it instead (the banner says what that means), and a database that is
not the embedded SQLite file (``MAASCP_DATABASE_URL``) is never dropped. Either way the
simulators are told the system ids our nodes hold (``simulate_maas --reserve-system-ids``), so
none is handed to another host.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connections

# What an earlier run leaves that a fresh MAAS contradicts, by table (counted before the reset).
COUNTED = {
    "site": "maas_sites",
    "node": "nodes",
    "onboarding": "node_onboardings",
    "decommission": "node_decommissions",
}
# Folders of the data folder whose contents name rows of the database (queued task messages,
# task results, cached diagnostics): emptied with it.
WITH_THE_DATABASE = ("broker", "results", "cache")


@dataclass(frozen=True)
class Outcome:
    """What the start did with the database, for the banner."""

    reset: bool
    counts: dict[str, int]
    why_kept: str = ""

    def banner(self) -> str:
        gone = ", ".join(f"{n} {what}(s)" for what, n in self.counts.items() if n)
        if self.reset and gone:
            return (
                "reset with the simulated MAAS, which starts afresh on every run: the last "
                f"run's {gone} are gone (the admin login and API token are kept); "
                "--keep-database keeps them"
            )
        if self.reset or not gone:
            return "new"
        return (
            f"kept ({self.why_kept}): {gone} from earlier runs; the simulated MAAS starts "
            "afresh, so their machines are missing from it and show as drift (no system id "
            "they hold is given to another host)"
        )


def embedded_database() -> Path | None:
    """The SQLite file of the default database when it is the embedded one (inside the data
    folder), else None (a database of the operator's own: never dropped here)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        return None
    path = Path(str(db["NAME"])).resolve()
    data = Path(settings.DATA_DIR).resolve()
    return path if data in path.parents else None


def counts(path: Path) -> dict[str, int]:
    """What the database file holds of an earlier run (zeros for a table it does not have)."""
    found = dict.fromkeys(COUNTED, 0)
    if not path.exists():
        return found
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        for what, table in COUNTED.items():
            with contextlib.suppress(sqlite3.Error):  # an older schema: nothing to count
                found[what] = int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608 (our table names)
    return found


def prepare(*, keep: bool) -> Outcome:
    """Reset the embedded database (and what names its rows) unless ``keep``; call before
    ``migrate``, which then makes it anew."""
    path = embedded_database()
    if path is None:
        return Outcome(False, _orm_counts(), "MAASCP_DATABASE_URL is not the embedded database")
    found = counts(path)
    if keep:
        return Outcome(False, found, "--keep-database")
    connections.close_all()
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    data = Path(settings.DATA_DIR)
    for name in WITH_THE_DATABASE:  # their files go; the folders stay (the broker's are set up)
        for entry in sorted((data / name).rglob("*"), reverse=True):
            if not entry.is_dir():
                entry.unlink(missing_ok=True)
    return Outcome(True, found)


def _orm_counts() -> dict[str, int]:
    from maas_domain.models import MaasSite, Node
    from maas_domain.work import KINDS

    found = {"site": 0, "node": 0}
    with contextlib.suppress(Exception):  # not migrated yet: nothing to count
        found = {"site": MaasSite.objects.count(), "node": Node.objects.count()}
        for name, kind in KINDS.items():
            found[name] = kind.model.objects.count()
    return found


def reserve_system_ids(path: Path) -> int:
    """Write the system ids our nodes hold (retired ones too: their history names them) for
    the simulators' ``--reserve-system-ids``; how many (after a reset: none)."""
    from maas_domain.models import Node

    held = sorted(set(Node.objects.exclude(maas_system_id="").values_list("maas_system_id",
                                                                           flat=True)))  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{sid}\n" for sid in held))
    return len(held)

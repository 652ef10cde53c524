"""`make run` restarts consistent (devtools/freshstart.py): the embedded database is reset with
the simulated MAAS, which forgets everything at each start, and the banner says what went;
--keep-database and a database of the operator's own are kept; the simulators are told the
system ids our nodes hold."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from devtools import freshstart
from tests.factories import make_node, make_site

# the fixture points the default database at a SQLite file in a data folder (no test here
# opens a connection through it: freshstart reads the file with sqlite3)
pytestmark = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")


@pytest.fixture
def embedded(tmp_path: Path, settings: Any) -> Path:
    """A data folder whose SQLite database an earlier run filled (and a queued task message)."""
    data = tmp_path / "var"
    (data / "broker" / "in").mkdir(parents=True)
    (data / "broker" / "in" / "msg-1").write_text("step.advance onboarding 7")
    path = data / "maascp.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE maas_sites (id integer)")
        db.execute("CREATE TABLE nodes (id integer)")
        db.executemany("INSERT INTO maas_sites VALUES (?)", [(1,), (2,)])
        db.executemany("INSERT INTO nodes VALUES (?)", [(1,), (2,), (3,)])
    settings.DATA_DIR = data
    settings.DATABASES = {**settings.DATABASES,
                          "default": {**settings.DATABASES["default"],
                                      "ENGINE": "django.db.backends.sqlite3",
                                      "NAME": str(path)}}  # fmt: skip
    return path


def test_a_start_resets_the_embedded_database_and_says_what_went(embedded: Path) -> None:
    outcome = freshstart.prepare(keep=False)
    assert not embedded.exists()  # migrate makes it anew
    assert not any((embedded.parent / "broker").rglob("msg-*"))  # no task of the old rows
    assert (embedded.parent / "broker" / "in").is_dir()  # its folders stay
    said = outcome.banner()
    assert said.startswith("reset with the simulated MAAS, which starts afresh on every run")
    assert "the last run's 2 site(s), 3 node(s) are gone" in said
    assert "--keep-database keeps them" in said


def test_keep_database_keeps_it_and_says_what_that_means(embedded: Path) -> None:
    outcome = freshstart.prepare(keep=True)
    assert embedded.exists() and (embedded.parent / "broker" / "in" / "msg-1").exists()
    said = outcome.banner()
    assert said.startswith("kept (--keep-database): 2 site(s), 3 node(s) from earlier runs")
    assert "show as drift" in said and "no system id they hold is given to another host" in said


def test_a_first_start_has_nothing_to_reset(embedded: Path) -> None:
    embedded.unlink()
    assert freshstart.prepare(keep=False).banner() == "new"


@pytest.mark.django_db
def test_a_database_of_the_operator_s_own_is_never_dropped() -> None:
    make_site()  # the test database is PostgreSQL, as MAASCP_DATABASE_URL makes it
    assert freshstart.embedded_database() is None
    outcome = freshstart.prepare(keep=False)
    assert not outcome.reset
    assert "MAASCP_DATABASE_URL is not the embedded database" in outcome.banner()


@pytest.mark.django_db
def test_the_simulators_are_told_every_system_id_a_node_holds(tmp_path: Path) -> None:
    site = make_site()
    make_node(site, maas_system_id="abc123")
    make_node(site, maas_system_id="def456", state="retired")
    make_node(site, maas_system_id="")
    path = tmp_path / "run" / "reserved-system-ids"
    assert freshstart.reserve_system_ids(path) == 2
    assert path.read_text() == "abc123\ndef456\n"

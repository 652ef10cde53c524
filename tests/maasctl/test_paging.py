"""Lists said aloud when cut, ``--all`` for every entry, timelines oldest first whatever order
the server pages them in, and a watched batch that stops when it is paused (docs/cli.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from maasctl.api import oldest_first
from tests.support.fakeapi import page


def _nodes(n: int, start: int = 1) -> list[dict[str, Any]]:
    return [{"id": i, "hostname": f"c{i:02d}", "state": "active"} for i in range(start, start + n)]


def test_a_cut_list_says_how_much_was_shown(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("GET", "/nodes", {**page(_nodes(50), count=73), "next": "more"})
    result = fake_cli("nodes", "list", "--limit", "50")
    assert result.exit_code == 0
    assert "50 of 73 nodes shown; --all for every one, or --limit N" in result.stderr
    assert "c50" in result.stdout and "of 73" not in result.stdout  # data on stdout only
    fake_api.on("GET", "/nodes", page(_nodes(3)))
    assert "shown" not in fake_cli("nodes", "list").stderr


def test_all_follows_every_page(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("GET", "/nodes", {**page(_nodes(3), count=5), "next": "more"})
    fake_api.on("GET", "/nodes", page(_nodes(2, start=4), count=5))
    result = fake_cli("nodes", "list", "--all", "-o", "json")
    assert [n["id"] for n in json.loads(result.stdout)] == [1, 2, 3, 4, 5]
    assert [s.query["offset"] for s in fake_api.to("GET", "/nodes")] == [["0"], ["3"]]
    assert {s.query["limit"][0] for s in fake_api.to("GET", "/nodes")} == {"500"}
    assert "shown" not in result.stderr


def _entry(minute: int) -> dict[str, Any]:
    return {"at": f"2024-05-01T20:{minute:02d}:00+00:00", "source": "workflow",
            "kind": "stage.completed", "stage": f"s{minute}", "message": f"m{minute}"}  # fmt: skip


@pytest.mark.parametrize("server_order", ["newest first", "oldest first"])
def test_timelines_print_the_latest_entries_oldest_first(
    fake_cli: Any, fake_api: Any, server_order: str
) -> None:
    every = [_entry(m) for m in range(1, 6)]  # 20:01 .. 20:05
    served = every[::-1] if server_order == "newest first" else every

    def answer(query: dict[str, list[str]]) -> dict[str, Any]:
        offset, limit = int(query["offset"][0]), int(query["limit"][0])
        rows = served[offset : offset + limit]
        return {**page(rows, count=5), "maas_events": {"requested": False}}

    fake_api.on("GET", "/nodes/7/timeline", answer)
    result = fake_cli("nodes", "timeline", "7", "--limit", "3", "-o", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert [e["message"] for e in shown["results"]] == ["m3", "m4", "m5"]
    assert shown["count"] == 5
    assert "3 of 5 entries shown (the latest); --all for every one" in result.stderr
    table = fake_cli("nodes", "timeline", "7", "--limit", "3").stdout
    assert "the latest 3 of 5 entries, oldest first" in table
    assert table.index("m3") < table.index("m4") < table.index("m5")
    fake_api.on("GET", "/onboardings/2/timeline", answer)
    everything = fake_cli("onboardings", "timeline", "2", "--all", "-o", "json")
    assert [e["message"] for e in json.loads(everything.stdout)] == [f"m{m}" for m in range(1, 6)]


def test_a_watched_batch_that_is_paused_stops_and_says_why(fake_cli: Any, fake_api: Any) -> None:
    counts = dict.fromkeys(("running", "waiting", "cancelling", "manual_intervention",
                            "succeeded", "cancelled"), 0)  # fmt: skip
    paused = {"id": 6, "size": 3, "state": "paused", "paused_reason": "canary c01 failed: deploy",
              "queued": 2, "counts": {**counts, "pending": 2, "failed": 1},
              "failed": [{"id": 11, "hostname": "c01", "stage": "deploy",
                          "failure_class": "deploy_failed",
                          "reason": "curtin exited 3"}]}  # fmt: skip
    ended = {**paused, "state": "cancelled", "counts": {**counts, "failed": 1, "cancelled": 2}}
    fake_api.on("GET", "/onboardings/batches/6", paused)
    fake_api.on("GET", "/onboardings/batches/6", ended)  # where a watch that did not stop goes
    result = fake_cli("batches", "show", "6", "--watch", "--interval", "0")
    assert result.exit_code == 1
    assert len(fake_api.to("GET", "/onboardings/batches/6")) == 1
    assert "batch 6 is paused: canary c01 failed: deploy; its 2 pending host(s) wait for " \
           "`maasctl batches resume 6`" in result.stderr  # fmt: skip
    assert "curtin exited 3" in result.stdout


def test_oldest_first_sorts_by_time_and_keeps_the_order_of_one_instant() -> None:
    a, b, c = ({**_entry(2), "message": m} for m in "abc")  # one instant, a written first
    newest_first = [c, b, a, _entry(1)]
    assert [e["message"] for e in oldest_first(newest_first)] == ["m1", "a", "b", "c"]
    mixed = [_entry(3), _entry(1), _entry(2)]  # e.g. MAAS events merged in
    assert [e["message"] for e in oldest_first(mixed)] == ["m1", "m2", "m3"]

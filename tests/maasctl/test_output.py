"""What maasctl prints (docs/cli.md, "Output"): -o anywhere on the line, server text printed as
written (never Rich markup, never a terminal control), and piped output never cut."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.support.fakeapi import page

SITE = {"id": 1, "name": "east", "status": "active", "health": "healthy",
        "last_probe_at": None, "maas_url": "http://maas:5240/MAAS/"}  # fmt: skip
HOSTILE = {
    "id": 2,
    "name": "[link=http://evil.example]x[/link]",
    "status": "[bold red]down[/]",
    "health": "\u202eylhtlaeh",  # a right-to-left override
    "last_probe_at": "\x9b31mC1-red",  # a C1 control sequence introducer
    "maas_url": "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\\n",  # OSC 8 + newline
}
RAW_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def cells(table: str) -> str:
    """A table's cells, column by column, with the spaces where long cells wrapped removed (a
    piped table wraps at 120 columns): a value without spaces is found whole in it."""
    rows = [line.split("│")[1:-1] for line in table.splitlines() if line.count("│") > 1]
    width = max((len(r) for r in rows), default=0)
    return "".join("".join(r[i] for r in rows if len(r) > i) for i in range(width)).replace(" ", "")


@pytest.mark.parametrize(
    "argv",
    [
        ("-o", "json", "sites", "list"),
        ("sites", "list", "-o", "json"),
        ("sites", "list", "--output", "json"),
        ("sites", "list", "--output=json"),
        ("sites", "list", "--name", "ea", "-o", "json", "--limit", "5"),
        ("-o", "yaml", "sites", "list", "-o", "json"),  # the last one wins
    ],
)
def test_output_options_anywhere_on_the_line(fake_cli: Any, fake_api: Any, argv: Any) -> None:
    fake_api.on("GET", "/maas-sites", page([SITE]))
    result = fake_cli(*argv)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [SITE]


def test_output_option_after_a_command_with_arguments(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("POST", "/onboardings", {"id": 9, "hostname": "c01", "state": "pending"},
                status=202)  # fmt: skip
    args = ["--ipmi-ip", "10.0.0.1", "--site", "1", "--profile", "2", "--sku", "3"]
    result = fake_cli("onboard", "c01", "-o", "yaml", *args)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["id"] == 9
    result = fake_cli("skus", "show", "3", "--output", "yaml")  # a 404 from the fake: an error
    assert result.exit_code == 4 and "No such option" not in result.output


def test_server_text_prints_literally_never_as_markup_or_terminal_control(
    fake_cli: Any, fake_api: Any
) -> None:
    fake_api.on("GET", "/maas-sites", page([SITE, HOSTILE]))
    fake_api.on("GET", "/maas-sites/2", HOSTILE)
    for argv in (("sites", "list"), ("sites", "show", "2")):
        result = fake_cli(*argv)
        assert result.exit_code == 0, result.output
        text = cells(result.stdout)
        assert "[link=http://evil.example]x[/link]" in text  # as written, not a hyperlink
        assert "[boldred]down[/]" in text
        assert "\\x1b]8;;http://evil.example\\x1b\\click" in text  # escaped, visible
        assert "\\x9b31mC1-red" in text and "\\u202eylhtlaeh" in text
        assert "\\n" in text  # the trailing newline is shown, not a line break
        assert not RAW_CONTROLS.search(result.stdout), repr(result.stdout)


def test_json_and_yaml_keep_the_data_but_escape_every_control(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("GET", "/maas-sites", page([HOSTILE]))
    as_json = fake_cli("sites", "list", "-o", "json").stdout
    assert not RAW_CONTROLS.search(as_json), repr(as_json)
    assert json.loads(as_json) == [HOSTILE]
    as_yaml = fake_cli("sites", "list", "-o", "yaml").stdout
    assert not RAW_CONTROLS.search(as_yaml), repr(as_yaml)
    assert yaml.safe_load(as_yaml) == [HOSTILE]


def test_an_error_from_the_server_cannot_forge_a_line_or_markup(
    fake_cli: Any, fake_api: Any
) -> None:
    detail = "[red]boom[/red]\x1b[2J\nmaasctl: all good"
    fake_api.on("DELETE", "/skus/3", {"error": "conflict", "detail": detail,
                                      "fields": {"code\n": ["bad\x1b[1m"]}},
                status=409)  # fmt: skip
    result = fake_cli("skus", "delete", "3", "--yes")
    assert result.exit_code == 3
    err = result.stderr
    assert "[red]boom[/red]\\x1b[2J\\nmaasctl: all good" in err
    assert not any(line.startswith("maasctl: all good") for line in err.splitlines())
    assert "  code\\n: bad\\x1b[1m" in err
    assert not RAW_CONTROLS.search(err), repr(err)


def test_piped_tables_fit_120_columns_and_lose_nothing(fake_cli: Any, fake_api: Any) -> None:
    """A pipe or a pager gets lines of at most 120 columns (docs/cli.md, "Output"): long cells
    wrap, a long word folds, nothing is cut; -o json keeps every value on its line."""
    message = "deploy failed: " + " ".join(f"word{i}" for i in range(60))  # ~400 characters
    token = "x" * 300  # one word longer than any column
    entry = {"at": "2024-05-01T20:05:01+00:00", "source": "workflow", "kind": "stage.failed",
             "workflow_kind": "onboarding", "workflow_id": 1, "stage": "deploy",
             "message": f"{message} {token}"}  # fmt: skip
    fake_api.on("GET", "/nodes/7/timeline", {**page([entry]), "maas_events": {"requested": False}})
    policy = {f"key_{i}": "value" * 5 for i in range(12)}
    fake_api.on("GET", "/maas-sites/1", {**SITE, "policy": policy})
    timeline = fake_cli("nodes", "timeline", "7")
    assert timeline.exit_code == 0, timeline.output
    lines = timeline.stdout.splitlines()
    assert max(len(x) for x in lines) <= 120, max(lines, key=len)
    assert f"{message} {token}".replace(" ", "") in cells(timeline.stdout)  # every character
    shown = fake_cli("sites", "show", "1")
    assert max(len(x) for x in shown.stdout.splitlines()) <= 120
    assert json.dumps(policy, sort_keys=True).replace(" ", "") in cells(shown.stdout)
    as_json = fake_cli("-o", "json", "nodes", "timeline", "7")
    assert json.loads(as_json.stdout)["results"][0]["message"] == f"{message} {token}"
    assert any(len(x) > 300 for x in as_json.stdout.splitlines())  # JSON is never wrapped

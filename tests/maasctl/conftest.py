"""maasctl against the fake API (tests/support/fakeapi.py): what it sends and what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from maasctl.api import Api
from maasctl.main import app
from tests.support.fakeapi import fake_api  # noqa: F401 (fixture)


@pytest.fixture
def waits(monkeypatch: Any) -> list[float]:
    """The seconds maasctl chose to sleep (nothing sleeps)."""
    slept: list[float] = []
    monkeypatch.setattr(Api, "sleep", staticmethod(slept.append))
    return slept


@pytest.fixture
def fake_cli(fake_api: Any, waits: list[float], tmp_path: Path, monkeypatch: Any) -> Any:  # noqa: F811
    """Run maasctl in this process against the fake API, as a pipe would (not a terminal),
    with an 80-column COLUMNS that a pipe must not be cut to."""
    monkeypatch.setenv("MAASCTL_CONFIG", str(tmp_path / "absent.toml"))
    env = {"MAASCTL_URL": fake_api.url, "MAASCTL_TOKEN": "mcp_fake", "COLUMNS": "80",
           "MAASCTL_PROFILE": ""}  # fmt: skip

    def run(*argv: str, input: str | None = None, env_extra: dict[str, str] | None = None) -> Any:
        result = CliRunner().invoke(app, list(argv), env={**env, **(env_extra or {})},
                                    input=input)  # fmt: skip
        assert "Traceback" not in result.output, result.output
        assert not isinstance(result.exception, Exception) or isinstance(
            result.exception, SystemExit
        ), result.exception
        return result

    return run

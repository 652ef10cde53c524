"""The fuzzing gate's own server-error rule (tests/api/test_fuzz.py ``no_server_error``): the one
5xx it lets through is the documented 503 of an unserved region; every other 5xx still fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from schemathesis.core.failures import FailureGroup

from tests.api.test_fuzz import no_server_error
from tests.support.openapi import openapi_document

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = schemathesis.openapi.from_dict(openapi_document())
REGION = {"error": "unavailable", "detail": "No live worker serves region 'x'",
          "dependency": "region"}  # fmt: skip


def answer(operation: Any, status: int, body: Any) -> None:
    """Validate a made-up answer of ``operation`` with the gate's rule alone."""
    path = {"id": 1} if "{id}" in operation.path else {}
    case = operation.Case(path_parameters=path, **({"body": {}} if operation.body else {}))
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps(body).encode() if not isinstance(body, bytes) else body
    response.headers["Content-Type"] = "application/json"
    response.request = requests.Request(operation.method.upper(), "http://testserver/x").prepare()
    case.validate_response(response, checks=[no_server_error])


PROBE = SCHEMA["/api/v1/admin/maas-sites/{id}/probe/"]["POST"]


def test_the_documented_unserved_region_503_passes() -> None:
    answer(PROBE, 503, REGION)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, REGION),  # not a 503
        (503, {**REGION, "dependency": "secrets"}),  # a dependency the fuzz has and serves
        (503, {**REGION, "dependency": "database"}),  # so is the database
        (503, {"error": "unavailable"}),  # names no dependency
        (503, b"<html>Service Unavailable</html>"),  # not JSON
        (503, [REGION]),  # not an object
        (502, REGION),
    ],
)
def test_every_other_server_error_fails(status: int, body: Any) -> None:
    with pytest.raises((AssertionError, FailureGroup)):
        answer(PROBE, status, body)


@pytest.mark.slow
def test_scripts_fuzz_prints_its_seed_on_a_passing_run_too(
    private_redis: Any, tmp_path: Path
) -> None:
    """A passing run printed nothing of its seed (pytest keeps a passing test's output): it
    could not be replayed. One operation, two examples, on SQLite and a Redis of its own (the
    gate empties its broker's database); a given FUZZ_SEED is printed the same way."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAASCP_", "FUZZ_"))}
    env.update(MAASCP_DATA_DIR=str(tmp_path), MAASCP_BROKER_URL=private_redis.url,
               FUZZ_ONLY="/skus/{id}", FUZZ_EXAMPLES="2")  # fmt: skip
    fresh = subprocess.run(["scripts/fuzz", "sqlite"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
    seed = re.search(r"fuzz: passed with seed (\d+) on sqlite", fresh.stdout)
    assert seed, fresh.stdout
    assert f"(replay: FUZZ_SEED={seed[1]} scripts/fuzz sqlite)" in fresh.stdout

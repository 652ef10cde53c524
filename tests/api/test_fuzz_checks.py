"""The fuzzing gate's own server-error rule (tests/api/test_fuzz.py ``no_server_error``): the one
5xx it lets through is the documented 503 of an unserved region; every other 5xx still fails."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import schemathesis
from schemathesis.core.failures import FailureGroup

from tests.api.test_fuzz import no_server_error
from tests.support.openapi import openapi_document

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

"""No secret in any log line, at any level, on any handler (docs/security.md, T3).

``MAASCP_LOG_LEVEL=DEBUG`` is a documented setting, and libraries log requests at DEBUG
(``requests_oauthlib`` the Authorization header, whose OAuth PLAINTEXT signature *is* the MAAS
token secret, and the request bodies with IPMI passwords and user data). These tests configure
logging exactly as the settings do, at DEBUG, with the Loki push handler on, run a real
onboarding through the whole-workflow harness (worker, simulator, live server, node callback),
and search every line written to stdout and pushed to Loki for each secret: as is,
percent-encoded, and base64-encoded at every alignment.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import logging
import logging.config
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from maas_client.client import MaasClient
from maas_domain.services.tokens import api_token_create
from onboarding import payload
from tests.support.flows import Flow, settle, start
from tests.support.maas import API_KEY, Sim
from tests.support.recorder import Answer, Recorder

TOKEN_SECRET = API_KEY.split(":")[2]


def needles(secret: str) -> set[str]:
    """The secret as it could appear in a line: raw, percent-encoded, base64 at 3 alignments."""
    raw = secret.encode()
    found = {secret, quote(secret, safe=""), quote("&" + secret, safe="")}
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode()
        # drop the characters that mix padding or neighbours into the encoding
        start = (pad * 4 + 2) // 3 + 1 if pad else 0
        found.add(encoded[start : len(encoded) - 4])
    return {n for n in found if len(n) >= 8}


def leaks(text: str, secrets: dict[str, str]) -> list[str]:
    return sorted(name for name, secret in secrets.items() for n in needles(secret) if n in text)


class Captured:
    def __init__(self, stream: io.StringIO, loki: Recorder, handler: Any) -> None:
        self.stream, self.loki, self.handler = stream, loki, handler

    def text(self) -> str:
        self.handler.flush()
        pushed = "\n".join(s.body.decode() for s in self.loki.seen)
        return self.stream.getvalue() + "\n" + pushed

    def lines(self) -> int:
        return len(self.stream.getvalue().splitlines())


@pytest.fixture
def debug_logging() -> Iterator[Captured]:
    """The project's LOGGING at DEBUG, its console handler writing to a buffer and, like
    ``MAASCP_LOKI_URL`` does, a Loki push handler with the console handler's filters."""
    loki = Recorder(lambda method, path: Answer(status=204, body=b""))
    config = copy.deepcopy(settings.LOGGING)
    config["root"]["level"] = "DEBUG"
    config["handlers"]["loki"] = {
        **{k: v for k, v in config["handlers"]["console"].items() if k != "class"},
        "()": "maas_domain.observability.loki.LokiHandler",
        "url": loki.url + "/loki/api/v1/push",
        "flush_seconds": 0.2,
    }
    config["root"]["handlers"] = ["console", "loki"]
    logging.config.dictConfig(config)
    root = logging.getLogger()
    stream = io.StringIO()
    console = next(h for h in root.handlers if isinstance(h, logging.StreamHandler))
    console.setStream(stream)
    loki_handler = next(h for h in root.handlers if type(h).__name__ == "LokiHandler")
    yield Captured(stream, loki, loki_handler)
    logging.config.dictConfig(settings.LOGGING)
    loki_handler.close()
    loki.stop()


def test_a_maas_call_at_debug_logs_no_key(debug_logging: Captured, sim: Sim) -> None:
    client = MaasClient(sim.url, API_KEY, site="s")
    client.whoami()
    client.create_machine(
        hostname="n1",
        mac_addresses=[],
        power_parameters={"power_address": "10.0.0.1", "power_pass": "Bmc-Pass-7781"},
    )
    client.close()
    text = debug_logging.text()
    assert "maas get_whoami ok" in text  # DEBUG lines are there...
    assert leaks(text, {"token secret": TOKEN_SECRET, "IPMI password": "Bmc-Pass-7781"}) == []


def test_the_redaction_filter_blanks_secret_shapes_on_every_handler(
    debug_logging: Captured,
) -> None:
    ours = [h for h in logging.getLogger().handlers if h.name in ("console", "loki")]
    assert len(ours) == 2
    for handler in ours:
        assert any(type(f).__name__ == "RedactFilter" for f in handler.filters), handler
    log = logging.getLogger("some.library")
    raw_token = "mcp_" + "Q" * 43
    log.debug("Updated headers: {'Authorization': 'OAuth oauth_signature=\"%%26%s\"'}", "S" * 30)
    log.info("Authorization: Bearer %s", raw_token)
    log.warning("body power_pass=%s&user=x", "Bmc-Pass-7781")
    log.error("key %s failed", API_KEY, extra={"password": "Extra-Pass-99"})
    log.info("fetch https://b.test/x.tgz?X-Amz-Signature=%s&X-Amz-Date=1", "f" * 64)
    try:
        raise ValueError(f"vault said token=hvs.{'Z' * 30}")
    except ValueError:
        log.exception("boom")
    text = debug_logging.text()
    found = leaks(
        text,
        {
            "oauth": "S" * 30,
            "bearer": raw_token,
            "power_pass": "Bmc-Pass-7781",
            "maas key": TOKEN_SECRET,
            "extra": "Extra-Pass-99",
            "presigned signature": "f" * 64,
            "vault token": "Z" * 30,
        },
    )
    assert found == []
    assert text.count("[redacted]") >= 7
    for line in debug_logging.stream.getvalue().splitlines():
        json.loads(line)  # still one JSON object per line


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_onboarding_at_debug_logs_no_secret(
    flow: Flow, node_side: Any, debug_logging: Captured
) -> None:
    # (debug_logging comes last: the worker's start-up would otherwise set its own level)
    flow.sim.add(hostname="unnamed-node", status="new", power_address="10.10.7.31")
    wf = settle(start(flow, "c07u31", "10.10.7.31").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    _, raw = api_token_create(actor=None, user=flow.admin, name="debug-test")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get(f"/api/v1/admin/onboardings/{wf.pk}").status_code == 200
    tokens = payload.read_tokens(wf)
    assert tokens is not None
    text = debug_logging.text()
    assert '"level": "DEBUG"' in text, "DEBUG logging was not on"
    assert debug_logging.lines() > 10
    secrets = {
        "MAAS token secret": TOKEN_SECRET,
        "MAAS API key": API_KEY,
        "IPMI password": "ipmi-pass",
        "enrollment token": tokens.enrollment,
        "bootstrap token": tokens.bootstrap,
        "API bearer token": raw,
        "Django SECRET_KEY": settings.SECRET_KEY,
    }
    assert leaks(text, secrets) == []
    for line in debug_logging.stream.getvalue().splitlines():
        json.loads(line)


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("GET /x?x-api-key=XYZSECRET123&y=1", "XYZSECRET123"),
        ('{"api-key": "SECRETAPI99", "site": "dc1"}', "SECRETAPI99"),
        ('{"password": "ab\\"cd-SECRET1", "user": "bob"}', "cd-SECRET1"),
        ("power_pass='p\\'w-SECRET2' user=admin", "w-SECRET2"),
        ('Authorization: "OAuth oauth_signature=\\"&SIG3\\"", next', "SIG3"),
    ],
)
def test_hyphenated_keys_and_escaped_quotes_do_not_let_a_secret_through(
    line: str, secret: str
) -> None:
    """Shapes a reviewer found passing through: ``api-key`` with a hyphen, and a quoted value
    whose escaped quote ended the match early."""
    from maas_domain.redaction import redact_text

    shown = redact_text(line)
    assert secret not in shown and "[redacted]" in shown, shown

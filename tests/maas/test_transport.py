"""The MAAS client's transport: the PLAINTEXT header as requests_oauthlib wrote it, connections
reused from one client to the next in a process (a workflow step builds a client per
execution), the environment's proxies read once."""

from __future__ import annotations

import os
import random
import re
from typing import Any

import pytest
import requests
from oauthlib.oauth1 import SIGNATURE_PLAINTEXT
from requests import exceptions as rex
from requests_oauthlib import OAuth1
from urllib3 import exceptions as u3

from maas_client import wire
from maas_client.client import MaasClient
from maas_client.errors import MaasAuthError, MaasTransient
from maas_client.transport import as_requests_error
from maas_client.wire import Credentials, PlaintextAuth
from tests.support.maas import API_KEY, Sim
from tests.support.recorder import Answer as RecordedAnswer
from tests.support.recorder import Recorder

NO_POOL: Any = None  # urllib3's errors name the pool they came from; these came from none
NONCE = re.compile(r'oauth_nonce="\d+", oauth_timestamp="\d+"')


def header(auth: Any, method: str = "GET", body: bytes | None = None) -> str:
    headers = {"Content-Type": "multipart/form-data; boundary=b"} if body else {}
    request = requests.Request(
        method, "http://maas.test:5240/MAAS/api/2.0/machines/?op=x", data=body, headers=headers
    )
    value = request.prepare()
    value = auth(value)
    found = value.headers["Authorization"]
    return found.decode() if isinstance(found, bytes) else str(found)


@pytest.mark.parametrize(
    "key", [API_KEY, "ck:tk:plainsecret", "c%k:t k:s/+&=~x", "Cons:Tok:" + "é" * 3]
)
def test_the_plaintext_header_is_what_requests_oauthlib_wrote(key: str) -> None:
    ck, tk, ts = key.split(":")
    theirs = OAuth1(ck, "", tk, ts, signature_method=SIGNATURE_PLAINTEXT)
    ours = PlaintextAuth(Credentials.parse(key))
    for method, body in (("GET", None), ("POST", b"--b--\r\n")):
        mine, expected = header(ours, method, body), header(theirs, method, body)
        assert NONCE.search(mine), mine
        assert NONCE.sub("N", mine) == NONCE.sub("N", expected)
    assert ts not in repr(ours) and ts not in repr(ours.__dict__.get("client", ""))


def test_maas_takes_the_header_and_refuses_a_wrong_secret(sim: Sim) -> None:
    good = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    assert good.whoami()
    ck, tk, _ = API_KEY.split(":")
    bad = MaasClient(sim.url, f"{ck}:{tk}:not-the-secret", sleep=lambda s: None)
    with pytest.raises(MaasAuthError):
        bad.whoami()
    good.close()
    bad.close()


def pool_of(client: MaasClient) -> Any:
    adapter: Any = client.session.get_adapter(client.root)
    return adapter.get_connection_with_tls_context(
        requests.Request("GET", client.root).prepare(), verify=client.session.verify
    )


def test_clients_of_one_process_reuse_its_connections(sim: Sim) -> None:
    first = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    first.whoami()
    pool = pool_of(first)
    made = pool.num_connections
    first.close()  # a step's execution ends: the pool stays
    second = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    assert pool_of(second) is pool
    second.whoami()
    second.version()
    assert pool.num_connections == made  # no new connection
    second.close()
    anonymous = MaasClient(sim.url, None, sleep=lambda s: None)
    assert anonymous.version()
    anonymous.close()
    assert pool.num_connections == made


def test_a_forked_process_has_pools_of_its_own(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = wire.shared_adapter()
    monkeypatch.setattr(os, "getpid", lambda: -1)
    child = wire.shared_adapter()
    assert child is not parent
    assert wire.shared_adapter() is child
    client = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    assert client.session.get_adapter(client.root) is child


def test_clients_of_other_tls_settings_do_not_share_a_pool(sim: Sim) -> None:
    checked = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    unchecked = MaasClient(sim.url, API_KEY, verify_tls=False, sleep=lambda s: None)
    https = MaasClient(sim.url.replace("http://", "https://"), API_KEY, sleep=lambda s: None)
    assert pool_of(checked) is not pool_of(https)
    assert pool_of(checked) is not pool_of(unchecked)  # urllib3 keys its pools by both
    for c in (checked, unchecked, https):
        c.close()


def test_the_environments_proxy_is_used(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    proxied = MaasClient(sim.url, API_KEY, read_attempts=1, sleep=lambda s: None)
    assert proxied.session.proxies.get("http") == "http://127.0.0.1:9"
    with pytest.raises(MaasTransient):
        proxied.whoami()  # sent to the (absent) proxy, not to the simulator
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    direct = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    assert direct.whoami()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    bundled = MaasClient(sim.url, API_KEY, sleep=lambda s: None)
    assert bundled.session.verify == "/etc/ssl/certs/ca-certificates.crt"
    unverified = MaasClient(sim.url, API_KEY, verify_tls=False, sleep=lambda s: None)
    assert unverified.session.verify is False


def seen_without_nonce(seen: Any) -> tuple[str, str, dict[str, str], bytes]:
    headers = {k: NONCE.sub("N", v) for k, v in seen.headers.items()}
    return seen.method, seen.path, headers, seen.body


def test_the_direct_path_sends_what_session_request_sent(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request of a keyed client goes straight to urllib3 (maas_client/transport.py);
    MAAS receives the same method, URL, headers and body as through ``Session.request``."""
    monkeypatch.setattr(random, "choices", lambda chars, k: ["a"] * k)  # one boundary
    direct = MaasClient(recorder.url + "/MAAS/", API_KEY, sleep=lambda s: None)
    assert direct._direct is not None
    through_requests = MaasClient(recorder.url + "/MAAS/", API_KEY, sleep=lambda s: None)
    through_requests._direct = None
    calls: list[dict[str, Any]] = [
        {"operation": "read", "method": "GET", "path": "machines/"},
        {
            "operation": "list",
            "method": "GET",
            "path": "machines/",
            "op": "list",
            "query": [("hostname", "a b&c/é+~"), ("id", "x1"), ("id", "y 2")],
        },
        {
            "operation": "deploy",
            "method": "POST",
            "path": "machines/abc123/",
            "op": "deploy",
            "form": [("user_data", "#cloud-config\nx: é"), ("distro_series", "jammy")],
        },
        {"operation": "delete", "method": "DELETE", "path": "machines/abc123/"},
        {"operation": "odd", "method": "GET", "path": "machines/a b|é/"},  # requoted
        {"operation": "update", "method": "PUT", "path": "machines/abc123/", "form": []},
    ]
    for call in calls:
        for client in (direct, through_requests):
            client._send(**call)
    seen = [seen_without_nonce(s) for s in recorder.seen]
    assert len(seen) == 2 * len(calls)
    for ours, theirs in zip(seen[0::2], seen[1::2], strict=True):
        assert ours == theirs
    assert seen[2][1] == (
        "/MAAS/api/2.0/machines/?op=list&hostname=a+b%26c%2F%C3%A9%2B~&id=x1&id=y+2"
    )
    direct.close()
    through_requests.close()


def test_a_body_cut_short_is_transient(recorder: Recorder) -> None:
    def cut() -> Any:
        yield b'{"username": "adm'
        raise RuntimeError("the server dies mid-answer")

    recorder.answer = lambda method, path: RecordedAnswer(body=cut)
    client = MaasClient(recorder.url + "/MAAS/", API_KEY, read_attempts=1, sleep=lambda s: None)
    assert client._direct is not None
    with pytest.raises(MaasTransient) as err:
        client.whoami()
    assert "ChunkedEncodingError" in err.value.message


@pytest.mark.parametrize(
    ("raised", "reading", "expected"),
    [
        (u3.ProtocolError("gone"), False, rex.ConnectionError),
        (OSError("reset"), False, rex.ConnectionError),
        (u3.MaxRetryError(NO_POOL, "/", u3.ConnectTimeoutError("slow")), False, rex.ConnectTimeout),
        (
            u3.MaxRetryError(NO_POOL, "/", u3.NewConnectionError(NO_POOL, "no")),
            False,
            rex.ConnectionError,
        ),
        (u3.MaxRetryError(NO_POOL, "/", u3.SSLError("bad")), False, rex.SSLError),
        (u3.MaxRetryError(NO_POOL, "/", u3.ProxyError("p", OSError())), False, rex.ProxyError),
        (u3.MaxRetryError(NO_POOL, "/", u3.ResponseError("r")), False, rex.RetryError),
        (u3.ReadTimeoutError(NO_POOL, "/", "slow"), False, rex.ReadTimeout),
        (u3.ClosedPoolError(NO_POOL, "closed"), False, rex.ConnectionError),
        (u3.ProtocolError("cut"), True, rex.ChunkedEncodingError),
        (u3.DecodeError("gzip"), True, rex.ContentDecodingError),
        (u3.ReadTimeoutError(NO_POOL, "/", "slow"), True, rex.ConnectionError),
        (u3.SSLError("bad"), True, rex.SSLError),
    ],
)
def test_urllib3_errors_are_what_requests_raised(
    raised: Exception, reading: bool, expected: type[Exception]
) -> None:
    assert type(as_requests_error(raised, reading=reading)) is expected


def test_a_connection_refused_is_not_applied_and_a_timeout_may_be(recorder: Recorder) -> None:
    refused = MaasClient("http://127.0.0.1:9/MAAS/", API_KEY, read_attempts=1, connect_timeout=1)
    assert refused._direct is not None
    with pytest.raises(MaasTransient) as err:
        refused.deploy("abc123", distro_series="jammy")
    assert err.value.maybe_applied is False
    recorder.answer = lambda method, path: RecordedAnswer(delay=1.0)
    slow = MaasClient(recorder.url + "/MAAS/", API_KEY, read_timeout=0.2, read_attempts=1)
    with pytest.raises(MaasTransient) as timed_out:
        slow.deploy("abc123", distro_series="jammy")
    assert timed_out.value.maybe_applied is True
    assert "ReadTimeout" in timed_out.value.message

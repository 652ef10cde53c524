"""Outbound calls have limits (docs/security.md, T9): MAAS calls never follow a redirect, read
at most a capped body within an overall deadline; the fetchability check does the same; the
probe keeps a short, sanitised excerpt of what a server said; link-local and cloud metadata
addresses are refused as targets unless the deployment allows them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from maas_client.client import MaasClient
from maas_client.errors import MaasError
from maas_domain.models import MaasSite
from maas_domain.site_client import client_for_site
from tests.factories import make_profile, make_site
from tests.support.maas import API_KEY
from tests.support.recorder import Answer, Recorder, maas_like
from tests.support.tokens import bearer_token

TOKEN_SECRET = API_KEY.split(":")[2]


@pytest.fixture
def cp_api(admin_user: Any) -> APIClient:
    """The control plane's admin API (this directory's ``api`` fixture is MAAS's)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer_token(admin_user)}")
    return client


@pytest.fixture
def target() -> Iterator[Recorder]:
    """Where a redirect points: it must never be asked anything."""
    rec = Recorder()
    yield rec
    rec.stop()


def redirecting(to: str) -> Recorder:
    return Recorder(
        lambda method, path: Answer(status=302, body=b"", headers={"Location": to + path})
    )


def test_maas_calls_do_not_follow_redirects(target: Recorder) -> None:
    maas = redirecting(target.url)
    try:
        client = MaasClient(maas.url + "/MAAS/", API_KEY, read_attempts=1)
        with pytest.raises(MaasError, match="redirect"):
            client.whoami()
        with pytest.raises(MaasError, match="redirect"):
            client.create_machine(
                hostname="n1", mac_addresses=[], power_parameters={"power_pass": "Bmc-9"}
            )
        client.close()
    finally:
        maas.stop()
    assert target.seen == []


def test_a_maas_answer_larger_than_the_cap_is_refused_early() -> None:
    served = {"bytes": 0}

    def endless() -> Iterator[bytes]:
        chunk = b"[" + b"0," * 32767
        for _ in range(1000):  # 64 MB if nobody stops reading
            served["bytes"] += len(chunk)
            yield chunk

    maas = Recorder(lambda method, path: Answer(body=endless))
    try:
        client = MaasClient(maas.url + "/MAAS/", API_KEY, read_attempts=1, max_body=1 << 20)
        with pytest.raises(MaasError, match="larger than"):
            client.list_machines()
        client.close()
    finally:
        maas.stop()
    assert served["bytes"] < 16 << 20


def test_a_maas_answer_that_dribbles_is_cut_at_the_overall_deadline() -> None:
    sent = {"chunks": 0}

    def dribble() -> Iterator[bytes]:
        yield b"["
        for _ in range(40):
            time.sleep(0.25)  # each read is well inside the read timeout
            sent["chunks"] += 1
            yield b" "
        yield b"]"

    maas = Recorder(lambda method, path: Answer(body=dribble))
    try:
        client = MaasClient(maas.url + "/MAAS/", API_KEY, read_attempts=1, deadline=1.5)
        with pytest.raises(MaasError, match="deadline"):
            client.subnets()
        # cut while the answer was still dribbling: before the first half of its 40 chunks
        # (counted by the server, so a busy machine cannot fail this the way a clock would)
        assert sent["chunks"] < 20
        client.close()
    finally:
        maas.stop()


@pytest.mark.parametrize("address", ["169.254.169.254", "[fe80::1]", "[fd00:ec2::254]"])
def test_metadata_addresses_are_refused_as_maas_targets(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from urllib3.util import connection

    attempts: list[Any] = []
    connect = connection.create_connection

    def recorded(target: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(target)
        return connect(target, *args, **kwargs)

    monkeypatch.setattr(connection, "create_connection", recorded)
    site = MaasSite(name="meta", maas_url=f"http://{address}/MAAS/")  # as the product builds it
    client = client_for_site(site, api_key=API_KEY, read_attempts=1, connect_timeout=1)
    with pytest.raises(MaasError, match="metadata"):
        client.version()
    assert attempts == []  # refused before any connection attempt
    client.close()


def test_every_product_client_is_built_by_the_site_client_module() -> None:
    """The MAAS client package knows no address rules of its own (it imports nothing of the
    project): the product's clients get them from maas_domain/site_client.py, so nothing else
    may construct one."""
    root = Path(__file__).resolve().parents[2]
    product = ["maas_domain", "workflows", "onboarding", "decommission", "reconciliation"]
    builders = sorted(
        str(path.relative_to(root))
        for package in product
        for path in (root / package).rglob("*.py")
        if "MaasClient(" in path.read_text()
    )
    assert builders == ["maas_domain/site_client.py"]


@pytest.mark.django_db
def test_a_site_on_a_metadata_address_is_refused_unless_allowed(
    cp_api: APIClient, settings: Any
) -> None:
    api = cp_api
    body = {"name": "meta", "maas_url": "http://169.254.169.254/MAAS/"}
    response = api.post("/api/v1/admin/maas-sites", body, format="json")
    assert response.status_code == 400, response.json()
    assert "maas_url" in response.json()["fields"]
    assert not MaasSite.objects.exists()
    settings.ALLOW_LINK_LOCAL_TARGETS = True
    assert api.post("/api/v1/admin/maas-sites", body, format="json").status_code == 201


def test_the_fetchability_check_does_not_follow_redirects(target: Recorder) -> None:
    from onboarding.fetchcheck import fetch_problem

    start = redirecting(target.url)
    try:
        problem = fetch_problem(start.url + "/bundle.tgz")
    finally:
        start.stop()
    assert "redirect" in problem
    assert target.seen == []


def test_the_fetchability_check_reads_a_capped_prefix_only() -> None:
    from onboarding.fetchcheck import fetch_problem

    served = {"bytes": 0}

    def endless() -> Iterator[bytes]:
        for _ in range(4000):
            served["bytes"] += 1 << 16
            yield b"x" * (1 << 16)

    def answer(method: str, path: str) -> Answer:
        if method == "HEAD":
            return Answer(status=405, body=b"")
        return Answer(body=endless, headers={"Content-Type": "application/octet-stream"})

    server = Recorder(answer)
    try:
        assert fetch_problem(server.url + "/bundle.tgz") == ""
    finally:
        server.stop()
    assert served["bytes"] < 16 << 20


@pytest.mark.django_db
def test_the_probe_keeps_a_short_sanitised_excerpt(cp_api: APIClient) -> None:
    api = cp_api
    noise = "\x1b[31m<html>" + "\n".join(f"line {i} \x00 {TOKEN_SECRET}" for i in range(400))

    def answer(method: str, path: str) -> Answer:
        if "whoami" in path:
            return Answer(status=401, body=noise.encode(), headers={"Content-Type": "text/html"})
        return maas_like(method, path)

    maas = Recorder(answer)
    try:
        site = make_site(maas_url=maas.url + "/MAAS/")
        make_profile(site)
        api.post(
            f"/api/v1/admin/maas-sites/{site.pk}/credentials",
            {"maas_api_key": API_KEY},
            format="json",
        )
        result = api.post(f"/api/v1/admin/maas-sites/{site.pk}/probe").json()
    finally:
        maas.stop()
    auth = next(c for c in result["checks"] if c["name"] == "authentication")
    assert not auth["ok"]
    assert len(auth["detail"]) <= 200, auth["detail"]
    assert all(ch.isprintable() for ch in auth["detail"]), auth["detail"]
    site.refresh_from_db()
    stored = str(site.probe_result)
    assert "\x1b" not in stored and "\x00" not in stored


def test_a_batch_of_preflights_does_not_throttle_itself_on_the_node_routes(
    live_server: Any, settings: Any
) -> None:
    """Every preflight checks the control plane's own node routes from the worker's address;
    under the per-address limit a batch must not get 429s from itself (docs/security.md, T6)."""
    from onboarding.fetchcheck import fetch_problem, forget

    settings.NODE_REQUESTS_PER_MINUTE = 3
    health = f"{live_server.url}/api/v1/node/health"
    agent = f"{live_server.url}/api/v1/node/agent/{settings.NODE_AGENT_VERSION}/bootstrap.sh"
    assert [fetch_problem(url) for _ in range(50) for url in (health, agent)] == [""] * 100
    # the limit is real (2 of 3 requests used above) and a refusal is not remembered
    forget()
    assert [fetch_problem(health) for _ in range(3)] == ["", "", ""]  # the 3rd request, kept
    forget()
    assert [fetch_problem(health) for _ in range(2)] == ["HTTP 429", "HTTP 429"]

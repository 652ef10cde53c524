"""The fuzzing gate: schemathesis against the OpenAPI document a live server serves.

Every operation gets at least ``FUZZ_EXAMPLES`` (default 100) generated requests (valid and
invalid per the schema), half of them aimed at rows that exist (a seeded site, profile, SKU,
node, allocation, onboarding, decommission, batch and drift record). Any 5xx, any answer whose
status, content type or body the document does not describe, fails the gate.

Each run draws a fresh seed (``scripts/fuzz`` and ``scripts/check`` draw it and print it before
and after the run, passing or not; the failure message carries it too); replay a run with
``FUZZ_SEED=<seed>``. ``make check`` runs the gate on PostgreSQL and again on SQLite (the
embedded default) at 25 examples per operation (``scripts/check``: a fresh seed every run, so
successive runs cover new ground); ``make fuzz`` runs 300 examples per operation on both.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import redis
import requests
import schemathesis
from django.db import connection
from django.utils import timezone
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from maas_domain.models import Allocation, ApiToken
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.tokens import api_token_create
from onboarding.models import OnboardingBatch
from reconciliation.models import DriftRecord
from tests.factories import make_node, make_onboarding, make_profile, make_site, make_sku
from tests.support.flows import wait_until
from tests.support.maas import API_KEY, Sim, make_sim
from tests.support.openapi import openapi_document

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def no_server_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """Any 5xx fails the gate, but for the one answer the document gives when a site's region
    has no live worker: 503 with ``dependency: region`` (docs/api.md). Nothing here serves a
    region, and a generated PATCH may move the seeded site into one of its own; the probe then
    answers that 503, as it should."""
    if response.status_code == 503:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("dependency") == "region":
            return None
    return not_a_server_error(ctx, response, case)


CHECKS = [
    no_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SEED = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(2**32))
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 100)
FUZZ_TOKEN_ID = 987_654_321
DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"


@pytest.fixture
def fuzz_sim() -> Iterator[Sim]:
    sim = make_sim()
    yield sim
    sim.server.stop()


@pytest.fixture
def seeded(fuzz_sim: Sim, admin_user: Any, settings: Any) -> dict[str, int]:
    """Rows the generated requests can hit (their ids), on a site whose MAAS is the simulator."""
    settings.MAAS_PROBE_TIMEOUT = 1.0  # a generated site's MAAS URL leads nowhere: fail fast
    # thousands of requests in two minutes: the per-token limits would answer most with 429
    settings.API_MUTATIONS_PER_MINUTE = settings.NODE_REQUESTS_PER_MINUTE = 10**6
    site = make_site(maas_url=fuzz_sim.url, health="healthy", last_probe_at=timezone.now())
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
    profile = make_profile(site)
    sku = make_sku()
    sid = fuzz_sim.add(hostname="fz-node", status="deployed")
    node = make_node(site, sku=sku, hostname="fz-node", state="active", maas_system_id=sid)
    allocation = Allocation.objects.create(node=node, holder="tenant")
    onboarding = make_onboarding(site, profile=profile, sku=sku, node=node, hostname="fz-node")
    batch = OnboardingBatch.objects.create(
        site=site, profile=profile, sku=sku, size=0, created_by="t", correlation_id="t"
    )
    from decommission.models import Decommission

    decommission = Decommission.objects.create(
        site=site, node=node, hostname="fz-node", mode="reimage", correlation_id="t"
    )
    drift = DriftRecord.objects.create(
        site=site, kind="status_mismatch", severity="warning", subject=f"node:{node.pk}",
        node=node, system_id=sid, hostname="fz-node", message="seeded",
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )  # fmt: skip
    return {
        "maas-sites": site.pk,
        "profiles": profile.pk,
        "roce-assignments": 0,
        "skus": sku.pk,
        "nodes": node.pk,
        "allocations": allocation.pk,
        "onboardings": onboarding.pk,
        "batches": batch.pk,
        "decommissions": decommission.pk,
        "drift": drift.pk,
        "system_id": sid,
    }


def existing_ids(path: str, seeded: dict[str, Any]) -> dict[str, Any]:
    """Path parameters pointing at seeded rows: ``{id}`` belongs to the segment before it."""
    out: dict[str, Any] = {}
    segments = [s for s in path.split("/") if s]
    for i, segment in enumerate(segments):
        name = segment.strip("{}")
        if segment == name:
            continue
        if name == "site_pk":
            out[name] = seeded["maas-sites"]
        elif name in ("node_pk", "node_id"):
            out[name] = seeded["nodes"]
        elif name == "system_id":
            out[name] = seeded["system_id"]
        elif name == "id" and segments[i - 1] in seeded:
            out[name] = seeded[segments[i - 1]]
    return out


@pytest.fixture
def api_schema(live_server: Any, admin_user: Any, settings: Any) -> Any:
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # no worker: drop what piles up
    made, token = api_token_create(actor=None, user=admin_user, name="fuzz", scope="admin")
    # POST /tokens/{id}/revoke is fuzzed too: keep our own token's id out of reach
    ApiToken.objects.filter(pk=made.pk).update(id=FUZZ_TOKEN_ID)
    auth = {"Authorization": f"Bearer {token}"}
    # The document once the server answers (a health check at a time, as long as it takes),
    # then fetched with room for a loaded machine: schemathesis's own fetch gave up after 10 s.
    wait_until(lambda: _answers(f"{live_server.url}/health/live"), timeout=300,
               what="the live server")  # fmt: skip
    document = requests.get(
        f"{live_server.url}/api/v1/schema/?format=json", headers=auth, timeout=300
    )
    document.raise_for_status()
    schema = schemathesis.openapi.from_dict(document.json())
    schema.config.update(base_url=live_server.url, headers=auth)
    return schema


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=30).status_code == 200
    except requests.RequestException:
        return False


def cases(operation: Any, seeded: dict[str, Any]) -> Any:
    """Valid and invalid requests, to random ids and to the seeded rows."""
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    strategies = [operation.as_strategy(mode) for mode in modes]
    fixed = existing_ids(operation.path, seeded)
    if fixed and "verb" not in fixed:
        strategies += [operation.as_strategy(mode, path_parameters=fixed) for mode in modes]
    return st.one_of(*strategies)


def fuzz(operation: Any, seeded: dict[str, Any], session: requests.Session) -> int:
    """Run one operation's examples; the number of requests sent (raises on a failure)."""
    sent = 0

    @hypothesis.seed(SEED)
    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
    )
    @hypothesis.given(case=cases(operation, seeded))
    def run(case: Any) -> None:
        nonlocal sent
        sent += 1
        case.call_and_validate(session=session, checks=CHECKS)

    run()
    return sent


def test_no_5xx_and_every_answer_matches_the_document(
    api_schema: Any, seeded: dict[str, Any]
) -> None:
    only = os.environ.get("FUZZ_ONLY", "")  # e.g. FUZZ_ONLY=/skus while fixing what it finds
    operations = [r.ok() for r in api_schema.get_all_operations() if only in r.ok().path]
    assert len(operations) >= (1 if only else 50)
    database = connection.vendor
    print(f"fuzz seed {SEED} on {database} (replay: FUZZ_SEED={SEED})")  # noqa: T201
    session = requests.Session()  # one connection for every request
    quiet = logging.getLogger("django.request")  # thousands of expected 4xx; a 5xx still logs
    level, quiet.level = quiet.level, logging.ERROR
    failures: list[str] = []
    sent: dict[str, tuple[int, float]] = {}
    try:
        for operation in operations:
            name = f"{operation.method.upper()} {operation.path}"
            started, n = time.monotonic(), 0
            try:
                n = fuzz(operation, seeded, session)
            except (Exception, BaseExceptionGroup) as exc:  # every failing operation is reported
                failures.append(f"{name}: {exc}")
            sent[name] = (n, time.monotonic() - started)
    finally:
        quiet.setLevel(level)
    slowest = sorted(sent.items(), key=lambda item: -item[1][1])[:5]
    print(f"{sum(n for n, _ in sent.values())} requests; slowest: {slowest}")  # noqa: T201
    assert not failures, f"seed {SEED} on {database}:\n\n" + "\n\n".join(failures)
    assert ApiToken.objects.get(pk=FUZZ_TOKEN_ID).revoked_at is None  # every request was ours
    if only:
        return
    documented = {
        f"{method.upper()} {path}": op
        for path, item in openapi_document()["paths"].items()
        for method, op in item.items()
    }
    assert set(sent) == set(documented)
    for name, (n, _) in sent.items():  # an operation that takes no input has one request to make
        op = documented[name]
        takes_input = op.get("parameters") or op.get("requestBody") or op.get("security") != [{}]
        assert n >= EXAMPLES or (not takes_input and n == 1), (name, n)

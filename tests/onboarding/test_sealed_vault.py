"""Drill: the real secrets server (OpenBao) is sealed in the middle of a batch of 50 onboardings
and unsealed later. Workflows wait (retry) and finish; nothing is lost or duplicated in MAAS;
while sealed, /health/ready and the API answer 503 naming the secrets backend."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from maas_domain.models import MaasSite, Node
from maas_domain.secrets import get_backend
from maas_simulator.node import NodeSide
from onboarding.batches import onboarding_start_batch
from onboarding.models import Onboarding, OnboardingEvent
from tests.support.flows import Flow, wait_until
from tests.support.openbao import ALL_OF_SECRET, OpenBao

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def vault_secrets(unsealed: OpenBao, settings: Any) -> Iterator[OpenBao]:
    """Secrets go to the real server through AppRole, as in production. Listed before ``flow``,
    so the site's credentials are written there too."""
    approle = unsealed.approle(ALL_OF_SECRET)
    settings.VAULT = {
        **settings.VAULT,
        "ADDR": unsealed.url,
        "TOKEN": None,
        "ROLE_ID": approle.role_id,
        "SECRET_ID": approle.secret_id,
        "PATH_PREFIX": "drill-" + secrets.token_hex(4),
        "TIMEOUT": 5,
    }
    settings.SECRETS_BACKEND = "vault"
    get_backend.cache_clear()
    yield unsealed
    get_backend.cache_clear()


def test_batch_of_50_waits_through_a_sealed_secrets_server(
    vault_secrets: OpenBao, flow: Flow, node_side: NodeSide, live_server: Any, api: Any
) -> None:
    bao = vault_secrets
    assert get_backend().name == "vault"
    rows = []
    for i in range(50):
        flow.sim.add(hostname=f"s{i:03d}", status="new", power_address=f"10.77.0.{i + 1}")
        rows.append({"hostname": f"s{i:03d}", "ipmi_ip": f"10.77.0.{i + 1}"})
    batch = onboarding_start_batch(
        actor=flow.admin,
        site_id=flow.site.pk,
        profile_id=flow.profile.pk,
        sku_id=flow.sku.pk,
        rows=rows,
    )
    onboardings = Onboarding.objects.filter(batch=batch)
    wait_until(
        lambda: onboardings.exclude(stage="preflight").count() >= 10,
        what="ten onboardings past preflight",
    )
    bao.seal()
    sealed_at_stage = Counter(onboardings.values_list("stage", flat=True))

    # while sealed: readiness and the API name the secrets backend
    ready = requests.get(f"{live_server.url}/health/ready", timeout=10)
    assert ready.status_code == 503
    assert ready.json()["failed"] == ["secrets"]
    assert ready.json()["checks"]["secrets"]["detail"] == "SecretsUnavailable"
    other = MaasSite.objects.create(name="other-site", maas_url=flow.sim.url)
    refused = api.post(
        f"/api/v1/admin/maas-sites/{other.pk}/credentials",
        {"ipmi": {"username": "maas", "password": "never-stored"}},
        format="json",
    )
    assert refused.status_code == 503
    body = refused.json()
    assert (body["error"], body["dependency"]) == ("unavailable", "secrets")
    assert "sealed" in body["detail"]
    assert "never-stored" not in refused.content.decode()
    assert not other.credentials.exists()

    # workflows that needed a secret wait (retry), none fails
    def waiting_on_secrets() -> int:
        return (
            OnboardingEvent.objects.filter(
                onboarding__batch=batch,
                kind="retry.decision",
                data__classification="secrets_unavailable",
            )
            .values("onboarding")
            .distinct()
            .count()
        )

    wait_until(lambda: waiting_on_secrets() >= 4, timeout=30, what="workflows waiting on secrets")
    assert not onboardings.filter(state="failed").exists()
    assert onboardings.filter(state="succeeded").count() < 50, sealed_at_stage

    bao.unseal()
    assert requests.get(f"{live_server.url}/health/ready", timeout=10).status_code == 200
    wait_until(
        lambda: not onboardings.filter(state__in=("pending", "running", "waiting")).exists(),
        timeout=150,
        what="the batch to finish after the unseal",
    )
    states = Counter(onboardings.values_list("state", flat=True))
    assert states == {"succeeded": 50}, [
        (wf.hostname, wf.state, wf.failure_class, wf.reason)
        for wf in onboardings.exclude(state="succeeded")
    ]
    assert Node.objects.filter(state="active").count() == 50
    # nothing lost or duplicated: one machine per onboarding, each changed exactly once per stage
    flows = list(onboardings)
    assert len({wf.maas_system_id for wf in flows}) == 50
    for wf in flows:
        assert flow.sim.mutations(wf.maas_system_id) == [
            "machine.commission",
            "machine.set_storage_layout",
            "machine.deploy",
        ], wf.hostname
    assert [c["status"] for c in node_side.calls].count(200) == 50

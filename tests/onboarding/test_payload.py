"""The first-boot payload: rendered from templates only, site bundle before node-agent bootstrap."""

from __future__ import annotations

import pytest
import yaml
from django.utils import timezone

from maas_domain.policy import resolve_policy
from maas_domain.simulator.node import agent_config
from onboarding import payload
from tests.factories import make_onboarding, make_site
from tests.support.flows import CA_PEM

pytestmark = pytest.mark.django_db
DIGEST = "sha256:" + "ab" * 32


def test_payload_orders_bundle_before_agent_and_carries_attempt_tokens(settings) -> None:
    settings.NODE_API_URL = "https://cp.example.test"
    site = make_site(ca_bundle_pem=CA_PEM, health="healthy", last_probe_at=timezone.now())
    wf = make_onboarding(site, hostname="c07u31")
    policy = resolve_policy(
        {
            "bootstrap_bundle_ref": "https://bundles.test/site.tgz",
            "bootstrap_bundle_version": "2.3.0",
            "bootstrap_bundle_digest": DIGEST,
        }
    )
    tokens, fields = payload.mint_tokens(wf.pk, wf.attempt)
    for key, value in fields.items():
        setattr(wf, key, value)
    text = payload.render(wf, policy, tokens)
    cloud = yaml.safe_load(text)
    assert text.startswith(b"#cloud-config")
    commands = [c[2] for c in cloud["runcmd"]]
    assert "bundles.test/site.tgz" in commands[0] and "ab" * 32 in commands[0]
    assert "site bootstrap bundle 2.3.0 failed" in commands[0]
    assert f"node-agent bootstrap {settings.NODE_AGENT_VERSION} failed" in commands[1]
    config = agent_config(text)
    assert config is not None
    assert config["enroll_url"] == "https://cp.example.test/api/v1/node/enroll"
    assert config["enrollment_token"] == tokens.enrollment
    assert (config["onboarding_id"], config["attempt"], config["hostname"]) == (wf.pk, 1, "c07u31")
    ca = next(f for f in cloud["write_files"] if f["path"] == "/etc/gpuaas/ca.pem")
    assert ca["content"].strip() == CA_PEM.strip()
    # only hashes on the row; the values come back from the secrets backend
    assert tokens.enrollment not in (wf.enrollment_token_hash, wf.bootstrap_token_hash)
    assert payload.read_tokens(wf) == tokens


def test_tokens_of_another_attempt_are_not_read_back() -> None:
    site = make_site()
    wf = make_onboarding(site)
    tokens, fields = payload.mint_tokens(wf.pk, 1)
    for key, value in fields.items():
        setattr(wf, key, value)
    wf.attempt = 2
    assert payload.read_tokens(wf) is None
    assert "…" in repr(tokens) and tokens.enrollment not in repr(tokens)

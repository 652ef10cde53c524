"""The first-boot payload: rendered from templates only, site bundle before node-agent bootstrap."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from maas_domain.policy import resolve_policy
from maas_simulator.node import agent_config
from onboarding import payload
from tests.factories import make_onboarding, make_site
from tests.support.flows import CA_PEM

pytestmark = pytest.mark.django_db
DIGEST = "sha256:" + "ab" * 32


def test_payload_orders_bundle_before_agent_and_carries_attempt_tokens(settings) -> None:
    settings.NODE_API_URL = "https://cp.example.test"
    settings.PAYLOAD_ALLOWED_HOSTS = ["bundles.test"]
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
    # two fixed commands, site bundle first; the values are files the scripts read
    assert cloud["runcmd"] == [
        ["/bin/sh", "/usr/local/lib/gpuaas/site-bundle.sh"],
        ["/bin/sh", "/usr/local/lib/gpuaas/node-agent.sh"],
    ]
    files = {f["path"]: f["content"] for f in cloud["write_files"]}
    assert files["/etc/gpuaas/site-bundle/url"] == "https://bundles.test/site.tgz\n"
    assert files["/etc/gpuaas/site-bundle/sha256"] == "ab" * 32 + "\n"
    assert files["/etc/gpuaas/site-bundle/version"] == "2.3.0\n"
    assert files["/etc/gpuaas/agent-bootstrap/version"] == settings.NODE_AGENT_VERSION + "\n"
    assert files["/etc/gpuaas/agent-bootstrap/url"] == (
        f"https://cp.example.test/api/v1/node/agent/{settings.NODE_AGENT_VERSION}/bootstrap.sh\n"
    )
    assert "site bootstrap bundle $version failed" in files["/usr/local/lib/gpuaas/site-bundle.sh"]
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


def test_the_node_reports_bundle_and_agent_apart_with_its_bootstrap_token(settings) -> None:
    settings.NODE_API_URL = "https://cp.example.test"
    settings.PAYLOAD_ALLOWED_HOSTS = ["bundles.test"]
    site = make_site(ca_bundle_pem=CA_PEM)
    wf = make_onboarding(site, hostname="c07u32")
    policy = resolve_policy(
        {
            "bootstrap_bundle_ref": "https://bundles.test/site.tgz",
            "bootstrap_bundle_version": "2.3.0",
            "bootstrap_bundle_digest": DIGEST,
        }
    )
    tokens, _ = payload.mint_tokens(wf.pk, wf.attempt)
    text = payload.render(wf, policy, tokens)
    cloud = yaml.safe_load(text)
    config = agent_config(text)
    assert config is not None
    assert config["report_url"] == "https://cp.example.test/api/v1/node/report"
    assert config["checkin_url"] == "https://cp.example.test/api/v1/node/checkin"
    assert (config["bootstrap_token"], config["site_bundle_version"]) == (tokens.bootstrap, "2.3.0")
    files = {f["path"]: f for f in cloud["write_files"]}
    report = files["/usr/local/lib/gpuaas/report.sh"]
    assert report["permissions"] == "0755" and report["content"].startswith("#!/bin/sh\n")
    bundle = files["/usr/local/lib/gpuaas/site-bundle.sh"]["content"]
    agent = files["/usr/local/lib/gpuaas/node-agent.sh"]["content"]
    assert 'report.sh" site_bundle failed' in bundle and 'report.sh" site_bundle ok' in bundle
    # the agent bootstrap does not run after a failed bundle, and reports its own failure
    assert 'test ! -e "$R/run/gpuaas-site-bundle.failed" || exit 1' in agent
    assert 'report.sh" agent failed' in agent
    assert tokens.bootstrap not in report["content"] + bundle + agent  # read at run time


def test_report_sh_posts_a_json_body_and_refuses_other_words(tmp_path: Path) -> None:
    """The fixed script, run by a real shell against a config like the payload's: the body is
    valid JSON with the bootstrap token, hostile detail is reduced to harmless characters, and
    anything but the four fixed word pairs is refused before any request."""
    script = (Path(settings_base()) / "templates/firstboot/report.sh").read_text()
    values = tmp_path / "etc/gpuaas/node"
    values.mkdir(parents=True)
    for name, value in {
        "onboarding_id": "7",
        "attempt": "2",
        "hostname": "c07u31",
        "bootstrap_token": "abc-_123",
        "report_url": "http://cp.test/api/v1/node/report",
    }.items():
        (values / name).write_text(value + "\n")
    body = tmp_path / "body"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "curl").write_text(
        f'#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -d ] && printf %s "$2" > {body}; shift; done\n'
    )
    (fake / "curl").chmod(0o755)
    runnable = tmp_path / "report.sh"
    runnable.write_text(script)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "GPUAAS_ROOT": str(tmp_path)}
    hostile = 'run.sh "exit" $(reboot) `id` \\ \n next'
    done = subprocess.run(
        ["/bin/sh", str(runnable), "site_bundle", "failed", hostile], env=env, check=False
    )
    assert done.returncode == 0
    sent = json.loads(body.read_text())
    assert sent["bootstrap_token"] == "abc-_123" and (sent["onboarding_id"], sent["attempt"]) == (
        7,
        2,
    )
    assert (sent["phase"], sent["status"]) == ("site_bundle", "failed")
    assert "$" not in sent["detail"] and "`" not in sent["detail"] and '"' not in sent["detail"]
    body.unlink()
    refused = subprocess.run(["/bin/sh", str(runnable), "agent; id", "ok"], env=env, check=False)
    assert refused.returncode == 2 and not body.exists()


def settings_base() -> str:
    from django.conf import settings

    return str(settings.BASE_DIR)


def test_an_execution_renders_the_same_payload_once(settings, monkeypatch) -> None:
    """The payload stage proves the payload renders and the chained deploy stage sends it:
    with the execution's memo the second is the first's bytes; other values render afresh."""
    from onboarding import cloudconfig

    settings.NODE_API_URL = "https://cp.example.test"
    site = make_site(ca_bundle_pem=CA_PEM, health="healthy", last_probe_at=timezone.now())
    wf = make_onboarding(site, hostname="c07u32")
    policy = resolve_policy({})
    tokens, fields = payload.mint_tokens(wf.pk, wf.attempt)
    for key, value in fields.items():
        setattr(wf, key, value)
    rendered: list[object] = []
    real = cloudconfig.render

    def counting(fb, **rules):
        rendered.append(fb)
        return real(fb, **rules)

    monkeypatch.setattr(cloudconfig, "render", counting)
    memo: dict[str, object] = {}
    first = payload.render(wf, policy, tokens, memo=memo)
    read = payload.read_tokens(wf)  # what the deploy stage reads
    assert read is not None
    again = payload.render(wf, policy, read, memo=memo)
    assert again == first and len(rendered) == 1
    assert payload.render(wf, policy, tokens) == first and len(rendered) == 2  # no memo
    other, _ = payload.mint_tokens(wf.pk, wf.attempt)
    fresh = payload.render(wf, policy, other, memo=memo)
    assert len(rendered) == 3 and other.bootstrap in fresh.decode() and fresh != first
    wf.hostname = "c07u33"
    renamed = payload.render(wf, policy, other, memo=memo)
    assert len(rendered) == 4 and b"c07u33" in renamed

"""The real first-boot scripts (templates/firstboot/), installed from a rendered payload into a
scratch root and run by a real shell against the control plane's node routes: the node reports
its agent's start and enrolls with exactly the hostname it was given, whatever YAML would make
of it (``1001``, ``0123``, ``on``, ``null`` were sent quoted and refused when the scripts read
the agent config with sed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import yaml
from hypothesis import strategies as st

from maas_domain.validators import HOSTNAME
from onboarding import payload
from onboarding.models import Onboarding
from tests.factories import make_onboarding, make_site

pytestmark = [pytest.mark.django_db(transaction=True)]
YAML_TRAPS = ["1001", "0123", "on", "off", "null", "yes", "no", "true", "1e3", "0x1f", "007"]


def install(text: bytes, root: Path) -> None:
    """What cloud-init does with the payload's write_files, under ``root``."""
    for item in yaml.safe_load(text)["write_files"]:
        path = root / item["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(item["content"])
        path.chmod(int(item["permissions"], 8))
    (root / "run").mkdir(exist_ok=True)


def boot(wf: Onboarding, root: Path) -> subprocess.CompletedProcess[str]:
    tokens, hashes = payload.mint_tokens(wf.pk, wf.attempt)
    Onboarding.objects.filter(pk=wf.pk).update(**hashes)
    wf.refresh_from_db()
    install(payload.render(wf, wf.profile.effective_policy(), tokens), root)
    return subprocess.run(
        ["/bin/sh", str(root / "usr/local/lib/gpuaas/node-agent.sh")],
        env={"PATH": os.environ["PATH"], "GPUAAS_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def site(live_server: Any, settings: Any) -> Any:
    settings.NODE_API_URL = live_server.url
    return make_site()


def test_the_scripts_enroll_every_valid_hostname_as_given(site: Any, tmp_path: Path) -> None:
    hostnames = st.from_regex(HOSTNAME, fullmatch=True)

    @hypothesis.settings(max_examples=25, deadline=None, database=None)
    @hypothesis.given(hostname=hostnames)
    @hypothesis.example(hostname="1001")
    @hypothesis.example(hostname="0123")
    @hypothesis.example(hostname="on")
    @hypothesis.example(hostname="null")
    def run(hostname: str) -> None:
        Onboarding.objects.filter(hostname=hostname).delete()
        wf = make_onboarding(site, hostname=hostname, state="waiting", stage="enrollment")
        root = tmp_path / str(wf.pk)
        done = boot(wf, root)
        assert done.returncode == 0, done.stderr
        wf.refresh_from_db()
        assert wf.enrolled_attempt == wf.attempt, hostname
        assert wf.agent_started_at is not None, hostname
        shutil.rmtree(root)

    run()


@pytest.mark.parametrize("hostname", YAML_TRAPS)
def test_a_value_file_holds_the_value_itself(site: Any, tmp_path: Path, hostname: str) -> None:
    wf = make_onboarding(site, hostname=hostname)
    tokens, _ = payload.mint_tokens(wf.pk, wf.attempt)
    install(payload.render(wf, wf.profile.effective_policy(), tokens), tmp_path)
    assert (tmp_path / "etc/gpuaas/node/hostname").read_text() == hostname + "\n"
    assert oct((tmp_path / "etc/gpuaas/node/enrollment_token").stat().st_mode)[-3:] == "600"


def test_the_scripts_trust_the_site_ca_and_retry(site: Any, tmp_path: Path) -> None:
    """Every call to the control plane carries --retry with backoff and, when the payload wrote
    the site CA, --cacert: checked on the argv a recording curl receives."""
    from devtools.demo import demo_ca_pem

    site.ca_bundle_pem = demo_ca_pem()
    site.save()
    wf = make_onboarding(site, hostname="ca01", state="waiting", stage="enrollment")
    calls = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("curl")
    (fake / "curl").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    (fake / "curl").chmod(0o755)
    root = tmp_path / "root"
    tokens, hashes = payload.mint_tokens(wf.pk, wf.attempt)
    Onboarding.objects.filter(pk=wf.pk).update(**hashes)
    wf.refresh_from_db()
    install(payload.render(wf, wf.profile.effective_policy(), tokens), root)
    done = subprocess.run(
        ["/bin/sh", str(root / "usr/local/lib/gpuaas/node-agent.sh")],
        env={"PATH": f"{fake}:{os.environ['PATH']}", "GPUAAS_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 3  # the bootstrap script, the agent report, the enrollment
    ca = str(root / "etc/gpuaas/ca.pem")
    for line in lines:
        assert "--retry 8" in line and "--retry-connrefused" in line, line
        assert f"--cacert {ca}" in line, line


def test_a_bootstrap_script_that_is_not_the_pinned_one_never_runs(
    site: Any, tmp_path: Path
) -> None:
    """The bootstrap script runs as root and came with no digest check: whatever answered at
    the agent URL (a proxy in between, a host that took the name) ran on every node. The
    payload pins its SHA-256; here a curl in the middle appends a line to it on the way."""
    wf = make_onboarding(site, hostname="pin01", state="waiting", stage="enrollment")
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("curl")
    (fake / "curl").write_text(
        "#!/bin/sh\n"
        f'{real} "$@" || exit $?\n'
        'case "$*" in *gpuaas-bootstrap.sh*) echo \'touch "$R/run/pwned"\' >> '
        f'"{tmp_path}/root/run/gpuaas-bootstrap.sh" ;; esac\n'
    )
    (fake / "curl").chmod(0o755)
    root = tmp_path / "root"
    tokens, hashes = payload.mint_tokens(wf.pk, wf.attempt)
    Onboarding.objects.filter(pk=wf.pk).update(**hashes)
    wf.refresh_from_db()
    install(payload.render(wf, wf.profile.effective_policy(), tokens), root)
    done = subprocess.run(
        ["/bin/sh", str(root / "usr/local/lib/gpuaas/node-agent.sh")],
        env={"PATH": f"{fake}:{os.environ['PATH']}", "GPUAAS_ROOT": str(root)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert not (root / "run/pwned").exists()
    wf.refresh_from_db()
    assert wf.enrolled_attempt is None and wf.agent_started_at is None
    reported = [e.message for e in wf.events.filter(kind__startswith="node.")]
    assert any("digest" in m for m in reported), reported

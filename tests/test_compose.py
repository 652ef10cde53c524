"""docker-compose.yml sets only variables the settings read, for every service built from us."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def test_compose_variables_are_known_to_the_settings() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    ours = {name: svc for name, svc in spec["services"].items() if "build" in svc}
    assert {"api", "worker", "beat", "migrate"} <= set(ours)
    for name, service in ours.items():
        variables = set(service["environment"])
        unknown = variables - settings.KNOWN_ENV_VARS
        assert not unknown, f"{name} sets variables the settings never read: {unknown}"
        assert {"MAASCP_DATABASE_URL", "MAASCP_BROKER_URL", "MAASCP_ENV"} <= variables


def test_compose_runs_production_servers_not_runserver() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    assert spec["services"]["api"]["command"][0] == "gunicorn"
    assert spec["services"]["worker"]["command"][:4] == ["celery", "-A", "config", "worker"]
    assert spec["services"]["beat"]["command"][:4] == ["celery", "-A", "config", "beat"]
    assert {"postgres", "redis", "vault"} <= set(spec["services"])
    text = COMPOSE.read_text()
    assert "runserver" not in text


def test_compose_secrets_server_is_persistent_and_not_in_dev_mode() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    vault = spec["services"]["vault"]
    command = " ".join(vault["command"])
    assert "-dev" not in command and "-config=/openbao/config/bao.hcl" in command
    assert not any("DEV" in name for name in vault.get("environment", {}))
    assert "baodata:/openbao/file" in vault["volumes"] and "baodata" in spec["volumes"]
    assert "./deploy/openbao:/openbao/config:ro" in vault["volumes"]
    env = spec["services"]["api"]["environment"]
    assert "MAASCP_VAULT_TOKEN" not in env  # no root token: the control plane logs in by AppRole
    assert {"MAASCP_VAULT_ROLE_ID", "MAASCP_VAULT_SECRET_ID"} <= set(env)
    for name in ("api", "worker", "beat"):
        assert spec["services"][name]["depends_on"]["vault"] == {"condition": "service_healthy"}


def test_documented_secrets_server_procedure_on_the_real_server(tmp_path: Path) -> None:
    """docs/operations.md's first start with the compose file's own bao.hcl (storage path and
    port moved here): init, unseal, KV v2, the AppRole with deploy/openbao/maascp-policy.hcl; the
    control plane's whole secrets contract passes under that policy; after a restart the server
    is sealed (the backend answers 'unavailable'), and unsealing brings every secret back."""
    import subprocess
    import time

    import hvac
    import pytest
    import requests

    from maas_domain.secrets import SecretNotFound, SecretsForbidden, SecretsUnavailable
    from maas_domain.secrets.vault import VaultBackend
    from tests.support.openbao import bao_binary, free_port

    deploy = COMPOSE.parent / "deploy" / "openbao"
    port, cluster = free_port(), free_port()
    config = (deploy / "bao.hcl").read_text()
    moves = {
        "/openbao/file": str(tmp_path / "data"),
        "0.0.0.0:8200": f"127.0.0.1:{port}",
        "0.0.0.0:8201": f"127.0.0.1:{cluster}",
        "vault:8200": f"127.0.0.1:{port}",
        "vault:8201": f"127.0.0.1:{cluster}",
    }
    for old, new in moves.items():
        assert old in config, old
        config = config.replace(old, new)
    (tmp_path / "data").mkdir()
    (tmp_path / "bao.hcl").write_text(config)
    url = f"http://127.0.0.1:{port}"

    def serve() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [bao_binary(), "server", f"-config={tmp_path / 'bao.hcl'}"],
            stdout=(tmp_path / "bao.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = hvac.Client(url=url, timeout=5)
        for _ in range(200):
            try:
                client.sys.is_initialized()
                return proc
            except Exception:
                time.sleep(0.05)
        proc.kill()
        pytest.fail((tmp_path / "bao.log").read_text()[-2000:])

    def unseal(keys: list[str]) -> None:
        client = hvac.Client(url=url, timeout=30)
        for key in keys[:3]:
            client.sys.submit_unseal_key(key)
        assert not client.sys.is_sealed()
        for _ in range(200):  # active once raft has a leader again
            if requests.get(f"{url}/v1/sys/health", timeout=5).status_code == 200:
                return
            time.sleep(0.05)
        pytest.fail("unsealed but never active")

    server = serve()
    try:
        root = hvac.Client(url=url, timeout=30)  # raft elects its leader first
        assert not root.sys.is_initialized()
        init = root.sys.initialize(secret_shares=5, secret_threshold=3)
        root.token = init["root_token"]
        assert root.sys.is_sealed()
        unseal(init["keys"])
        root.sys.enable_secrets_engine("kv", path="secret", options={"version": "2"})
        root.sys.enable_auth_method("approle")
        root.sys.create_or_update_policy("maascp", (deploy / "maascp-policy.hcl").read_text())
        root.auth.approle.create_or_update_approle(
            "maascp", token_policies=["maascp"], token_ttl="1h", token_max_ttl="4h"
        )
        role_id = root.auth.approle.read_role_id("maascp")["data"]["role_id"]
        secret_id = root.auth.approle.generate_secret_id("maascp")["data"]["secret_id"]

        backend = VaultBackend(url=url, role_id=role_id, secret_id=secret_id)
        backend.check()
        assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:c"}) == 1
        assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:d"}) == 2
        assert backend.read("sites/1/maas-api-key", 1) == {"api_key": "a:b:c"}
        backend.write("onboardings/9/tokens/1", {"bootstrap": "t"})
        backend.destroy("onboardings/9/tokens/1")
        with pytest.raises(SecretNotFound):
            backend.read("onboardings/9/tokens/1")
        with pytest.raises(SecretsForbidden):  # the policy keeps it inside its prefix
            VaultBackend(url=url, role_id=role_id, secret_id=secret_id, prefix="other").write(
                "x", {"k": "v"}
            )

        server.terminate()
        server.wait(timeout=10)
        server = serve()  # a restart: persistent, and sealed
        assert hvac.Client(url=url).sys.is_sealed()
        with pytest.raises(SecretsUnavailable):
            backend.read("sites/1/maas-api-key")
        unseal(init["keys"][2:])  # any three of the five keys
        assert backend.read("sites/1/maas-api-key") == {"api_key": "a:b:d"}
    finally:
        server.kill()
        server.wait(timeout=10)


def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return spec


def test_every_service_that_keeps_running_has_a_health_check() -> None:
    """One-shots (`restart: "no"`: migrate, the sim profile's demo) end; everything else says
    whether it is healthy, so `depends_on: service_healthy` and `docker compose ps` mean it."""
    for name, service in _spec()["services"].items():
        if service.get("restart") == "no":
            continue
        check = service.get("healthcheck")
        assert check and check["test"][0] == "CMD", f"{name} has no health check"


def test_profiles_run_the_simulator_end_to_end_and_the_monitoring() -> None:
    services = _spec()["services"]
    by_profile: dict[str, set[str]] = {}
    for name, service in services.items():
        for profile in service.get("profiles", []):
            by_profile.setdefault(profile, set()).add(name)
    assert by_profile == {"sim": {"maas-sim", "sim-demo"}, "monitoring": {"prometheus", "grafana"}}
    demo = services["sim-demo"]
    assert demo["command"][:3] == ["python", "manage.py", "sim_demo"]
    assert {"api", "node-api", "worker", "beat", "maas-sim"} <= set(demo["depends_on"])
    # what the profiles mount exists in the checkout
    for service in ("maas-sim", "sim-demo", "prometheus", "grafana"):
        for volume in services[service].get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (COMPOSE.parent / source).exists(), (service, source)
    assert (
        "./docs/prometheus/alerts.yml:/etc/prometheus/rules/alerts.yml:ro"
        in (services["prometheus"]["volumes"])
    )


def test_the_file_is_valid_for_a_real_compose_implementation(tmp_path: Path) -> None:
    """`docker-compose config` (Debian's package, scripts/ensure-debian; it needs no daemon)
    parses, merges and validates the file with every profile."""
    import shutil
    import subprocess

    import pytest

    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose missing: scripts/ensure-debian could not install it")
    done = subprocess.run(
        [binary, "-f", str(COMPOSE), "--profile", "sim", "--profile", "monitoring", "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    merged = yaml.safe_load(done.stdout)
    assert merged["services"]["api"]["healthcheck"]["test"][0] == "CMD"
    assert set(merged["services"]) >= {"maas-sim", "sim-demo", "prometheus", "grafana"}


def test_prometheus_of_the_monitoring_profile_loads_the_shipped_rules(tmp_path: Path) -> None:
    """promtool checks deploy/prometheus/prometheus.yml with the paths the container mounts
    moved into the checkout: the scrape jobs parse and docs/prometheus/alerts.yml loads."""
    import shutil
    import subprocess

    import pytest

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing: scripts/ensure-debian could not install it")
    config = (COMPOSE.parent / "deploy" / "prometheus" / "prometheus.yml").read_text()
    (tmp_path / "maascp-token").write_text("mcp_example\n")
    for old, new in {
        "/etc/prometheus/rules/alerts.yml": str(COMPOSE.parent / "docs/prometheus/alerts.yml"),
        "/etc/prometheus/maascp/maascp-token": str(tmp_path / "maascp-token"),
    }.items():
        assert old in config, old
        config = config.replace(old, new)
    (tmp_path / "prometheus.yml").write_text(config)
    done = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "rules found" in done.stdout

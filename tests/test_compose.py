"""docker-compose.yml sets only variables the settings read, for every service built from us."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def make_secrets(folder: Path, names: str = "") -> Path:
    """What deploy/make-secrets makes for compose, into ``folder``."""
    import os
    import subprocess

    subprocess.run([str(COMPOSE.parent / "deploy/make-secrets"), str(folder)], check=True,
                   capture_output=True, env={**os.environ, "MAASCP_TLS_NAMES": names})  # fmt: skip
    return folder


def test_compose_variables_are_known_to_the_settings() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    ours = {name: svc for name, svc in spec["services"].items() if "build" in svc}
    assert {"api", "worker", "beat", "migrate"} <= set(ours)
    for name, service in ours.items():
        variables = set(service["environment"])
        unknown = variables - settings.KNOWN_ENV_VARS
        assert not unknown, f"{name} sets variables the settings never read: {unknown}"
        assert {"MAASCP_DATABASE_URL_FILE", "MAASCP_BROKER_URL_FILE", "MAASCP_ENV"} <= variables


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
    assert {"MAASCP_VAULT_ROLE_ID_FILE", "MAASCP_VAULT_SECRET_ID_FILE"} <= set(env)
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
    tls = make_secrets(tmp_path / "secrets")  # its certificate, as compose mounts it
    ca = str(tls / "ca.pem")
    moves = {
        "/openbao/file": str(tmp_path / "data"),
        "0.0.0.0:8200": f"127.0.0.1:{port}",
        "0.0.0.0:8201": f"127.0.0.1:{cluster}",
        "vault:8200": f"127.0.0.1:{port}",
        "vault:8201": f"127.0.0.1:{cluster}",
        "/run/secrets/vault_crt": str(tls / "vault.crt"),
        "/run/secrets/vault_key": str(tls / "vault.key"),
    }
    for old, new in moves.items():
        assert old in config, old
        config = config.replace(old, new)
    (tmp_path / "data").mkdir()
    (tmp_path / "bao.hcl").write_text(config)
    url = f"https://127.0.0.1:{port}"  # TLS, trusted through the stack's CA only

    def serve() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [bao_binary(), "server", f"-config={tmp_path / 'bao.hcl'}"],
            stdout=(tmp_path / "bao.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = hvac.Client(url=url, timeout=5, verify=ca)
        for _ in range(200):
            try:
                client.sys.is_initialized()
                return proc
            except Exception:
                time.sleep(0.05)
        proc.kill()
        pytest.fail((tmp_path / "bao.log").read_text()[-2000:])

    def unseal(keys: list[str]) -> None:
        client = hvac.Client(url=url, timeout=30, verify=ca)
        for key in keys[:3]:
            client.sys.submit_unseal_key(key)
        assert not client.sys.is_sealed()
        for _ in range(200):  # active once raft has a leader again
            if requests.get(f"{url}/v1/sys/health", timeout=5, verify=ca).status_code == 200:
                return
            time.sleep(0.05)
        pytest.fail("unsealed but never active")

    server = serve()
    try:
        root = hvac.Client(url=url, timeout=30, verify=ca)  # raft elects its leader first
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

        backend = VaultBackend(url=url, role_id=role_id, secret_id=secret_id, verify=ca)
        backend.check()
        with pytest.raises(SecretsUnavailable):  # TLS: a client without the CA gets nothing
            VaultBackend(url=url, role_id=role_id, secret_id=secret_id).check()
        assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:c"}) == 1
        assert backend.write("sites/1/maas-api-key", {"api_key": "a:b:d"}) == 2
        assert backend.read("sites/1/maas-api-key", 1) == {"api_key": "a:b:c"}
        backend.write("onboardings/9/tokens/1", {"bootstrap": "t"})
        backend.destroy("onboardings/9/tokens/1")
        with pytest.raises(SecretNotFound):
            backend.read("onboardings/9/tokens/1")
        elsewhere = VaultBackend(
            url=url, role_id=role_id, secret_id=secret_id, prefix="other", verify=ca
        )
        with pytest.raises(SecretsForbidden):  # the policy keeps it inside its prefix
            elsewhere.write("x", {"k": "v"})

        server.terminate()
        server.wait(timeout=10)
        server = serve()  # a restart: persistent, and sealed
        assert hvac.Client(url=url, verify=ca).sys.is_sealed()
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
        assert check and check["test"][0] in ("CMD", "CMD-SHELL"), f"{name} has no health check"


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
    secrets = make_secrets(tmp_path / "secrets")
    (secrets / "prometheus_token").write_text("mcp_example\n")
    for old, new in {
        "/etc/prometheus/rules/alerts.yml": str(COMPOSE.parent / "docs/prometheus/alerts.yml"),
        "/run/secrets/prometheus_token": str(secrets / "prometheus_token"),
        "/run/secrets/ca_pem": str(secrets / "ca.pem"),
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


# what compose may publish beyond this host: the two TLS proxies (everything else on loopback)
PUBLIC = {"api-proxy", "node-proxy"}


def test_compose_holds_no_secret_and_every_secret_is_a_file_made_once(tmp_path: Path) -> None:
    """It shipped a placeholder SECRET_KEY default (which passed), PostgreSQL maascp/maascp and
    Grafana change-me: no secret is in the file now, none has a default, and each is a file
    deploy/make-secrets makes, mounted only where it is read (MAASCP_<NAME>_FILE for ours)."""
    import re

    text = COMPOSE.read_text()
    for word in ("change-me", "maascp:maascp", "POSTGRES_PASSWORD:", "GF_SECURITY_ADMIN_PASSWORD:",
                 "MAASCP_SECRET_KEY:"):  # fmt: skip
        assert word not in text, word
    assert "requirepass %s" in text  # Redis's password: its secret file, never a literal
    defaults = re.findall(r"\$\{(\w+):?-", text)
    assert defaults == ["MAASCP_NODE_API_URL"], defaults  # an address, no secret
    spec = _spec()
    made = make_secrets(tmp_path / "made")
    declared = spec["secrets"]
    for name, item in declared.items():
        assert item["file"].startswith("./deploy/secrets/"), name
        assert (made / Path(item["file"]).name).exists(), f"make-secrets makes no {item['file']}"
    for service_name, service in spec["services"].items():
        mounted = set(service.get("secrets") or [])
        assert mounted <= set(declared), service_name
        for variable, value in (service.get("environment") or {}).items():
            if str(value).startswith("/run/secrets/"):
                assert value.removeprefix("/run/secrets/") in mounted, (service_name, variable)
            if re.search(r"PASSWORD|SECRET|TOKEN|KEY", variable) and "/run/secrets/" not in str(
                value
            ):
                assert variable in ("MAASCP_VAULT_MOUNT",), (service_name, variable, value)
    assert (made / "ca.key").stat().st_mode & 0o077 == 0  # the CA's key: the host's owner only
    assert (made).stat().st_mode & 0o077 == 0


def test_only_the_proxies_listen_beyond_this_host() -> None:
    """Monitoring and the simulator were published on every interface."""
    for name, service in _spec()["services"].items():
        for port in service.get("ports") or []:
            if name not in PUBLIC:
                assert str(port).startswith("127.0.0.1:"), (name, port)


def test_tls_is_wired_on_the_proxies_and_the_secrets_server() -> None:
    spec = _spec()
    services = spec["services"]
    template = (COMPOSE.parent / "deploy/nginx/nginx.conf.template").read_text()
    assert "listen 127.0.0.1:${HOP_PORT} ssl proxy_protocol;" in template
    assert "ssl_certificate ${TLS_CERT};" in template
    for proxy in PUBLIC:
        env = services[proxy]["environment"]
        assert env["TLS_CERT"].startswith("/run/secrets/") and env["TLS_KEY"].startswith(
            "/run/secrets/"
        )
        assert "https://localhost" in " ".join(services[proxy]["healthcheck"]["test"])
    app = services["api"]["environment"]
    assert app["MAASCP_VAULT_ADDR"].startswith("https://") and "MAASCP_VAULT_ALLOW_HTTP" not in app
    assert app["MAASCP_NODE_API_URL"].startswith("${MAASCP_NODE_API_URL:-https://")
    assert app["MAASCP_NODE_CA_FILE"] == app["MAASCP_VAULT_CACERT"] == "/run/secrets/ca_pem"
    assert app["MAASCP_TLS_TERMINATED"] == "true"
    bao = (COMPOSE.parent / "deploy/openbao/bao.hcl").read_text()
    assert "tls_disable" not in bao and 'tls_cert_file   = "/run/secrets/vault_crt"' in bao
    assert services["vault"]["environment"]["BAO_ADDR"].startswith("https://")


def test_the_proxies_render_the_shipped_nginx_conf_as_compose_starts_them(tmp_path: Path) -> None:
    """Each proxy's command renders deploy/nginx/nginx.conf.template with envsubst, naming the
    template's every variable (an unnamed one would stay as text, nginx's own $variables must),
    from an environment that sets each; run here as compose runs it, and `nginx -t` accepts the
    result (Debian's nginx loads the stream module the image has built in)."""
    import re
    import shutil
    import subprocess

    import pytest

    template_path = COMPOSE.parent / "deploy/nginx/nginx.conf.template"
    template = template_path.read_text()
    wanted = set(re.findall(r"\$\{(\w+)\}", template))
    services = _spec()["services"]
    if not (shutil.which("envsubst") and shutil.which("nginx")):
        pytest.skip("envsubst or nginx missing (gettext-base, nginx: scripts/ensure-debian)")
    secrets = make_secrets(tmp_path / "secrets")
    for proxy in PUBLIC:
        service = services[proxy]
        command = service["command"][-1]
        assert set(re.findall(r"\$\$(\w+)", re.search(r"envsubst '([^']*)'", command)[1])) == wanted
        env = {k: str(v) for k, v in service["environment"].items()}
        assert wanted <= set(env), wanted - set(env)
        run = tmp_path / proxy
        run.mkdir()
        env.update(RUN_DIR=str(run), LISTEN="127.0.0.1:1", HOP_PORT="2", UPSTREAM="127.0.0.1:3")
        env.update(TLS_CERT=str(secrets / f"{proxy}.crt"), TLS_KEY=str(secrets / f"{proxy}.key"))
        moves = {
            "$$": "$",
            "/etc/maascp/nginx.conf.template": str(template_path),
            "/tmp/nginx": str(run),  # noqa: S108 (compose's path, moved here)
            "exec nginx": "nginx -t",
            "-g 'daemon off;'": "-g 'load_module /usr/lib/nginx/modules/ngx_stream_module.so;'",
        }  # fmt: skip
        script = command
        for old, new in moves.items():
            script = script.replace(old, new)
        done = subprocess.run(["sh", "-c", script], env={"PATH": "/usr/sbin:/usr/bin:/bin", **env},
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        rendered = (run / "nginx.conf").read_text()
        assert not re.search(r"\$\{\w+\}", rendered) and "$binary_remote_addr" in rendered
        assert f"limit_conn maascp_tcp {env['CONN_PER_ADDRESS']};" in rendered

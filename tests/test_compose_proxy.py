"""A node's call through the shipped proxy to the node listener, with docker-compose.yml's own
values (its environment for node-api and node-proxy): in compose every node call through the
proxy was a 400, since ``MAASCP_ALLOWED_HOSTS`` did not name the host ``MAASCP_NODE_API_URL``
does, and preflight failed every onboarding. Only what names compose's other containers (the
database, Redis, OpenBao) and the folders are this machine's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from tests.support.proxy import (
    compose_environment,
    compose_secret_files,
    gunicorn,
    make_secrets,
    nginx,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which("nginx"), reason="nginx (Debian) not installed"),
]


def this_machine(env: dict[str, str], tmp_path: Path, secrets: Path) -> dict[str, str]:
    """compose's environment, its /run/secrets/ files those deploy/make-secrets made, and what
    names compose's other containers this machine's (the database: this test's; no OpenBao)."""
    db = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.skip("production mode runs on PostgreSQL only")
    files = compose_secret_files(secrets)
    here = {
        name: str(files[value.removeprefix("/run/secrets/")])
        if value.startswith("/run/secrets/")
        else value
        for name, value in env.items()
    }
    (secrets / "database_url").write_text(
        f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}\n"
    )
    (secrets / "broker_url").write_text(os.environ["MAASCP_BROKER_URL"] + "\n")
    for vault in ("MAASCP_VAULT_ADDR", "MAASCP_VAULT_CACERT", "MAASCP_VAULT_ROLE_ID_FILE",
                  "MAASCP_VAULT_SECRET_ID_FILE"):  # fmt: skip
        here.pop(vault)
    return {
        **here,
        "MAASCP_SECRETS_KEY": Fernet.generate_key().decode(),  # no OpenBao: encrypted rows
        "MAASCP_STATIC_ROOT": str(tmp_path / "static"),
        "MAASCP_ARCHIVE_DIR": str(tmp_path / "archive"),
    }


@pytest.mark.django_db(transaction=True)
def test_a_node_call_through_the_shipped_proxy_with_composes_values(tmp_path: Path) -> None:
    env = compose_environment("node-api")
    assert env["MAASCP_ENV"] == "production"
    proxy_env = compose_environment("node-proxy")
    node_api_url = urlsplit(env["MAASCP_NODE_API_URL"])
    assert (node_api_url.scheme, node_api_url.hostname) == ("https", "node-proxy")
    secrets = make_secrets(tmp_path / "secrets")
    with (
        gunicorn(this_machine(env, tmp_path, secrets), tmp_path, app="config.wsgi_node") as app,
        nginx(tmp_path, upstream=app, tls=secrets, max_body=proxy_env["MAX_BODY"]) as proxy,
    ):
        # as a node's curl calls MAASCP_NODE_API_URL: that name, TLS, trusting the CA the
        # payload gives it (MAASCP_NODE_CA_FILE); only the address is this machine's
        base = f"https://node-proxy:{proxy}/api/v1/node"
        node = ["curl", "-sS", "--resolve", f"node-proxy:{proxy}:127.0.0.1",
                "--cacert", str(secrets / "ca.pem"), "-o", "-", "-w", "\n%{http_code}"]  # fmt: skip
        health = subprocess.run([*node, f"{base}/health"], capture_output=True, text=True)
        assert health.stdout.endswith("\n200"), health.stdout + health.stderr
        report = {"onboarding_id": 1, "attempt": 1, "hostname": "c07u31", "phase": "site_bundle",
                  "status": "ok", "bootstrap_token": "t" * 40}  # fmt: skip
        refused = subprocess.run(
            [*node, "-H", "Content-Type: application/json", "-d", json.dumps(report),
             f"{base}/report"], capture_output=True, text=True,
        )  # fmt: skip
        body, _, code = refused.stdout.rpartition("\n")
        assert code == "403", refused.stdout + refused.stderr  # reached the node service
        assert json.loads(body)["detail"] == "Report refused."

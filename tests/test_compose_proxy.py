"""A node's call through the shipped proxy to the node listener, with docker-compose.yml's own
values (its environment for node-api and node-proxy): in compose every node call through the
proxy was a 400, since ``MAASCP_ALLOWED_HOSTS`` did not name the host ``MAASCP_NODE_API_URL``
does, and preflight failed every onboarding. Only what names compose's other containers (the
database, Redis, OpenBao) and the folders are this machine's."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from cryptography.fernet import Fernet
from django.db import connection

from tests.support.proxy import compose_environment, gunicorn, nginx

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which("nginx"), reason="nginx (Debian) not installed"),
]


def this_machine(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """compose's environment with its containers' addresses replaced by this machine's (the
    database: this test's)."""
    db = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.skip("production mode runs on PostgreSQL only")
    return {
        **env,
        "MAASCP_DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        "MAASCP_BROKER_URL": os.environ["MAASCP_BROKER_URL"],
        "MAASCP_VAULT_ADDR": "",  # no OpenBao here: the encrypted-rows backend
        "MAASCP_VAULT_ROLE_ID": "",
        "MAASCP_VAULT_SECRET_ID": "",
        "MAASCP_SECRETS_KEY": Fernet.generate_key().decode(),
        "MAASCP_SECRET_KEY": secrets.token_urlsafe(50),  # compose's placeholder is refused
        "MAASCP_STATIC_ROOT": str(tmp_path / "static"),
        "MAASCP_ARCHIVE_DIR": str(tmp_path / "archive"),
    }


@pytest.mark.django_db(transaction=True)
def test_a_node_call_through_the_shipped_proxy_with_composes_values(tmp_path: Path) -> None:
    env = compose_environment("node-api")
    assert env["MAASCP_ENV"] == "production"
    proxy_env = compose_environment("node-proxy")
    node_api_url = urlsplit(env["MAASCP_NODE_API_URL"])
    assert node_api_url.hostname == "node-proxy"  # nodes call the proxy, as compose names it
    with (
        gunicorn(this_machine(env, tmp_path), tmp_path, app="config.wsgi_node") as listener,
        nginx(tmp_path, upstream=listener, max_body=proxy_env["MAX_BODY"]) as proxy,
    ):
        as_a_node = {"Host": node_api_url.netloc}  # what curl sends for MAASCP_NODE_API_URL
        base = f"http://127.0.0.1:{proxy}/api/v1/node"
        health = requests.get(f"{base}/health", headers=as_a_node, timeout=30)
        assert health.status_code == 200, health.text[:500]
        report = {"onboarding_id": 1, "attempt": 1, "hostname": "c07u31", "phase": "site_bundle",
                  "status": "ok", "bootstrap_token": "t" * 40}  # fmt: skip
        refused = requests.post(f"{base}/report", json=report, headers=as_a_node, timeout=30)
        assert refused.status_code == 403, refused.text[:500]  # reached the node service
        assert refused.json()["detail"] == "Report refused."

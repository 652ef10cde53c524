"""Settings from MAASCP_* variables: safe embedded defaults, clear production errors."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from config.env import Env, database_from_url

ROOT = Path(__file__).resolve().parent.parent


def run_check(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAASCP_")}
    clean.update({"MAASCP_DATA_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_embedded_defaults_need_nothing(tmp_path: Path) -> None:
    result = run_check({}, tmp_path)
    assert result.returncode == 0, result.stderr
    # the embedded mode generated its keys into the data folder, private to the owner
    for name in ("django-secret-key", "secrets.key"):
        assert (tmp_path / name).stat().st_mode & 0o077 == 0
    # and its own CA, which sites without one give their nodes (docs/settings.md, "Node trust")
    from maas_domain.pki import parse_ca_bundle

    [ca] = parse_ca_bundle((tmp_path / "node-ca.pem").read_text())
    assert ca.subject.rfc4514_string() == "CN=maascp embedded node CA"


def test_a_node_ca_file_that_is_not_a_ca_bundle_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    result = run_check({"MAASCP_NODE_CA_FILE": str(tmp_path / "ca.pem")}, tmp_path)
    assert result.returncode != 0
    assert "MAASCP_NODE_CA_FILE: Not PEM" in result.stderr
    missing = run_check({"MAASCP_NODE_CA_FILE": str(tmp_path / "nope.pem")}, tmp_path)
    assert "MAASCP_NODE_CA_FILE cannot be read" in missing.stderr


def test_production_lists_every_missing_setting_at_once(tmp_path: Path) -> None:
    result = run_check({"MAASCP_ENV": "production"}, tmp_path)
    assert result.returncode != 0
    for name in (
        "MAASCP_SECRET_KEY",
        "MAASCP_ALLOWED_HOSTS",
        "MAASCP_DATABASE_URL",
        "MAASCP_BROKER_URL",
        "MAASCP_VAULT_ADDR",
        "MAASCP_NODE_API_URL",  # 127.0.0.1 is right only for the embedded stack
    ):
        assert name in result.stderr


def test_production_rejects_malformed_values(tmp_path: Path) -> None:
    result = run_check(
        {
            "MAASCP_ENV": "production",
            "MAASCP_SECRET_KEY": "x" * 50,
            "MAASCP_ALLOWED_HOSTS": "cp.example.test",
            "MAASCP_DATABASE_URL": "sqlite:///tmp/db.sqlite3",
            "MAASCP_BROKER_URL": "amqp://guest@localhost//",
            "MAASCP_SECRETS_KEY": "not-a-fernet-key",
            "MAASCP_TASK_TIME_LIMIT": "ten",
            "MAASCP_DEBUG": "maybe",
        },
        tmp_path,
    )
    assert result.returncode != 0
    assert "MAASCP_DATABASE_URL must be a URL with scheme postgresql" in result.stderr
    assert "MAASCP_BROKER_URL must be a URL with scheme redis" in result.stderr
    assert "MAASCP_SECRETS_KEY must be url-safe base64 Fernet keys" in result.stderr
    assert "MAASCP_TASK_TIME_LIMIT='ten' is not an integer" in result.stderr
    assert "MAASCP_DEBUG='maybe' is not a boolean" in result.stderr


def test_production_with_everything_set_starts(tmp_path: Path) -> None:
    from cryptography.fernet import Fernet

    result = run_check(
        {
            "MAASCP_ENV": "production",
            "MAASCP_SECRET_KEY": secrets.token_urlsafe(50),
            "MAASCP_ALLOWED_HOSTS": "cp.example.test",
            "MAASCP_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/maascp",
            "MAASCP_BROKER_URL": "redis://127.0.0.1:6379/0",
            "MAASCP_SECRETS_KEY": Fernet.generate_key().decode(),
            "MAASCP_NODE_API_URL": "https://cp.example.test:8001",
        },
        tmp_path,
    )
    assert result.returncode == 0, result.stderr


def test_vault_address_needs_a_way_to_authenticate(tmp_path: Path) -> None:
    result = run_check({"MAASCP_VAULT_ADDR": "http://127.0.0.1:8200"}, tmp_path)
    assert result.returncode != 0
    assert "MAASCP_VAULT_TOKEN" in result.stderr


def test_visibility_timeout_must_exceed_task_limits(tmp_path: Path) -> None:
    result = run_check(
        {"MAASCP_VISIBILITY_TIMEOUT": "120", "MAASCP_TASK_TIME_LIMIT": "300"}, tmp_path
    )
    assert result.returncode != 0
    assert "MAASCP_VISIBILITY_TIMEOUT must be larger" in result.stderr


def test_celery_is_configured_for_at_least_once_work() -> None:
    assert settings.CELERY_TASK_ACKS_LATE is True
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST is True
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    assert settings.CELERY_TASK_TIME_LIMIT > settings.CELERY_TASK_SOFT_TIME_LIMIT
    if settings.CELERY_BROKER_URL.startswith("redis"):
        visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
        assert visibility > settings.CELERY_TASK_TIME_LIMIT
        assert visibility > settings.MAX_TASK_COUNTDOWN


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql://u:p%40ss@db.test:6432/cp?sslmode=require",
            {"NAME": "cp", "USER": "u", "PASSWORD": "p@ss", "HOST": "db.test", "PORT": "6432"},
        ),
        ("sqlite:////var/lib/cp/db.sqlite3", {"NAME": "/var/lib/cp/db.sqlite3"}),
        ("sqlite:///relative.sqlite3", {"NAME": "relative.sqlite3"}),
    ],
)
def test_database_urls(url: str, expected: dict[str, str]) -> None:
    parsed = database_from_url(url)
    assert {k: parsed[k] for k in expected} == expected
    if url.startswith("postgresql"):
        assert parsed["OPTIONS"] == {"sslmode": "require"}


def test_env_reader_records_every_name_it_reads() -> None:
    env = Env(environ={"MAASCP_PORT": "80"})
    env.integer("PORT", 1)
    env.flag("DEBUG", default=False)
    assert env.known == {"MAASCP_PORT", "MAASCP_DEBUG", "MAASCP_PORT_FILE", "MAASCP_DEBUG_FILE"}


def test_loki_and_metrics_settings_are_checked(tmp_path: Path) -> None:
    result = run_check(
        {
            "MAASCP_LOKI_URL": "loki:3100",
            "MAASCP_LOKI_LABELS": "env=prod,bad label=x",
            "MAASCP_WORKER_METRICS_PORT": "-1",
        },
        tmp_path,
    )
    assert result.returncode != 0
    for name in ("MAASCP_LOKI_URL", "MAASCP_LOKI_LABELS", "MAASCP_WORKER_METRICS_PORT"):
        assert name in result.stderr
    good = run_check(
        {"MAASCP_LOKI_URL": "http://127.0.0.1:9/loki/api/v1/push", "MAASCP_LOKI_LABELS": "env=t"},
        tmp_path,
    )
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "metrics").is_dir()


def test_production_refuses_debug(tmp_path: Path) -> None:
    result = run_check({"MAASCP_ENV": "production", "MAASCP_DEBUG": "true"}, tmp_path)
    assert result.returncode != 0
    assert "MAASCP_DEBUG may not be true in production mode" in result.stderr
    assert run_check({"MAASCP_DEBUG": "true"}, tmp_path).returncode == 0  # embedded: allowed


def settings_of(env: dict[str, str], tmp_path: Path, *names: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAASCP_")}
    clean.update({"MAASCP_DATA_DIR": str(tmp_path), **env})
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='config.settings'; "
        "django.setup(); from django.conf import settings as s; "
        f"print(*[repr(getattr(s, n, None)) for n in {list(names)!r}], sep='|')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split("|")


def test_behind_a_tls_proxy_hsts_and_the_forwarded_scheme_are_on(tmp_path: Path) -> None:
    names = ("SECURE_PROXY_SSL_HEADER", "SECURE_HSTS_SECONDS", "SECURE_SSL_REDIRECT",
             "SESSION_COOKIE_SECURE")  # fmt: skip
    on = settings_of({"MAASCP_TLS_TERMINATED": "true"}, tmp_path, *names)
    assert on == ["('HTTP_X_FORWARDED_PROTO', 'https')", "31536000", "True", "True"]
    off = settings_of({}, tmp_path, *names)
    assert off == ["None", "0", "False", "False"]


def test_processes_starting_at_once_agree_on_one_generated_key(tmp_path: Path) -> None:
    """Embedded mode generates its keys into the data folder at the first start; twenty
    processes starting at once from a fresh folder (the fleet benchmark's simulators) must
    neither read a half-written file nor each keep a key of its own."""
    import threading

    from config.env import generated_once

    path = tmp_path / "secrets.key"
    start = threading.Barrier(20)
    got: list[str] = []

    def one(n: int) -> None:
        start.wait()
        got.append(generated_once(path, lambda: f"key-{n}-" + "x" * 4096))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 20 and len(set(got)) == 1, sorted(set(got))[:3]
    assert path.read_text().strip() == got[0]
    assert path.stat().st_mode & 0o077 == 0
    assert [p.name for p in tmp_path.iterdir()] == ["secrets.key"]  # no candidate left behind


def test_the_node_api_urls_host_is_an_allowed_host(tmp_path: Path) -> None:
    """Nodes call MAASCP_NODE_API_URL: a deployment whose MAASCP_ALLOWED_HOSTS forgot its host
    (compose did) answered every node call 400."""
    from cryptography.fernet import Fernet

    env = {
        "MAASCP_ENV": "production",
        "MAASCP_SECRET_KEY": Fernet.generate_key().decode() * 2,
        "MAASCP_ALLOWED_HOSTS": "cp.example.test",
        "MAASCP_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/maascp",
        "MAASCP_BROKER_URL": "redis://127.0.0.1:6379/0",
        "MAASCP_SECRETS_KEY": Fernet.generate_key().decode(),
        "MAASCP_NODE_API_URL": "https://Nodes.Example.Test:8001",
    }
    [hosts] = settings_of(env, tmp_path, "ALLOWED_HOSTS")
    assert hosts == "['cp.example.test', 'nodes.example.test']"
    [hosts] = settings_of({**env, "MAASCP_NODE_API_URL": "http://[fd00::7]:8001"}, tmp_path,
                          "ALLOWED_HOSTS")  # fmt: skip
    assert hosts == "['cp.example.test', '[fd00::7]']"


def test_production_refuses_a_plain_http_secrets_server_unless_told(tmp_path: Path) -> None:
    env = {
        "MAASCP_ENV": "production",
        "MAASCP_SECRET_KEY": _fernet_key() * 2,
        "MAASCP_ALLOWED_HOSTS": "cp.example.test",
        "MAASCP_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/maascp",
        "MAASCP_BROKER_URL": "redis://127.0.0.1:6379/0",
        "MAASCP_NODE_API_URL": "https://cp.example.test:8001",
        "MAASCP_VAULT_ADDR": "http://vault.example.test:8200",
        "MAASCP_VAULT_ROLE_ID": "role",
        "MAASCP_VAULT_SECRET_ID": "secret",
    }
    refused = run_check(env, tmp_path)
    assert refused.returncode != 0 and "MAASCP_VAULT_ALLOW_HTTP" in refused.stderr
    told = run_check({**env, "MAASCP_VAULT_ALLOW_HTTP": "true"}, tmp_path)
    assert told.returncode == 0, told.stderr
    tls = run_check({**env, "MAASCP_VAULT_ADDR": "https://vault.example.test:8200"}, tmp_path)
    assert tls.returncode == 0, tls.stderr
    embedded = run_check({"MAASCP_VAULT_ADDR": env["MAASCP_VAULT_ADDR"],
                          "MAASCP_VAULT_TOKEN": "t"}, tmp_path)  # fmt: skip
    assert embedded.returncode == 0, embedded.stderr


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


PRODUCTION = {
    "MAASCP_ENV": "production",
    "MAASCP_ALLOWED_HOSTS": "cp.example.test",
    "MAASCP_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/maascp",
    "MAASCP_BROKER_URL": "redis://127.0.0.1:6379/0",
    "MAASCP_NODE_API_URL": "https://cp.example.test:8001",
}


@pytest.mark.parametrize(
    "key",
    [
        "x" * 50,  # long, one character
        "change-me-to-50-random-characters-before-real-use-000",  # compose's old default
        secrets.token_urlsafe(20),  # random but short
        "django-insecure-" + secrets.token_urlsafe(50),
        "ExamplE-" + secrets.token_urlsafe(50),
    ],
    ids=["one-character", "compose-default", "short", "django-insecure", "placeholder-word"],
)
def test_production_refuses_a_guessable_secret_key(tmp_path: Path, key: str) -> None:
    env = {**PRODUCTION, "MAASCP_SECRETS_KEY": _fernet_key(), "MAASCP_SECRET_KEY": key}
    refused = run_check(env, tmp_path)
    assert refused.returncode != 0 and "MAASCP_SECRET_KEY is guessable" in refused.stderr


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("MAASCP_DATABASE_URL", "postgresql://maascp:maascp@db.example.test:5432/maascp"),
        ("MAASCP_DATABASE_URL", "postgresql://maascp:Change-Me@db.example.test/maascp"),
        ("MAASCP_BROKER_URL", "redis://:redis@redis.example.test:6379/0"),
    ],
)
def test_production_refuses_a_shipped_password(tmp_path: Path, name: str, url: str) -> None:
    env = {**PRODUCTION, "MAASCP_SECRETS_KEY": _fernet_key(),
           "MAASCP_SECRET_KEY": secrets.token_urlsafe(50), name: url}  # fmt: skip
    refused = run_check(env, tmp_path)
    assert refused.returncode != 0 and f"{name} holds a well-known password" in refused.stderr


def test_a_secret_may_come_from_a_file_never_both(tmp_path: Path) -> None:
    """compose's secrets are files under /run/secrets/: MAASCP_<NAME>_FILE reads one."""
    key = tmp_path / "secret_key"
    key.write_text(secrets.token_urlsafe(50) + "\n")
    url = tmp_path / "database_url"
    url.write_text("postgresql://maascp:" + secrets.token_hex(16) + "@127.0.0.1:5432/maascp\n")
    env = {k: v for k, v in PRODUCTION.items() if k != "MAASCP_DATABASE_URL"}
    env.update(MAASCP_SECRETS_KEY=_fernet_key(), MAASCP_SECRET_KEY_FILE=str(key),
               MAASCP_DATABASE_URL_FILE=str(url))  # fmt: skip
    assert settings_of(env, tmp_path, "SECRET_KEY") == [repr(key.read_text().strip())]
    assert run_check(env, tmp_path).returncode == 0
    both = run_check({**env, "MAASCP_SECRET_KEY": secrets.token_urlsafe(50)}, tmp_path)
    assert "MAASCP_SECRET_KEY and MAASCP_SECRET_KEY_FILE are both set" in both.stderr
    gone = run_check({**env, "MAASCP_SECRET_KEY_FILE": str(tmp_path / "nope")}, tmp_path)
    assert "MAASCP_SECRET_KEY_FILE=" in gone.stderr and "cannot be read" in gone.stderr

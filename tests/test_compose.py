"""docker-compose.yml sets only variables the settings read, for every service built from us."""

from __future__ import annotations

from pathlib import Path

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

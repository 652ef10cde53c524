"""Every page sends a Content-Security-Policy that runs scripts from this origin only, and no
page of ours holds an inline script it would block (docs/security.md, T20): the admin pages sent
none, so a value an operator or MAAS wrote that slipped past escaping would have run. The
browser journey (tests/admin/test_browser.py) fails on any violation Chromium reports."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.factories import make_node, make_onboarding, make_site

pytestmark = pytest.mark.django_db


def policy(answer: Any) -> dict[str, list[str]]:
    header = answer["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in header.split(";") if d.strip()}


def inline_scripts(html: str) -> list[str]:
    """Script elements a browser would run from the page itself (data blocks are not run)."""
    found = []
    for attrs, body in re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.S):
        if "src=" in attrs or re.search(r'type="application/(ld\+)?json"', attrs):
            continue
        found.append(body.strip()[:200])
    return found


def test_every_page_runs_only_this_origins_scripts(client: Any, admin_user: Any) -> None:
    site = make_site()
    node = make_node(site, state="active", maas_system_id="abc123")
    wf = make_onboarding(site, node=node, state="failed", stage="deploy", maas_system_id="abc123")
    login = client.get("/admin/login/")
    client.force_login(admin_user)
    pages = {
        "login": login,
        "index": client.get("/admin/"),
        "sites": client.get("/admin/maas_domain/maassite/"),
        "site": client.get(f"/admin/maas_domain/maassite/{site.pk}/change/"),
        "onboarding": client.get(f"/admin/onboarding/onboarding/{wf.pk}/change/"),
        "node": client.get(f"/admin/maas_domain/node/{node.pk}/change/"),
        "start": client.get("/admin/onboarding/onboarding/add/"),
        "swagger": client.get("/api/v1/docs/"),
        "redoc": client.get("/api/v1/redoc/"),
    }
    for name, answer in pages.items():
        assert answer.status_code == 200, name
        csp = policy(answer)
        assert csp["script-src"] == ["'self'"], (name, csp)
        assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
        assert csp["base-uri"] == ["'self'"] and csp["form-action"] == ["'self'"]
        assert inline_scripts(answer.content.decode()) == [], name
    script = client.get("/api/v1/docs/", {"script": ""})  # Swagger UI's start, as a file
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()

"""``maasctl sites create/update/list --region`` against the fake API: what is sent, what a
bad name or a refused move prints (docs/cli.md)."""

from __future__ import annotations

from typing import Any

from tests.support.fakeapi import page

SITE = {"id": 4, "name": "lab-east", "status": "active", "region": "east", "health": "unknown",
        "last_probe_at": None, "maas_url": "http://maas:5240/MAAS/"}  # fmt: skip


def test_create_and_update_send_the_region(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("POST", "/maas-sites", SITE, status=201)
    made = fake_cli("sites", "create", "lab-east", "--maas-url", SITE["maas_url"], "--region",
                    "east")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert fake_api.to("POST", "/maas-sites")[0].body["region"] == "east"
    assert "east" in made.stdout
    fake_api.on("PATCH", "/maas-sites/4", {**SITE, "region": "west"})
    moved = fake_cli("sites", "update", "4", "--region", "west")
    assert moved.exit_code == 0, moved.output
    assert fake_api.to("PATCH", "/maas-sites/4")[0].body == {"region": "west"}


def test_a_bad_region_is_refused_before_anything_is_sent(fake_cli: Any, fake_api: Any) -> None:
    for bad in ("East", "east\n", "ea_st", "-east"):
        result = fake_cli("sites", "update", "4", "--region", bad)
        assert result.exit_code != 0
        assert "--region" in result.stderr and "Not a valid region name" in result.stderr
    assert fake_api.sent == []


def test_a_refused_move_names_the_open_work(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("PATCH", "/maas-sites/4", {"error": "conflict", "detail": "Site 'lab-east' has "
                "work in region 'east' (onboarding 12 (running)); let it finish or cancel it "
                "before moving the site to region 'west'.", "open_work": [{"kind": "onboarding",
                "id": 12, "hostname": "c07u31", "state": "running"}]}, status=409)  # fmt: skip
    result = fake_cli("sites", "update", "4", "--region", "west")
    assert result.exit_code == 3
    assert "onboarding 12 (running)" in result.stderr


def test_list_filters_by_region(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("GET", "/maas-sites", page([SITE]))
    result = fake_cli("sites", "list", "--region", "east")
    assert result.exit_code == 0, result.output
    assert fake_api.to("GET", "/maas-sites")[0].query["region"] == ["east"]
    assert "region" in result.stdout


def test_a_site_on_a_used_maas_is_refused_naming_it_and_share_maas_with_is_sent(
    fake_cli: Any, fake_api: Any
) -> None:
    fake_api.on("POST", "/maas-sites", {"error": "maas_in_use", "detail": "The MAAS at "
                "http://maas:5240/MAAS/ is already used by site 'demo': …", "sites_on_maas": [
                {"id": 1, "name": "demo", "maas_url": "http://maas:5240/MAAS/"}]},
                status=409)  # fmt: skip
    refused = fake_cli("sites", "create", "lab-east", "--maas-url", SITE["maas_url"])
    assert refused.exit_code == 3
    assert "already used by site 'demo'" in refused.stderr
    assert '"name": "demo"' in refused.stderr  # sites_on_maas, listed
    fake_api.on("POST", "/maas-sites", SITE, status=201)
    made = fake_cli("sites", "create", "lab-east", "--maas-url", SITE["maas_url"],
                    "--share-maas-with", "demo")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert fake_api.to("POST", "/maas-sites")[-1].body["share_maas_with"] == ["demo"]


def test_an_http_maas_is_allowed_per_site_on_purpose(fake_cli: Any, fake_api: Any) -> None:
    """Production refuses an http:// MAAS URL unless the site allows it (docs/security.md, T22):
    maasctl sends the site's say-so, and only when asked."""
    fake_api.on("POST", "/maas-sites", SITE, status=201)
    made = fake_cli("sites", "create", "lab-east", "--maas-url", SITE["maas_url"],
                    "--maas-allow-http")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert fake_api.to("POST", "/maas-sites")[0].body["maas_allow_http"] is True
    fake_api.on("PATCH", "/maas-sites/4", SITE)
    assert fake_cli("sites", "update", "4", "--maas-https-only").exit_code == 0
    assert fake_api.to("PATCH", "/maas-sites/4")[0].body == {"maas_allow_http": False}
    assert fake_cli("sites", "update", "4", "--description", "x").exit_code == 0
    assert "maas_allow_http" not in fake_api.to("PATCH", "/maas-sites/4")[1].body

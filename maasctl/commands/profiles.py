"""``maasctl profiles``: a site's profiles (runtime target and policy overrides)."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl.cli import (
    STATE,
    body_of,
    confirm,
    fail,
    if_match,
    json_option,
    profile_id,
    show,
    site_id,
)
from maasctl.options import Limit, Policy, Revision, SiteRef, Yes

app = typer.Typer(help="A site's profiles: runtime target and policy overrides.")
COLUMNS = ("id", "name", "status", "architecture", "distro_series", "storage_layout")
DETAIL = (*COLUMNS, "hwe_kernel", "pxe_interface", "pxe_subnet", "policy_overrides", "revision")


@app.command("list")
def profiles_list(site: SiteRef, limit: Limit = 100) -> None:
    show(STATE.api.pages(f"/maas-sites/{site_id(site)}/profiles", limit=limit), COLUMNS)


@app.command("show")
def profiles_show(site: SiteRef, profile: str) -> None:
    pk = site_id(site)
    show(STATE.api.get(f"/maas-sites/{pk}/profiles/{profile_id(pk, profile)}"), DETAIL)


@app.command("create")
def profiles_create(
    site: SiteRef,
    name: str,
    distro_series: Annotated[str | None, typer.Option()] = None,
    architecture: Annotated[str | None, typer.Option()] = None,
    storage_layout: Annotated[str | None, typer.Option(help="flat, lvm, bcache, blank")] = None,
    hwe_kernel: Annotated[str | None, typer.Option()] = None,
    policy: Policy = None,
) -> None:
    body = body_of(name=name, distro_series=distro_series, architecture=architecture,
                   storage_layout=storage_layout, hwe_kernel=hwe_kernel,
                   policy_overrides=json_option(policy, "--policy"))  # fmt: skip
    show(STATE.api.call("POST", f"/maas-sites/{site_id(site)}/profiles", body), DETAIL)


@app.command("update")
def profiles_update(
    site: SiteRef,
    profile: str,
    distro_series: Annotated[str | None, typer.Option()] = None,
    storage_layout: Annotated[str | None, typer.Option()] = None,
    policy: Policy = None,
    revision: Revision = None,
) -> None:
    pk = site_id(site)
    body = body_of(distro_series=distro_series, storage_layout=storage_layout,
                   policy_overrides=json_option(policy, "--policy"))  # fmt: skip
    if not body:
        raise fail("nothing to change: give at least one option")
    show(STATE.api.call("PATCH", f"/maas-sites/{pk}/profiles/{profile_id(pk, profile)}", body,
                        headers=if_match(revision)), DETAIL)  # fmt: skip


@app.command("disable")
def profiles_disable(site: SiteRef, profile: str, yes: Yes = False) -> None:
    pk = site_id(site)
    ppk = profile_id(pk, profile)
    confirm(f"disable profile {profile}", yes)
    show(STATE.api.call("DELETE", f"/maas-sites/{pk}/profiles/{ppk}"), DETAIL)

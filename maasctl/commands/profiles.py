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
    listing,
    profile_id,
    send,
    show,
    site_id,
)
from maasctl.options import All, DryRun, Limit, Policy, Revision, SiteRef, Yes

app = typer.Typer(help="A site's profiles: runtime target and policy overrides.")
COLUMNS = ("id", "name", "status", "architecture", "distro_series", "storage_layout")
DETAIL = (*COLUMNS, "hwe_kernel", "pxe_interface", "pxe_subnet", "policy_overrides", "revision")


@app.command("list")
def profiles_list(site: SiteRef, limit: Limit = 100, every: All = False) -> None:
    page = STATE.api.pages(f"/maas-sites/{site_id(site)}/profiles", limit=None if every else limit)
    listing(page, COLUMNS, noun="profiles")


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
    dry_run: DryRun = False,
) -> None:
    body = body_of(name=name, distro_series=distro_series, architecture=architecture,
                   storage_layout=storage_layout, hwe_kernel=hwe_kernel,
                   policy_overrides=json_option(policy, "--policy"))  # fmt: skip
    answer = send("POST", f"/maas-sites/{site_id(site)}/profiles", body, dry_run=dry_run,
                  columns=DETAIL)  # fmt: skip
    show(answer, DETAIL)


@app.command("update")
def profiles_update(
    site: SiteRef,
    profile: str,
    distro_series: Annotated[str | None, typer.Option()] = None,
    storage_layout: Annotated[str | None, typer.Option()] = None,
    policy: Policy = None,
    revision: Revision = None,
    dry_run: DryRun = False,
) -> None:
    pk = site_id(site)
    body = body_of(distro_series=distro_series, storage_layout=storage_layout,
                   policy_overrides=json_option(policy, "--policy"))  # fmt: skip
    if not body:
        raise fail("nothing to change: give at least one option")
    answer = send("PATCH", f"/maas-sites/{pk}/profiles/{profile_id(pk, profile)}", body,
                  headers=if_match(revision), dry_run=dry_run, columns=DETAIL)  # fmt: skip
    show(answer, DETAIL)


@app.command("disable")
def profiles_disable(
    site: SiteRef, profile: str, yes: Yes = False, dry_run: DryRun = False
) -> None:
    pk = site_id(site)
    ppk = profile_id(pk, profile)
    confirm(f"disable profile {profile}", yes or dry_run)
    show(send("DELETE", f"/maas-sites/{pk}/profiles/{ppk}", dry_run=dry_run, columns=DETAIL),
         DETAIL)  # fmt: skip

"""``maasctl sites``: MAAS sites, their node trust, guard, policy, credentials and probe."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from maas_domain.validators import region_error
from maasctl.cli import (
    FAILED,
    STATE,
    body_of,
    confirm,
    fail,
    if_match,
    json_option,
    listing,
    send,
    show,
    site_id,
)
from maasctl.options import All, DryRun, Limit, Policy, Revision, SiteRef, Yes, options_from

app = typer.Typer(help="MAAS sites: connectivity, node trust, guard, policy, credentials.")
COLUMNS = ("id", "name", "status", "region", "health", "last_probe_at", "maas_url")
DETAIL = (
    *("id", "name", "description", "status", "region", "health", "last_probe_at", "maas_url"),
    *("maas_allow_http", "maas_user", "verify_tls", "pxe_subnet", "node_api_url"),
    "payload_allowed_hosts",
    *("allow_http", "guarded", "approved_hosts"),
    *("ca_certificates", "node_trust", "policy", "credentials", "revision"),
)


@dataclass(frozen=True)
class SiteFields:
    """The site fields ``create`` and ``update`` both take (docs/api.md, "Sites"), declared once."""

    description: Annotated[str | None, typer.Option(help="Free text.")] = None
    region: Annotated[
        str | None,
        typer.Option(
            help="The region whose workers run the site's MAAS work (a slug; default: "
            "default). A move is refused while the site has work running (docs/cli.md)."
        ),
    ] = None
    maas_user: Annotated[str | None, typer.Option(help="The MAAS user the API key belongs to.")] = (
        None
    )
    pxe_subnet: Annotated[str | None, typer.Option(help="IPv4 CIDR of the PXE network.")] = None
    verify_tls: Annotated[bool | None, typer.Option("--verify-tls/--no-verify-tls")] = None
    maas_allow_http: Annotated[
        bool | None,
        typer.Option(
            "--maas-allow-http/--maas-https-only",
            help="The site's MAAS may be reached over plain http (production refuses an http "
            "MAAS URL without it: the key's signature and IPMI passwords cross in the clear).",
        ),
    ] = None
    ca_bundle: Annotated[
        Path | None,
        typer.Option(
            help="PEM file of the CA nodes trust. Default: the control plane's own "
            "(MAASCP_NODE_CA_FILE; make run: its generated CA); `sites show` says which."
        ),
    ] = None
    node_api_url: Annotated[
        str | None,
        typer.Option(
            help="The control plane's URL as nodes see it. Default: MAASCP_NODE_API_URL "
            "(make run: its own address)."
        ),
    ] = None
    guarded: Annotated[
        bool | None, typer.Option("--guarded/--not-guarded", help="First-live-run guard.")
    ] = None
    approve: Annotated[
        list[str] | None, typer.Option("--approve", help="Approved host (repeat).")
    ] = None
    payload_host: Annotated[
        list[str] | None,
        typer.Option("--payload-host", help="A host nodes may fetch from (repeat)."),
    ] = None
    allow_http: Annotated[bool | None, typer.Option("--allow-http/--https-only")] = None
    share_maas_with: Annotated[
        list[str] | None,
        typer.Option(
            "--share-maas-with",
            help="One MAAS, one site: a site on a MAAS another site uses is refused, naming "
            "it; to share anyway, name each such site (repeat).",
        ),
    ] = None
    policy: Policy = None

    def body(self) -> dict[str, Any]:
        """The API body of the fields given (a field left out is not sent)."""
        if self.region is not None and (reason := region_error(self.region)):
            raise fail(f"--region {self.region!r}: {reason}")
        fields = body_of(
            description=self.description,
            region=self.region,
            maas_user=self.maas_user,
            pxe_subnet=self.pxe_subnet,
            verify_tls=self.verify_tls,
            maas_allow_http=self.maas_allow_http,
            node_api_url=self.node_api_url,
            guarded=self.guarded,
            approved_hosts=self.approve or None,
            policy=json_option(self.policy, "--policy"),
            payload_allowed_hosts=self.payload_host or None,
            allow_http=self.allow_http,
            share_maas_with=self.share_maas_with or None,
        )
        if self.ca_bundle is not None:
            try:
                fields["ca_bundle_pem"] = self.ca_bundle.read_text()
            except OSError as exc:
                raise fail(f"cannot read {self.ca_bundle}: {exc.strerror}") from None
        return fields


@app.command("list")
def sites_list(
    name: Annotated[str | None, typer.Option(help="Name contains.")] = None,
    status: Annotated[str | None, typer.Option(help="active or disabled.")] = None,
    region: Annotated[str | None, typer.Option(help="Only this region's sites.")] = None,
    limit: Limit = 100,
    every: All = False,
) -> None:
    page = STATE.api.pages(
        "/maas-sites", limit=None if every else limit, name=name, status=status, region=region
    )
    listing(page, COLUMNS, noun="sites")


@app.command("show")
def sites_show(site: SiteRef) -> None:
    show(STATE.api.get(f"/maas-sites/{site_id(site)}"), DETAIL)


@app.command("create")
@options_from(SiteFields, into="fields")
def sites_create(
    name: Annotated[str, typer.Argument(help="A slug, e.g. lab-east.")],
    maas_url: Annotated[str, typer.Option(help="e.g. http://maas:5240/MAAS/")],
    fields: SiteFields,
    dry_run: DryRun = False,
) -> None:
    body = {"name": name, "maas_url": maas_url, **fields.body()}
    show(send("POST", "/maas-sites", body, dry_run=dry_run, columns=DETAIL), DETAIL)


@app.command("update")
@options_from(SiteFields, into="fields")
def sites_update(
    site: SiteRef,
    maas_url: Annotated[str | None, typer.Option()] = None,
    *,
    fields: SiteFields,
    revision: Revision = None,
    dry_run: DryRun = False,
) -> None:
    body = body_of(maas_url=maas_url, **fields.body())
    if not body:
        raise fail("nothing to change: give at least one option")
    answer = send("PATCH", f"/maas-sites/{site_id(site)}", body, headers=if_match(revision),
                  dry_run=dry_run, columns=DETAIL)  # fmt: skip
    show(answer, DETAIL)


@app.command("disable")
def sites_disable(
    site: SiteRef, yes: Yes = False, revision: Revision = None, dry_run: DryRun = False
) -> None:
    pk = site_id(site)
    confirm(f"disable site {site}", yes or dry_run)
    answer = send("DELETE", f"/maas-sites/{pk}", headers=if_match(revision), dry_run=dry_run,
                  columns=DETAIL)  # fmt: skip
    show(answer, DETAIL)


@app.command("probe")
def sites_probe(site: SiteRef, dry_run: DryRun = False) -> None:
    """Check MAAS connectivity, authentication, capabilities, boot resources, PXE, power."""
    result = send("POST", f"/maas-sites/{site_id(site)}/probe", dry_run=dry_run)
    if STATE.fmt != "table":
        show(result)
    else:
        show(result["checks"], ("name", "ok", "detail", "duration_ms"), title=result["health"])
    if result["health"] != "healthy":
        raise typer.Exit(FAILED)


@app.command("set-credentials")
def sites_set_credentials(
    site: SiteRef,
    maas_api_key: Annotated[
        bool, typer.Option("--maas-api-key", help="Ask for the MAAS API key.")
    ] = False,
    ipmi_username: Annotated[
        str | None, typer.Option(help="Default IPMI user; asks for its password.")
    ] = None,
    from_file: Annotated[
        str | None, typer.Option(help="A JSON body (docs/api.md), or - for stdin.")
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Write or rotate secrets. Values come from a hidden prompt, stdin or a file: never from
    the command line. The answer shows versions, never a value."""
    body: dict[str, Any] = {}
    if from_file is not None:
        try:
            raw = sys.stdin.read() if from_file == "-" else Path(from_file).read_text()
            body = json.loads(raw)
        except (OSError, ValueError) as exc:
            raise fail(f"cannot read credentials from {from_file}: {exc}") from None
        if not isinstance(body, dict):
            raise fail("the credentials file must hold a JSON object")
    if maas_api_key:
        body["maas_api_key"] = typer.prompt("MAAS API key", hide_input=True)
    if ipmi_username is not None:
        password = typer.prompt(f"IPMI password for {ipmi_username}", hide_input=True)
        body["ipmi"] = {"username": ipmi_username, "password": password}
    if not body:
        raise fail("nothing to write: --maas-api-key, --ipmi-username or --from-file")
    show(send("POST", f"/maas-sites/{site_id(site)}/credentials", body, dry_run=dry_run))

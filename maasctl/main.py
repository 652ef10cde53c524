"""maasctl's commands (docs/cli.md). Every command is one or a few HTTP calls to the admin API;
errors print the API's reason and exit with the code docs/cli.md lists, never a traceback."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from maasctl import csvfile, output, watch
from maasctl.api import USAGE, Api, ApiError
from maasctl.config import ConfigError, load

VERBS = ("retry", "resume", "rerun", "restart-clean", "cancel", "adopt",
         "mark-manual-intervention")  # fmt: skip
DESTRUCTIVE = ("restart-clean", "cancel")
FAILED = 1  # the request worked and what it reports failed (probe unhealthy, workflow failed)
INTERRUPTED = 130


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


class _State:
    profile: str | None = None
    fmt: str = "table"
    _api: Api | None = None

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(load(self.profile))
        return self._api


STATE = _State()


def fail(message: str, code: int = USAGE) -> typer.Exit:
    output.errors.print(f"maasctl: {message}", markup=False, highlight=False)
    return typer.Exit(code)


class RootGroup(TyperGroup):
    """Turns every error into its message and exit code: never a traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except ApiError as exc:
            raise _api_failure(exc) from None
        except ConfigError as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:
            raise fail("interrupted", INTERRUPTED) from None
        except Exception as exc:  # a bug in maasctl: say what, not where
            raise fail(f"internal error: {type(exc).__name__}: {exc}", 5) from None


def _api_failure(exc: ApiError) -> typer.Exit:
    lines = [exc.message]
    fields = exc.body.get("fields") or {}
    lines += [f"  {name}: {'; '.join(map(str, reasons))}" for name, reasons in fields.items()]
    for key in ("open_workflows", "allocations", "current_state", "allowed_verbs", "problems",
                "open_onboarding", "current_revision"):  # fmt: skip
        if key in exc.body:
            lines.append(f"  {key}: {json.dumps(exc.body[key], default=str)}")
    return fail("\n".join(lines), exc.exit_code)


class OnboardGroup(TyperGroup):
    """``onboard HOST ...`` (one host) beside ``onboard batch FILE.csv``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["host", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=RootGroup,
    help="The control plane's command line: sites, SKUs, nodes, onboarding, decommission, "
    "reconciliation. Talks only to the HTTP API.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def root(
    profile: Annotated[
        str | None, typer.Option("--profile", help="Config profile (default: MAASCTL_PROFILE).")
    ] = None,
    output_format: Annotated[
        Format, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = Format.table,
) -> None:
    STATE.profile, STATE.fmt, STATE._api = profile, output_format.value, None


def show(data: Any, columns: tuple[str, ...] = (), title: str = "") -> None:
    output.show(data, STATE.fmt, columns=columns, title=title)


def confirm(what: str, yes: bool) -> None:
    if yes:
        return
    try:
        answered = typer.confirm(f"{what}?", default=False)
    except typer.Abort:  # no answer (stdin closed)
        raise fail(f"{what}: not confirmed (answer y, or pass --yes)") from None
    if not answered:
        raise fail("not confirmed")


def json_option(raw: str | None, name: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise fail(f"{name} is not JSON: {exc}") from None


def body_of(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def if_match(revision: int | None) -> dict[str, str]:
    return {"If-Match": f'"{revision}"'} if revision is not None else {}


# -- sites ----------------------------------------------------------------------------------------

sites = typer.Typer(help="MAAS sites: connectivity, node trust, guard, policy, credentials.")
app.add_typer(sites, name="sites")
SITE_COLUMNS = ("id", "name", "status", "health", "last_probe_at", "maas_url")
SITE_DETAIL = (
    *("id", "name", "description", "status", "health", "last_probe_at", "maas_url"),
    *("maas_user", "verify_tls", "pxe_subnet", "node_api_url", "payload_allowed_hosts"),
    *("allow_http", "guarded", "approved_hosts"),
    *("ca_certificates", "policy", "credentials", "revision"),
)
SiteRef = Annotated[str, typer.Argument(help="Site id or name.")]


def site_id(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [s for s in STATE.api.pages("/maas-sites", limit=500, name=ref) if s["name"] == ref]
    if not found:
        raise fail(f"no site named {ref!r}", 4)
    return int(found[0]["id"])


def site_fields(
    *,
    description: str | None,
    maas_user: str | None,
    pxe_subnet: str | None,
    verify_tls: bool | None,
    ca_bundle: Path | None,
    node_api_url: str | None,
    guarded: bool | None,
    approve: list[str] | None,
    policy: str | None,
    payload_host: list[str] | None = None,
    allow_http: bool | None = None,
) -> dict[str, Any]:
    fields = body_of(
        description=description,
        maas_user=maas_user,
        pxe_subnet=pxe_subnet,
        verify_tls=verify_tls,
        node_api_url=node_api_url,
        guarded=guarded,
        approved_hosts=approve or None,
        policy=json_option(policy, "--policy"),
        payload_allowed_hosts=payload_host or None,
        allow_http=allow_http,
    )
    if ca_bundle is not None:
        try:
            fields["ca_bundle_pem"] = ca_bundle.read_text()
        except OSError as exc:
            raise fail(f"cannot read {ca_bundle}: {exc.strerror}") from None
    return fields


Description = Annotated[str | None, typer.Option(help="Free text.")]
MaasUser = Annotated[str | None, typer.Option(help="The MAAS user the API key belongs to.")]
PxeSubnet = Annotated[str | None, typer.Option(help="IPv4 CIDR of the PXE network.")]
VerifyTls = Annotated[bool | None, typer.Option("--verify-tls/--no-verify-tls")]
CaBundle = Annotated[Path | None, typer.Option(help="PEM file of the CA nodes trust.")]
NodeApiUrl = Annotated[str | None, typer.Option(help="The control plane's URL as nodes see it.")]
Guarded = Annotated[bool | None, typer.Option("--guarded/--not-guarded",
                                              help="First-live-run guard.")]  # fmt: skip
Approve = Annotated[list[str] | None, typer.Option("--approve", help="Approved host (repeat).")]
PayloadHost = Annotated[
    list[str] | None,
    typer.Option("--payload-host", help="A host nodes may fetch from (repeat)."),
]
AllowHttp = Annotated[bool | None, typer.Option("--allow-http/--https-only")]
Policy = Annotated[
    str | None, typer.Option(help='Policy keys as JSON, e.g. {"erase_mode":"quick"}.')
]
Revision = Annotated[int | None, typer.Option("--if-match", help="Only if still this revision.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Limit = Annotated[int, typer.Option(help="At most this many rows.")]


@sites.command("list")
def sites_list(
    name: Annotated[str | None, typer.Option(help="Name contains.")] = None,
    status: Annotated[str | None, typer.Option(help="active or disabled.")] = None,
    limit: Limit = 100,
) -> None:
    show(STATE.api.pages("/maas-sites", limit=limit, name=name, status=status), SITE_COLUMNS)


@sites.command("show")
def sites_show(site: SiteRef) -> None:
    show(STATE.api.get(f"/maas-sites/{site_id(site)}"), SITE_DETAIL)


@sites.command("create")
def sites_create(
    name: Annotated[str, typer.Argument(help="A slug, e.g. lab-east.")],
    maas_url: Annotated[str, typer.Option(help="e.g. http://maas:5240/MAAS/")],
    description: Description = None,
    maas_user: MaasUser = None,
    pxe_subnet: PxeSubnet = None,
    verify_tls: VerifyTls = None,
    ca_bundle: CaBundle = None,
    node_api_url: NodeApiUrl = None,
    guarded: Guarded = None,
    approve: Approve = None,
    payload_host: PayloadHost = None,
    allow_http: AllowHttp = None,
    policy: Policy = None,
) -> None:
    body = {"name": name, "maas_url": maas_url, **site_fields(
        description=description, maas_user=maas_user, pxe_subnet=pxe_subnet,
        verify_tls=verify_tls, ca_bundle=ca_bundle, node_api_url=node_api_url, guarded=guarded,
        approve=approve, policy=policy, payload_host=payload_host,
        allow_http=allow_http)}  # fmt: skip
    show(STATE.api.call("POST", "/maas-sites", body), SITE_DETAIL)


@sites.command("update")
def sites_update(
    site: SiteRef,
    maas_url: Annotated[str | None, typer.Option()] = None,
    description: Description = None,
    maas_user: MaasUser = None,
    pxe_subnet: PxeSubnet = None,
    verify_tls: VerifyTls = None,
    ca_bundle: CaBundle = None,
    node_api_url: NodeApiUrl = None,
    guarded: Guarded = None,
    approve: Approve = None,
    payload_host: PayloadHost = None,
    allow_http: AllowHttp = None,
    policy: Policy = None,
    revision: Revision = None,
) -> None:
    body = body_of(maas_url=maas_url, **site_fields(
        description=description, maas_user=maas_user, pxe_subnet=pxe_subnet,
        verify_tls=verify_tls, ca_bundle=ca_bundle, node_api_url=node_api_url, guarded=guarded,
        approve=approve, policy=policy, payload_host=payload_host,
        allow_http=allow_http))  # fmt: skip
    if not body:
        raise fail("nothing to change: give at least one option")
    answer = STATE.api.call("PATCH", f"/maas-sites/{site_id(site)}", body,
                            headers=if_match(revision))  # fmt: skip
    show(answer, SITE_DETAIL)


@sites.command("disable")
def sites_disable(site: SiteRef, yes: Yes = False, revision: Revision = None) -> None:
    pk = site_id(site)
    confirm(f"disable site {site}", yes)
    show(STATE.api.call("DELETE", f"/maas-sites/{pk}", headers=if_match(revision)), SITE_DETAIL)


@sites.command("probe")
def sites_probe(site: SiteRef) -> None:
    """Check MAAS connectivity, authentication, capabilities, boot resources, PXE, power."""
    result = STATE.api.call("POST", f"/maas-sites/{site_id(site)}/probe")
    if STATE.fmt != "table":
        show(result)
    else:
        show(result["checks"], ("name", "ok", "detail", "duration_ms"), title=result["health"])
    if result["health"] != "healthy":
        raise typer.Exit(FAILED)


@sites.command("set-credentials")
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
    answer = STATE.api.call("POST", f"/maas-sites/{site_id(site)}/credentials", body)
    show(answer)


# -- profiles -------------------------------------------------------------------------------------

profiles = typer.Typer(help="A site's profiles: runtime target and policy overrides.")
app.add_typer(profiles, name="profiles")
PROFILE_COLUMNS = ("id", "name", "status", "architecture", "distro_series", "storage_layout")
PROFILE_DETAIL = (*PROFILE_COLUMNS, "hwe_kernel", "pxe_interface", "pxe_subnet",
                  "policy_overrides", "revision")  # fmt: skip


def profile_id(site: int, ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [p for p in STATE.api.pages(f"/maas-sites/{site}/profiles", limit=500, name=ref)
             if p["name"] == ref]  # fmt: skip
    if not found:
        raise fail(f"no profile named {ref!r} on site {site}", 4)
    return int(found[0]["id"])


@profiles.command("list")
def profiles_list(site: SiteRef, limit: Limit = 100) -> None:
    show(STATE.api.pages(f"/maas-sites/{site_id(site)}/profiles", limit=limit), PROFILE_COLUMNS)


@profiles.command("show")
def profiles_show(site: SiteRef, profile: str) -> None:
    pk = site_id(site)
    show(STATE.api.get(f"/maas-sites/{pk}/profiles/{profile_id(pk, profile)}"), PROFILE_DETAIL)


@profiles.command("create")
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
    show(STATE.api.call("POST", f"/maas-sites/{site_id(site)}/profiles", body), PROFILE_DETAIL)


@profiles.command("update")
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
                        headers=if_match(revision)), PROFILE_DETAIL)  # fmt: skip


@profiles.command("disable")
def profiles_disable(site: SiteRef, profile: str, yes: Yes = False) -> None:
    pk = site_id(site)
    ppk = profile_id(pk, profile)
    confirm(f"disable profile {profile}", yes)
    show(STATE.api.call("DELETE", f"/maas-sites/{pk}/profiles/{ppk}"), PROFILE_DETAIL)


# -- SKUs, nodes, allocations ----------------------------------------------------------------------

skus = typer.Typer(help="Hardware classes nodes are bound to.")
app.add_typer(skus, name="skus")
SKU_COLUMNS = ("id", "code", "name", "gpu_model", "gpu_count", "active", "node_count")


def sku_id(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = STATE.api.pages("/skus", limit=1, code=ref)
    if not found:
        raise fail(f"no SKU with code {ref!r}", 4)
    return int(found[0]["id"])


@skus.command("list")
def skus_list(
    search: Annotated[str | None, typer.Option()] = None,
    active: Annotated[bool | None, typer.Option("--active/--inactive")] = None,
    limit: Limit = 100,
) -> None:
    flag = None if active is None else str(active).lower()
    show(STATE.api.pages("/skus", limit=limit, search=search, active=flag), SKU_COLUMNS)


@skus.command("show")
def skus_show(sku: str) -> None:
    show(STATE.api.get(f"/skus/{sku_id(sku)}"), (*SKU_COLUMNS, "revision"))


@skus.command("create")
def skus_create(
    code: str,
    name: Annotated[str, typer.Option()],
    gpu_model: Annotated[str | None, typer.Option()] = None,
    gpu_count: Annotated[int | None, typer.Option()] = None,
) -> None:
    body = body_of(code=code, name=name, gpu_model=gpu_model, gpu_count=gpu_count)
    show(STATE.api.call("POST", "/skus", body), SKU_COLUMNS)


@skus.command("update")
def skus_update(
    sku: str,
    name: Annotated[str | None, typer.Option()] = None,
    gpu_model: Annotated[str | None, typer.Option()] = None,
    gpu_count: Annotated[int | None, typer.Option()] = None,
    active: Annotated[bool | None, typer.Option("--active/--inactive")] = None,
    revision: Revision = None,
) -> None:
    body = body_of(name=name, gpu_model=gpu_model, gpu_count=gpu_count, active=active)
    if not body:
        raise fail("nothing to change: give at least one option")
    show(STATE.api.call("PATCH", f"/skus/{sku_id(sku)}", body, headers=if_match(revision)),
         SKU_COLUMNS)  # fmt: skip


@skus.command("delete")
def skus_delete(sku: str, yes: Yes = False) -> None:
    """Deletes an unused SKU; one that nodes refer to is disabled instead."""
    pk = sku_id(sku)
    confirm(f"delete SKU {sku}", yes)
    kept = STATE.api.call("DELETE", f"/skus/{pk}")
    if kept is None:
        output.console.print(f"SKU {pk} deleted.")
    else:
        output.console.print(f"SKU {pk} is in use: disabled instead.")
        show(kept, SKU_COLUMNS)


nodes = typer.Typer(help="Nodes: inventory, workflows and timeline.")
app.add_typer(nodes, name="nodes")
NODE_COLUMNS = ("id", "hostname", "site_name", "sku_code", "state", "maas_system_id")
TIMELINE_COLUMNS = ("at", "source", "kind", "workflow_kind", "workflow_id", "stage", "message")


@nodes.command("list")
def nodes_list(
    site: Annotated[str | None, typer.Option(help="Site id or name.")] = None,
    state: Annotated[str | None, typer.Option()] = None,
    sku: Annotated[str | None, typer.Option()] = None,
    search: Annotated[str | None, typer.Option(help="Hostname contains.")] = None,
    limit: Limit = 100,
) -> None:
    params = body_of(site=site_id(site) if site else None, state=state,
                     sku=sku_id(sku) if sku else None, search=search)  # fmt: skip
    show(STATE.api.pages("/nodes", limit=limit, **params), NODE_COLUMNS)


@nodes.command("show")
def nodes_show(node: int) -> None:
    data = STATE.api.get(f"/nodes/{node}")
    if STATE.fmt != "table":
        show(data)
        return
    show(data, (*NODE_COLUMNS, "ipmi_ip", "maas_observation"))
    columns = ("kind", "id", "state", "stage", "attempt", "created_at", "reason")
    show(data["open_workflows"] + data["recent_workflows"][:5], columns, title="workflows")
    show(data["active_allocations"], ("id", "holder", "created_at"), title="active allocations")


@nodes.command("timeline")
def nodes_timeline(
    node: int,
    maas_events: Annotated[
        bool, typer.Option("--maas-events", help="Merge the machine's MAAS events.")
    ] = False,
    limit: Annotated[int, typer.Option()] = 50,
) -> None:
    page = STATE.api.get(f"/nodes/{node}/timeline", limit=limit,
                         maas_events="true" if maas_events else None)  # fmt: skip
    if STATE.fmt != "table":
        show(page)
        return
    show(page["results"], TIMELINE_COLUMNS, title=f"{page['count']} entries, newest first")
    status = page["maas_events"]
    if status["requested"] and not status["available"]:
        output.errors.print(f"MAAS events not available: {status['detail']}", markup=False)


allocations = typer.Typer(help="Tenant workloads holding nodes.")
app.add_typer(allocations, name="allocations")
ALLOCATION_COLUMNS = ("id", "node_id", "hostname", "holder", "state", "created_at", "released_at")


@allocations.command("list")
def allocations_list(
    node: Annotated[int | None, typer.Option()] = None,
    state: Annotated[str | None, typer.Option()] = None,
    limit: Limit = 100,
) -> None:
    show(STATE.api.pages("/allocations", limit=limit, node=node, state=state), ALLOCATION_COLUMNS)


@allocations.command("create")
def allocations_create(node: int, holder: Annotated[str, typer.Option()]) -> None:
    body = {"node_id": node, "holder": holder}
    show(STATE.api.call("POST", "/allocations", body), ALLOCATION_COLUMNS)


@allocations.command("release")
def allocations_release(allocation: int, reason: Annotated[str, typer.Option()] = "") -> None:
    show(STATE.api.call("POST", f"/allocations/{allocation}/release", {"reason": reason}),
         ALLOCATION_COLUMNS)  # fmt: skip


# -- workflows: onboard, onboardings, decommissions ---------------------------------------------

WF_COLUMNS = ("id", "hostname", "state", "stage", "attempt", "failure_class", "reason")
BATCH_COLUMNS = ("id", "site_id", "size", "open", "queued", "created_by", "created_at")
Interval = Annotated[float, typer.Option(help="Seconds between polls while watching.")]
Watch = Annotated[bool, typer.Option("--watch", help="Follow until it ends (Ctrl-C stops "
                                                     "watching only).")]  # fmt: skip


def watch_workflow(kind: str, pk: int, interval: float) -> None:
    try:
        wf = watch.workflow(lambda: STATE.api.get(f"/{kind}/{pk}", diagnostics="false"),
                            interval=interval)  # fmt: skip
    except KeyboardInterrupt:
        raise fail(f"stopped watching; {kind[:-1]} {pk} goes on "
                   f"(maasctl {kind} watch {pk})", INTERRUPTED) from None  # fmt: skip
    show(wf, WF_COLUMNS)
    if wf["state"] != "succeeded":
        raise typer.Exit(FAILED)


def watch_batch(pk: int, interval: float) -> None:
    try:
        summary = watch.batch(lambda: STATE.api.get(f"/onboardings/batches/{pk}"),
                              interval=interval)  # fmt: skip
    except KeyboardInterrupt:
        raise fail(f"stopped watching; batch {pk} goes on "
                   f"(maasctl onboardings batch {pk} --watch)", INTERRUPTED) from None  # fmt: skip
    counts = {k: v for k, v in summary["counts"].items() if v}
    output.console.print(f"batch {pk}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if summary["failed"]:
        output.console.print(watch.failures_table(summary["failed"]))
    if counts.get("succeeded", 0) != summary["size"]:
        raise typer.Exit(FAILED)


onboard = typer.Typer(cls=OnboardGroup, help="Onboard one host (onboard HOST ...) or a CSV "
                                             "(onboard batch FILE.csv ...).")  # fmt: skip
app.add_typer(onboard, name="onboard")
SiteOpt = Annotated[str, typer.Option("--site", help="Site id or name.")]
ProfileOpt = Annotated[str, typer.Option("--profile", help="Site profile id or name.")]
SkuOpt = Annotated[str, typer.Option("--sku", help="SKU id or code.")]


@onboard.command("host", hidden=True)
def onboard_host(
    hostname: str,
    ipmi_ip: Annotated[str, typer.Option("--ipmi-ip")],
    site: SiteOpt,
    profile: ProfileOpt,
    sku: SkuOpt,
    confirm_host: Annotated[str | None, typer.Option(help="Guarded sites: the host again.")] = None,
    watch_: Watch = False,
    interval: Interval = 3.0,
) -> None:
    pk = site_id(site)
    body = body_of(site_id=pk, profile_id=profile_id(pk, profile), sku_id=sku_id(sku),
                   hostname=hostname, ipmi_ip=ipmi_ip, confirm_host=confirm_host)  # fmt: skip
    key = csvfile.idempotency_key("onboard", body)
    wf = STATE.api.call("POST", "/onboardings", body, headers={"Idempotency-Key": key})
    show(wf, WF_COLUMNS)
    if watch_:
        watch_workflow("onboardings", wf["id"], interval)


def _row_problem(file: Path, line: object, field: str | None, reason: object) -> None:
    where = f"{file}:{line}" + (f" {field}" if field else "")
    output.errors.print(f"{where}: {reason}", markup=False, highlight=False)


def read_csv_or_fail(
    file: Path, spec: Mapping[str, csvfile.Check], *, unique: tuple[str, ...]
) -> csvfile.Rows:
    """The file's rows, or every problem with its line number and exit 1 (nothing sent)."""
    rows, errors = csvfile.read(file, spec, unique=unique)
    if errors:
        for e in errors:
            _row_problem(file, e.line, e.field, e.reason)
        raise fail(f"{len(errors)} problem(s) in {file}; nothing was sent")
    return rows


def row_errors(file: Path, rows: csvfile.Rows, exc: ApiError) -> None:
    """The server's row errors (all or nothing refused) at the file's line numbers."""
    for e in exc.body.get("rows", []):
        _row_problem(file, rows.line_of(e.get("index")), e.get("field"), e.get("reason"))


@onboard.command("batch")
def onboard_batch(
    file: Annotated[Path, typer.Argument(help="CSV with exactly: hostname,ipmi_ip")],
    site: SiteOpt,
    profile: ProfileOpt,
    sku: SkuOpt,
    watch_: Watch = False,
    interval: Interval = 3.0,
) -> None:
    """Every row is checked (with its line number) before any call; then one batch request,
    all or nothing, with an Idempotency-Key derived from the file: running it again replays
    the first answer instead of starting anything twice."""
    rows = read_csv_or_fail(file, csvfile.ONBOARD, unique=("hostname", "ipmi_ip"))
    pk = site_id(site)
    body = {"site_id": pk, "profile_id": profile_id(pk, profile), "sku_id": sku_id(sku),
            "rows": rows.rows}  # fmt: skip
    key = csvfile.idempotency_key("batch", body)
    try:
        batch = STATE.api.call("POST", "/onboardings/batch", body,
                               headers={"Idempotency-Key": key})  # fmt: skip
    except ApiError as exc:
        row_errors(file, rows, exc)
        raise
    output.console.print(f"batch {batch['id']}: {batch['size']} host(s) accepted")
    if watch_:
        watch_batch(batch["id"], interval)


def workflow_commands(kind: str, noun: str) -> typer.Typer:
    group = typer.Typer(help=f"{noun.capitalize()}s: list, show, watch, recovery verbs.")

    @group.command("list")
    def list_(
        site: Annotated[str | None, typer.Option(help="Site id or name.")] = None,
        state: Annotated[list[str] | None, typer.Option(help="State (repeat).")] = None,
        search: Annotated[str | None, typer.Option(help="Hostname contains.")] = None,
        limit: Limit = 100,
    ) -> None:
        params = body_of(site=site_id(site) if site else None, state=state, search=search)
        show(STATE.api.pages(f"/{kind}", limit=limit, **params), WF_COLUMNS)

    @group.command("show")
    def show_(
        pk: Annotated[int, typer.Argument(metavar="ID")],
        diagnostics: Annotated[str, typer.Option(help="cached, refresh or false.")] = "cached",
    ) -> None:
        data = STATE.api.get(f"/{kind}/{pk}", diagnostics=diagnostics)
        if STATE.fmt != "table":
            show(data)
            return
        show(data, (*WF_COLUMNS, "maas_system_id", "allowed_verbs", "created_at",
                    "finished_at", "timeline_count"))  # fmt: skip
        show(data["timeline"][-20:], ("at", "kind", "stage", "attempt", "message"),
             title="timeline (latest)")  # fmt: skip
        diag = data.get("diagnostics")
        if diag:
            age = diag.get("age_seconds")
            title = "diagnostics" + (f" ({age:.0f} s old)" if age is not None else "")
            show({k: v for k, v in diag.items() if k not in ("events", "installation_output",
                                                             "commissioning_results")},
                 title=title)  # fmt: skip

    @group.command("timeline")
    def timeline_(pk: Annotated[int, typer.Argument(metavar="ID")], limit: Limit = 200) -> None:
        show(STATE.api.pages(f"/{kind}/{pk}/timeline", limit=limit),
             ("at", "kind", "stage", "attempt", "actor_name", "message"))  # fmt: skip

    @group.command("watch")
    def watch_(pk: Annotated[int, typer.Argument(metavar="ID")], interval: Interval = 3.0) -> None:
        watch_workflow(kind, pk, interval)

    for verb in VERBS:
        group.command(verb, help=f"The {verb} recovery verb (docs/api.md).")(
            verb_command(kind, verb)
        )
    return group


def verb_command(kind: str, verb: str) -> Any:
    def run(
        pk: Annotated[int, typer.Argument(metavar="ID")],
        reason: Annotated[str, typer.Option(help="Why (audited).")] = "",
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan only.")] = False,
        yes: Yes = False,
    ) -> None:
        body: dict[str, Any] = {"reason": reason}
        if verb in DESTRUCTIVE and not dry_run:
            confirm(f"{verb} {kind[:-1]} {pk}", yes)
            body["confirm"] = verb == "restart-clean" or None
        answer = STATE.api.call("POST", f"/{kind}/{pk}/{verb}", body_of(**body),
                                params={"dry_run": "true" if dry_run else None})  # fmt: skip
        if dry_run:
            show(answer, ("verb", "current_state", "from_stage", "attempt", "maas_calls",
                          "preconditions"))  # fmt: skip
        else:
            show(answer, (*WF_COLUMNS, "allowed_verbs"))

    return run


onboardings = workflow_commands("onboardings", "onboarding")
app.add_typer(onboardings, name="onboardings")
decommissions = workflow_commands("decommissions", "decommission")
app.add_typer(decommissions, name="decommissions")


@onboardings.command("batches")
def onboardings_batches(
    site: Annotated[str | None, typer.Option()] = None, limit: Limit = 50
) -> None:
    """Batches with their counts per state."""
    rows = STATE.api.pages("/onboardings/batches", limit=limit,
                           site=site_id(site) if site else None)  # fmt: skip
    if STATE.fmt != "table":
        show(rows)
        return
    for row in rows:
        row["counts"] = {k: v for k, v in row["counts"].items() if v}
    show(rows, (*BATCH_COLUMNS, "counts"))


@onboardings.command("batch")
def onboardings_batch(
    pk: Annotated[int, typer.Argument(metavar="ID")],
    watch_: Watch = False,
    interval: Interval = 3.0,
) -> None:
    if watch_:
        watch_batch(pk, interval)
        return
    data = STATE.api.get(f"/onboardings/batches/{pk}")
    show(data, (*BATCH_COLUMNS, "counts"))
    if STATE.fmt == "table" and data["failed"]:
        output.console.print(watch.failures_table(data["failed"]))


@app.command("decommission")
def decommission_start(
    node: int,
    mode: Annotated[str, typer.Option(help="reimage or full.")],
    profile: Annotated[int | None, typer.Option(help="Profile id (reimage target).")] = None,
    force_release: Annotated[
        bool, typer.Option("--force-release", help="Take the node from its tenants.")
    ] = False,
    reason: Annotated[str, typer.Option()] = "",
    confirm_host: Annotated[str | None, typer.Option()] = None,
    yes: Yes = False,
    watch_: Watch = False,
    interval: Interval = 3.0,
) -> None:
    """Reimage (erase, then deploy again) or fully decommission a node."""
    if mode not in ("reimage", "full"):
        raise fail("--mode must be reimage or full")
    confirm(f"{mode} decommission of node {node}", yes)
    body = body_of(mode=mode, profile_id=profile, force_release=force_release, reason=reason,
                   confirm=True if mode == "full" else None, confirm_host=confirm_host)  # fmt: skip
    wf = STATE.api.call("POST", f"/nodes/{node}/decommission", body)
    show(wf, WF_COLUMNS)
    if watch_:
        watch_workflow("decommissions", wf["id"], interval)


@app.command("storage-cleanup")
def storage_cleanup(
    node: int,
    force_release: Annotated[bool, typer.Option("--force-release")] = False,
    reason: Annotated[str, typer.Option()] = "",
    yes: Yes = False,
) -> None:
    """Erase a node's disks and return it to its pool."""
    confirm(f"storage cleanup of node {node}", yes)
    body = {"force_release": force_release, "reason": reason}
    show(STATE.api.call("POST", f"/nodes/{node}/storage-cleanup", body), WF_COLUMNS)


# -- reconciliation, RoCE, tokens ---------------------------------------------------------------

drift = typer.Typer(help="Drift between our records and MAAS.")
app.add_typer(drift, name="drift")
DRIFT_COLUMNS = ("id", "site_id", "kind", "severity", "state", "hostname", "system_id", "message")


@drift.command("list")
def drift_list(
    site: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[str | None, typer.Option()] = None,
    state: Annotated[str | None, typer.Option()] = None,
    node: Annotated[int | None, typer.Option()] = None,
    limit: Limit = 100,
) -> None:
    params = body_of(site=site_id(site) if site else None, kind=kind, state=state, node=node)
    show(STATE.api.pages("/reconciliation/drift", limit=limit, **params), DRIFT_COLUMNS)


@drift.command("resolve")
def drift_resolve(
    node: Annotated[int | None, typer.Argument(help="The node (or --machine).")] = None,
    machine: Annotated[str | None, typer.Option(help="A MAAS system id with no node.")] = None,
    action: Annotated[
        str, typer.Option(help="acknowledge, adopt or mark-manual-intervention")
    ] = "acknowledge",
    kind: Annotated[str | None, typer.Option()] = None,
    reason: Annotated[str, typer.Option()] = "",
    expires_in: Annotated[
        int | None, typer.Option(help="Seconds an acknowledgement lasts.")
    ] = None,
) -> None:
    if (node is None) == (machine is None):
        raise fail("give a node id or --machine SYSTEM_ID")
    path = (f"/reconciliation/drift/{node}/resolve" if node is not None
            else f"/reconciliation/drift/machines/{machine}/resolve")  # fmt: skip
    body = body_of(action=action, kind=kind, reason=reason, expires_in=expires_in)
    show(STATE.api.call("POST", path, body)["resolved"], DRIFT_COLUMNS)


reconcile = typer.Typer(help="Compare our records with MAAS now, or see how it went.")
app.add_typer(reconcile, name="reconcile")


@reconcile.command("run")
def reconcile_run(site: Annotated[str | None, typer.Option()] = None) -> None:
    body = body_of(site_id=site_id(site) if site else None)
    runs = STATE.api.call("POST", "/reconciliation/run", body)["runs"]
    show(runs, ("id", "site_id", "state", "trigger", "queued_at", "reused"))


@reconcile.command("status")
def reconcile_status() -> None:
    data = STATE.api.get("/reconciliation/status")
    if STATE.fmt != "table":
        show(data)
        return
    rows = [{**s, "open_drift": s["open_drift"]["total"],
             "last_run": (s["last_run"] or {}).get("state")} for s in data["sites"]]  # fmt: skip
    show(rows, ("site_id", "site_name", "site_status", "last_run", "open_drift", "next_run_at"))


roce = typer.Typer(help="RoCE interface addresses (phase-2 RoCE).")
app.add_typer(roce, name="roce")


@roce.command("list")
def roce_list(site: SiteRef, limit: Limit = 1000) -> None:
    show(STATE.api.pages(f"/maas-sites/{site_id(site)}/roce-assignments", limit=limit),
         ("id", "hostname", "interface", "ipv4_cidr"))  # fmt: skip


@roce.command("import")
def roce_import(
    file: Annotated[Path, typer.Argument(help="CSV with exactly: hostname,interface,ipv4_cidr")],
    site: SiteOpt,
) -> None:
    """All or nothing; rows checked with their line numbers before any call."""
    rows = read_csv_or_fail(file, csvfile.ROCE, unique=("ipv4_cidr",))
    body = {"items": rows.rows}
    try:  # an upsert: sending the same file twice changes nothing the second time
        summary = STATE.api.call("POST", f"/maas-sites/{site_id(site)}/roce-assignments", body)
    except ApiError as exc:
        row_errors(file, rows, exc)
        raise
    show(summary)


tokens = typer.Typer(help="API tokens: list, create (shown once), revoke.")
app.add_typer(tokens, name="tokens")
TOKEN_COLUMNS = ("id", "name", "user", "prefix", "scope", "last_used_at", "expires_at", "active")


@tokens.command("list")
def tokens_list(limit: Limit = 100) -> None:
    show(STATE.api.pages("/tokens", limit=limit), TOKEN_COLUMNS)


@tokens.command("create")
def tokens_create(
    name: str,
    scope: Annotated[str, typer.Option(help="read, operate or admin.")] = "read",
    expires_in_days: Annotated[int | None, typer.Option(help="Default: the server's.")] = None,
) -> None:
    """Create a token for yourself. It is printed once (to stdout alone with -o json or yaml)."""
    body = body_of(name=name, scope=scope, expires_in_days=expires_in_days)
    made = STATE.api.call("POST", "/tokens", body)
    if STATE.fmt != "table":
        show(made)
        return
    show({k: v for k, v in made.items() if k != "token"}, TOKEN_COLUMNS)
    output.errors.print("The token (shown only now):", markup=False)
    output.console.print(made["token"], markup=False, highlight=False, soft_wrap=True)


@tokens.command("revoke")
def tokens_revoke(
    token: int, reason: Annotated[str, typer.Option()] = "", yes: Yes = False
) -> None:
    confirm(f"revoke token {token}", yes)
    show(STATE.api.call("POST", f"/tokens/{token}/revoke", {"reason": reason}), TOKEN_COLUMNS)


def main() -> None:
    """The console script: ``maasctl`` (pyproject.toml)."""
    app()

"""The site probe: can the control plane work against this MAAS right now?

Checks, each with ok/failed, a detail and a duration: connectivity (version), authentication
(whoami, admin, expected user), version and capabilities, boot resources for every active
profile's architecture and distro series, the PXE subnets the site and profiles name, the
site's power credentials, and node trust (the node API URL and CA bundle its nodes get,
maas_domain/nodetrust.py). A pending MAAS API key (a rotation) is tried first and, if MAAS accepts
it, becomes the key in use. Nothing here raises for a MAAS problem: an unreachable, slow or
refusing MAAS gives a failed check, never a 500. No row lock is held across HTTP calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from celery import current_app, shared_task
from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from maas_client.client import MaasClient
from maas_client.errors import MaasAuthError, MaasError, excerpt
from maas_client.types import BootResource, Subnet
from maas_domain import access, audit, context, errors, regions
from maas_domain.access import Action
from maas_domain.errors import DomainError, Forbidden, NotFound, ServiceUnavailable
from maas_domain.models import CredentialKind, MaasSite, SiteCredential, SiteProfile
from maas_domain.models.sites import ProfileStatus, SiteHealth
from maas_domain.nodetrust import trust_problems, trust_summary
from maas_domain.secrets import SecretsError, get_backend
from maas_domain.secrets.sites import unconfirmed_message
from maas_domain.services.credentials import confirm_url_matches, credentials_confirm_url
from maas_domain.site_client import anonymous_client_for_site, client_for_site

PROBE_EXCERPT = 160  # characters kept of what a server said (docs/security.md)
REQUIRED_CAPABILITIES = ("authenticate-api", "network-deployment-ubuntu")
MIN_MAJOR_VERSION = 3


def _timeouts() -> dict[str, Any]:
    return {
        "connect_timeout": min(3.0, settings.MAAS_PROBE_TIMEOUT),
        "read_timeout": settings.MAAS_PROBE_TIMEOUT,
        "read_attempts": 1,
        "deadline": settings.MAAS_PROBE_TIMEOUT + 5,
    }


# Without these the control plane cannot act at all; other failures leave the site degraded.
CRITICAL = ("connectivity", "authentication")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    duration_ms: float


class _Run:
    def __init__(self) -> None:
        self.checks: list[Check] = []

    def check(self, name: str, fn: Callable[[], str]) -> bool:
        """Run one check; ``fn`` returns its detail or raises ``CheckFailed``/``MaasError``."""
        started = time.monotonic()
        try:
            detail, ok = fn(), True
        except CheckFailed as exc:
            detail, ok = excerpt(str(exc), 2 * PROBE_EXCERPT), False
        except MaasError as exc:
            detail, ok = f"{exc.kind}: {excerpt(exc.message, PROBE_EXCERPT)}", False
        self.checks.append(Check(name, ok, detail, round((time.monotonic() - started) * 1000, 1)))
        return ok

    def skip(self, name: str, why: str) -> None:
        self.checks.append(Check(name, False, f"not checked: {why}", 0.0))


class CheckFailed(Exception):
    pass


def _key(ref: SiteCredential | None, version: int | None) -> str | None:
    if ref is None or version is None:
        return None
    try:
        return get_backend().read(ref.path, version)["api_key"]
    except SecretsError as exc:
        raise CheckFailed(f"cannot read the MAAS API key from the secrets backend: {exc}") from exc


def site_probe(
    *,
    actor: audit.Actor,
    site_id: int,
    confirm_maas_url: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Probe the site. ``confirm_maas_url`` (the site's current MAAS URL) is an admin's
    confirmation that its API key may be sent there after the URL or TLS setting changed: the
    probe then uses the key there, and the confirmation is recorded with the probe's result
    only if MAAS authenticated it (docs/security.md, T2). ``dry_run``: the same checks,
    nothing stored or promoted, and the key never sent to an address that is not confirmed yet
    (docs/api.md, "Dry runs")."""
    site = MaasSite.objects.filter(pk=site_id).first()
    if site is None:
        raise NotFound(f"Site {site_id} not found.")
    confirming = confirm_maas_url is not None and not dry_run
    if confirm_maas_url is not None:
        if not access.allowed(actor, Action.ADMIN):
            raise Forbidden(
                "Confirming a new MAAS address sends the site's API key there: an admin action."
            )
        confirm_url_matches(site=site, confirm_maas_url=confirm_maas_url)
    profiles = list(SiteProfile.objects.filter(site=site, status=ProfileStatus.ACTIVE))
    creds = {c.kind: c for c in SiteCredential.objects.filter(site=site)}
    auth = _Auth(site, creds.get(CredentialKind.MAAS_API_KEY), confirming, dry_run,
                 unconfirmed_dry_run=dry_run and confirm_maas_url is not None)  # fmt: skip
    run = _Run()
    try:
        _maas_checks(run, site, profiles, auth)
    finally:
        if auth.client is not None:
            auth.client.close()
    run.check("power_credentials", lambda: _power(creds))
    run.check("node_trust", lambda: _node_trust(site))
    if dry_run:
        _, result, _ = _outcome(run)
        return {
            "site_id": site.pk,
            **result,
            "dry_run": True,
            "would_confirm_key_version": auth.promoted,
        }
    return _record(actor=actor, site=site, run=run, promoted=auth.promoted, confirming=confirming)


AFTER_AUTH = ("version", "boot_resources", "pxe_subnets", "testing_scripts")


def _maas_checks(run: _Run, site: MaasSite, profiles: list[SiteProfile], auth: _Auth) -> None:
    """Connectivity first, on its own, so an unreachable MAAS is named as such; then the key;
    then what needs an authenticated client (each skipped, naming why, when it cannot run)."""
    if not run.check("connectivity", lambda: _reachable(site)):
        for name in ("authentication", *AFTER_AUTH):
            run.skip(name, "MAAS is unreachable")
        return
    if not run.check("authentication", auth.connect) or auth.client is None:
        for name in AFTER_AUTH:
            run.skip(name, "not authenticated")
        return
    maas = auth.client
    run.check("version", lambda: _version(maas))
    run.check("boot_resources", lambda: _boot_resources(profiles, maas.boot_resources()))
    run.check("pxe_subnets", lambda: _pxe_subnets(site, profiles, maas.subnets()))
    run.check("testing_scripts", lambda: _testing_scripts(site, profiles, maas))


class _Auth:
    """The authentication check: a pending (rotated) key first, then the confirmed one; the
    client of the one MAAS accepted (``client``) and a pending version it confirmed
    (``promoted``)."""

    def __init__(
        self,
        site: MaasSite,
        key_ref: SiteCredential | None,
        confirming: bool,
        dry_run: bool,
        *,
        unconfirmed_dry_run: bool,
    ) -> None:
        self.site, self.key_ref, self.confirming = site, key_ref, confirming
        self.dry_run, self.unconfirmed_dry_run = dry_run, unconfirmed_dry_run
        self.client: MaasClient | None = None
        self.promoted: int | None = None

    def candidates(self) -> list[int]:
        ref = self.key_ref
        if ref is not None and not ref.bound_to(self.site) and not self.confirming:
            if self.unconfirmed_dry_run:
                raise CheckFailed(
                    "not checked: a dry run never sends the API key to an address that is not "
                    "confirmed yet (without dry_run the confirmation is recorded first)"
                )
            raise CheckFailed(unconfirmed_message(self.site))
        found = [v for v in (ref.pending_version, ref.version) if v] if ref is not None else []
        if not found:
            raise CheckFailed("no MAAS API key is set for this site")
        return found

    def connect(self) -> str:
        ref, site = self.key_ref, self.site
        last_error: MaasError | None = None
        rejected = ""
        for version in self.candidates():
            key = _key(ref, version)
            assert key is not None and ref is not None
            self.client = client_for_site(site, api_key=key, **_timeouts())
            try:
                self.client.version()
                user = self.client.whoami()
            except MaasAuthError as exc:
                last_error = exc
                if version == ref.pending_version:
                    rejected = f" (new key version {version} was rejected; it stays pending)"
                continue
            if version == ref.pending_version:
                self.promoted = version
            if not user.is_superuser:
                raise CheckFailed(f"MAAS user {user.username!r} is not an administrator")
            if site.maas_user and user.username != site.maas_user:
                raise CheckFailed(
                    f"the key belongs to {user.username!r}, expected {site.maas_user!r}"
                )
            rotated = " (new key confirmed)" if self.promoted else rejected
            return f"authenticated as {user.username} (admin){rotated}"
        assert last_error is not None
        raise last_error


def _reachable(site: MaasSite) -> str:
    anonymous = anonymous_client_for_site(site, **_timeouts())
    try:
        return f"MAAS {anonymous.version().version} answered"
    finally:
        anonymous.close()


def _version(maas: MaasClient) -> str:
    info = maas.version()
    missing = [c for c in REQUIRED_CAPABILITIES if c not in info.capabilities]
    major = int(info.version.split(".")[0]) if info.version[:1].isdigit() else 0
    if major < MIN_MAJOR_VERSION:
        raise CheckFailed(f"MAAS {info.version} is older than {MIN_MAJOR_VERSION}.0")
    if missing:
        raise CheckFailed(f"MAAS {info.version} lacks capabilities: {', '.join(missing)}")
    return f"MAAS {info.version}"


def _power(creds: dict[str, SiteCredential]) -> str:
    ipmi = creds.get(CredentialKind.IPMI_DEFAULT)
    if ipmi is None or ipmi.version is None:
        raise CheckFailed("no default IPMI credentials are set for this site")
    return "default IPMI credentials set"


def _node_trust(site: MaasSite) -> str:
    if problems := trust_problems(site):
        raise CheckFailed("; ".join(f"{k}: {' '.join(v)}" for k, v in problems.items()))
    return trust_summary(site)


def _boot_resources(profiles: list[SiteProfile], resources: list[BootResource]) -> str:
    have = {(r.arch, r.series) for r in resources}
    need = {(p.architecture.split("/")[0], p.distro_series.split("/")[-1]) for p in profiles}
    missing = sorted(need - have)
    if missing:
        names = ", ".join(f"{arch}/{series}" for arch, series in missing)
        raise CheckFailed(f"no boot resource for: {names}")
    if not profiles:
        return f"{len(resources)} boot resources (no active profiles to check)"
    return f"boot resources present for {len(need)} profile target(s)"


def _pxe_subnets(site: MaasSite, profiles: list[SiteProfile], subnets: list[Subnet]) -> str:
    cidrs = {s.cidr for s in subnets}
    named = {c for c in [site.pxe_subnet, *(p.pxe_subnet for p in profiles)] if c}
    missing = sorted(named - cidrs)
    if missing:
        raise CheckFailed(f"PXE subnet(s) not in MAAS: {', '.join(missing)}")
    if not named:
        return "no PXE subnet configured (MAAS's boot interface subnet will be used)"
    return f"PXE subnet(s) present: {', '.join(sorted(named))}"


def _testing_scripts(site: MaasSite, profiles: list[SiteProfile], maas: MaasClient) -> str:
    """Every testing script the site's policy or a profile names (acceptance scripts by name
    or tag, the reachability script by name) is one MAAS has: infra registers them; the
    product never uploads a script (docs/hardware.md, "Acceptance tests")."""
    wanted: dict[str, set[str]] = {}
    for owner, policy in [("site", site.effective_policy())] + [
        (f"profile {p.name}", p.effective_policy()) for p in profiles
    ]:
        for name in (*policy.acceptance_scripts, policy.reachability_script):
            if name:
                wanted.setdefault(name, set()).add(owner)
    if not wanted:
        return "no testing scripts named by policy"
    known: set[str] = set()
    for script in maas.testing_scripts():
        known |= {script.name, *script.tags}
    missing = sorted(set(wanted) - known)
    if missing:
        raise CheckFailed(
            "not testing scripts (or tags) at this MAAS: "
            + "; ".join(f"{n} (named by {', '.join(sorted(wanted[n]))})" for n in missing)
            + "; infra registers them in MAAS"
        )
    return f"{len(wanted)} named testing script(s) present: {', '.join(sorted(wanted))}"


def _outcome(run: _Run) -> tuple[SiteHealth, dict[str, Any], set[str]]:
    """The site's health after these checks, the stored result, and the failed checks."""
    failed = {c.name for c in run.checks if not c.ok}
    if failed & set(CRITICAL):
        health = SiteHealth.UNHEALTHY
    elif failed:
        health = SiteHealth.DEGRADED
    else:
        health = SiteHealth.HEALTHY
    result = {
        "health": str(health),
        "checked_at": timezone.now().isoformat(),
        "checks": [asdict(c) for c in run.checks],
    }
    return health, result, failed


def _record(
    *, actor: audit.Actor, site: MaasSite, run: _Run, promoted: int | None, confirming: bool
) -> dict[str, Any]:
    health, result, failed = _outcome(run)
    now = timezone.now()
    with transaction.atomic():
        locked = MaasSite.objects.select_for_update().get(pk=site.pk)
        before = {"health": locked.health, "last_probe_at": locked.last_probe_at}
        locked.health = health
        locked.last_probe_at = now
        locked.probe_result = result
        locked.save(update_fields=["health", "last_probe_at", "probe_result", "updated_at"])
        after: dict[str, Any] = {"health": str(health), "failed_checks": sorted(failed)}
        if promoted is not None:
            ref = SiteCredential.objects.select_for_update().get(
                site=locked, kind=CredentialKind.MAAS_API_KEY
            )
            if ref.pending_version == promoted:
                ref.version, ref.pending_version, ref.confirmed_at = promoted, None, now
                ref.save(update_fields=["version", "pending_version", "confirmed_at"])
                after["confirmed_maas_key_version"] = promoted
        elif "authentication" not in failed:
            SiteCredential.objects.filter(
                site=locked, kind=CredentialKind.MAAS_API_KEY, confirmed_at__isnull=True
            ).update(confirmed_at=now)
        if confirming and "authentication" not in failed:
            # recorded with the probe that proved the address, never before it
            credentials_confirm_url(actor=actor, site=locked, confirm_maas_url=locked.maas_url)
            after["confirmed_maas_url"] = locked.maas_url
        audit.record(
            actor=actor, action="maas_site.probe", target=locked, before=before, after=after
        )
    return {"site_id": site.pk, **result}


# -- the probe of a site in a region --------------------------------------------------------------

PROBE_TASK = "sites.probe"


def probe_wait_seconds() -> float:
    """How long the API waits for a region's worker to probe: every check's own deadline, and
    room for the message to reach an idle worker."""
    return 6 * (settings.MAAS_PROBE_TIMEOUT + 5) + 10


def site_probe_in_region(
    *,
    actor: audit.Actor,
    site_id: int,
    confirm_maas_url: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """The probe, run where the site's MAAS is reachable: in this process for a site of the
    default region (and everywhere in the embedded stack), by a worker of the site's region
    otherwise (``sites.probe`` on its queue; this request waits for the answer). A region no
    live worker serves is a 503 at once, naming the queue to start a worker for
    (docs/operations.md, "Regions")."""
    site = MaasSite.objects.filter(pk=site_id).first()
    if site is None:
        raise NotFound(f"Site {site_id} not found.")
    queue = regions.queue_for(site.region)
    if queue == regions.central_queue():
        return site_probe(
            actor=actor, site_id=site_id, confirm_maas_url=confirm_maas_url, dry_run=dry_run
        )
    if confirm_maas_url is not None and not access.allowed(actor, Action.ADMIN):
        # decided here, with the caller's token scope, which the worker does not see
        raise Forbidden(
            "Confirming a new MAAS address sends the site's API key there: an admin action."
        )
    if not regions.served(site.region, regions.live_queues()):
        raise ServiceUnavailable(
            f"No live worker serves region {site.region!r} (queue {queue}), where the probe of "
            f"site {site.name!r} runs: start one beside its MAAS "
            f"(celery -A config worker -Q {queue}).",
            dependency="region",
            region=site.region,
        )
    actor_id = actor.pk if actor is not None and getattr(actor, "is_authenticated", False) else None
    sent = current_app.send_task(
        PROBE_TASK,
        (actor_id, context.api_token_id.get(), site_id, confirm_maas_url, dry_run),
        queue=queue,
    )
    wait = probe_wait_seconds()
    try:
        answer: dict[str, Any] = sent.get(timeout=wait)
    except CeleryTimeout:
        raise ServiceUnavailable(
            f"The worker of region {site.region!r} did not answer the probe within {wait:.0f} s "
            "(all its processes busy, or it stopped); the site's health shows the result when "
            "the probe runs.",
            dependency="region",
            region=site.region,
        ) from None
    finally:
        sent.forget()
    if "error" in answer:
        error = getattr(errors, answer["error"], DomainError)
        raise error(answer["message"], **answer.get("extra", {}))
    return dict(answer["result"])


@shared_task(name=PROBE_TASK, ignore_result=False)
def probe_task(
    actor_id: int | None,
    token_id: int | None,
    site_id: int,
    confirm_maas_url: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    """A region worker's side of ``site_probe_in_region``: the caller's identity (for the audit
    row), then the probe; a refusal travels back as data and is raised again in the API."""
    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id else None
    bound = context.api_token_id.set(token_id)
    try:
        result = site_probe(
            actor=actor, site_id=site_id, confirm_maas_url=confirm_maas_url, dry_run=dry_run
        )
    except DomainError as exc:
        return {"error": type(exc).__name__, "message": exc.message, "extra": exc.extra}
    finally:
        context.api_token_id.reset(bound)
    return {"result": result}

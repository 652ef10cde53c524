"""Sites and profiles: create, update (merge-patch of policy), disable."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction

from maas_domain import audit, dryrun, locks, urlsafety
from maas_domain.errors import Conflict, DomainError, InvalidInput, MaasInUse
from maas_domain.models import MaasSite, SiteProfile
from maas_domain.models.sites import ProfileStatus, SiteStatus
from maas_domain.nodetrust import trust_problems
from maas_domain.pki import ca_bundle_error
from maas_domain.policy import merge_policy, validate_policy
from maas_domain.regions import SITE_MOVED, in_flight_on_site
from maas_domain.services.common import audited_update
from maas_domain.services.credentials import credentials_unbind_on_change, site_secrets_to_region
from maas_domain.validators import hostname_error, region_error
from maas_domain.work import open_workflows

MAX_APPROVED_HOSTS = 1000
# A change to these is refused when it leaves the site's nodes unable to trust the control
# plane (a site that lost its trust otherwise, e.g. its deployment CA removed, can still be
# edited and disabled; its probe reports it).
TRUST_FIELDS = {"ca_bundle_pem", "node_api_url"}
SITE_URLS_LOCK = "maas-site-urls"  # held while a site's MAAS URL is checked and saved


def _refuse_if_open(label: str, **filters: Any) -> None:
    open_now = open_workflows(**filters)
    if open_now:
        raise Conflict(
            f"{label} has open workflows; finish or cancel them first.",
            open_workflows=open_now,
        )


def _check_site_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The region is a region name; the CA bundle parses (certificates only, none expired);
    the first-live-run guard's approved hosts are valid hostnames (duplicates dropped, order
    kept)."""
    errors: dict[str, list[str]] = {}
    if "region" in data and (reason := region_error(data["region"])):
        errors["region"] = [reason]
    if "ca_bundle_pem" in data and (reason := ca_bundle_error(data["ca_bundle_pem"])):
        errors["ca_bundle_pem"] = [reason]
    if "approved_hosts" in data:
        hosts = data["approved_hosts"]
        if not isinstance(hosts, list):
            errors["approved_hosts"] = ["Must be a list of hostnames."]
        elif len(hosts) > MAX_APPROVED_HOSTS:
            errors["approved_hosts"] = [f"At most {MAX_APPROVED_HOSTS} hosts."]
        else:
            for i, host in enumerate(hosts):
                if reason := hostname_error(host):
                    errors[f"approved_hosts[{i}]"] = [reason]
            if not errors:
                data = {**data, "approved_hosts": list(dict.fromkeys(hosts))}
    if errors:
        raise InvalidInput("Invalid input.", fields=errors)
    return data


def _bundle_errors(site: MaasSite, policy: dict[str, Any], field: str) -> dict[str, list[str]]:
    """The bundle URL of ``policy`` under ``site``'s rules (https, allowlist, no metadata)."""
    ref = policy.get("bootstrap_bundle_ref")
    if ref and (reason := urlsafety.check(ref, urlsafety.site_rules(site))):
        return {f"{field}.bootstrap_bundle_ref": [reason]}
    return {}


def _site_url_errors(site: MaasSite) -> dict[str, list[str]]:
    """What nodes of ``site`` would fetch must follow the site's URL rules (docs/security.md):
    its node API URL, its own bundle, and every profile's bundle override."""
    if reason := urlsafety.hosts_error(site.payload_allowed_hosts):
        return {"payload_allowed_hosts": [reason]}
    errors: dict[str, list[str]] = {}
    maas_rules = urlsafety.UrlRules(
        schemes=("http", "https"), allow_link_local=urlsafety.link_local_allowed()
    )
    if site.maas_url and (reason := urlsafety.check(site.maas_url, maas_rules)):
        errors["maas_url"] = [reason]
    elif (
        settings.PRODUCTION
        and urlsplit(site.maas_url).scheme == "http"
        and not site.maas_allow_http
    ):
        errors["maas_url"] = [
            "Plain http sends the API key's signature and the IPMI passwords in the clear: use "
            "https, or set maas_allow_http for this site."
        ]
    node_url = site.node_api_url
    if node_url:
        reason = urlsafety.check(node_url, urlsafety.site_rules(site))
        if not reason and (urlsplit(node_url).query or "%" in node_url):
            reason = "The node API URL is a base URL: no query and no %-escapes."
        if reason:
            errors["node_api_url"] = [reason]
    errors |= _bundle_errors(site, site.policy, "policy")
    if site.pk is not None:
        for profile in SiteProfile.objects.filter(site_id=site.pk).exclude(policy_overrides={}):
            for key, reasons in _bundle_errors(site, profile.policy_overrides, "x").items():
                errors.setdefault("policy", []).append(
                    f"profile {profile.name}: {key.split('.', 1)[1]}: {reasons[0]}"
                )
    return errors


def _refuse_region_change(site: MaasSite, region: str) -> None:
    """A site changes region only while none of its work may sit in the old region's queue or
    run in its worker (docs/operations.md, "Moving a site to another region"): otherwise a step
    sent to the old queue would run there, or wait for a worker that no longer serves the site.
    Pending and manual-intervention workflows move with the site: they are sent to a queue only
    when admitted (admission reads the region under the same row lock as this change)."""
    in_flight = in_flight_on_site(site.pk)
    if in_flight:
        raise Conflict(
            f"Site {site.name!r} has work in region {site.region!r} "
            f"({_describe(in_flight)}); let it finish or cancel it before moving the site to "
            f"region {region!r}.",
            open_work=in_flight,
        )


def _describe(work: list[dict[str, Any]]) -> str:
    named = [f"{w['kind']} {w['id']} ({w['state']})" for w in work[:5]]
    more = f" and {len(work) - 5} more" if len(work) > 5 else ""
    return ", ".join(named) + more


# -- one MAAS, one site (docs/api.md, "One MAAS, one site") -----------------------------------


def maas_endpoint(url: str) -> str:
    """What makes two MAAS URLs one region: the host (case-insensitive), the port (the scheme's
    default when absent) and the path without its trailing slash. The scheme is not part of it:
    http and https on one host and port are one MAAS."""
    parts = urlsplit(str(url).strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return f"{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"


def sites_on_maas(url: str, *, exclude: int | None = None) -> list[MaasSite]:
    """The sites, not disabled, whose MAAS URL is the same region as ``url`` (a short scan:
    sites are tens, not thousands)."""
    endpoint = maas_endpoint(url)
    rows = MaasSite.objects.exclude(status=SiteStatus.DISABLED).order_by("id")
    if exclude is not None:
        rows = rows.exclude(pk=exclude)
    return [s for s in rows.only("id", "name", "maas_url") if maas_endpoint(s.maas_url) == endpoint]


def shared_maas_names(value: Any) -> list[str]:
    """``share_maas_with`` as a list of site names (a comma-separated string is accepted: the
    admin's form field)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    return [str(n).strip() for n in value if str(n).strip()]


def shared_maas_refusal(
    url: str, share_with: Any, *, exclude: int | None = None
) -> DomainError | None:
    """Why a site on ``url`` may not be saved, or None: another site uses that MAAS and the
    request does not name it in ``share_with`` (each such site must be named), or it names a
    site that is not on that MAAS (a confirmation must be about what it confirms)."""
    others = sites_on_maas(url, exclude=exclude)
    named = shared_maas_names(share_with)
    on_maas = {s.name for s in others}
    strangers = [n for n in named if n not in on_maas]
    if strangers:
        listed = ", ".join(repr(n) for n in strangers)
        where = ", ".join(repr(n) for n in sorted(on_maas)) or "no other site"
        return InvalidInput(
            "Invalid input.",
            fields={"share_maas_with": [f"{listed} is not a site on this MAAS (on it: {where})."]},
        )
    missing = [s for s in others if s.name not in named]
    if not missing:
        return None
    names = ", ".join(repr(s.name) for s in missing)
    noun = "site" if len(missing) == 1 else "sites"
    return MaasInUse(
        f"The MAAS at {url} is already used by {noun} {names}: two sites on one MAAS can each "
        "onboard the same machine, and each reports the other's machines as drift. Give this "
        f"site a MAAS of its own, or confirm sharing it with share_maas_with: {names}.",
        sites_on_maas=[{"id": s.pk, "name": s.name, "maas_url": s.maas_url} for s in others],
    )


def maas_check_needed(before: dict[str, Any], url: str, status: str, share_with: Any) -> bool:
    """Whether saving a site changed from ``before`` (its ``maas_url`` and ``status``) must pass
    the one-MAAS check: a new site (``before`` empty), a MAAS URL naming another region, a
    disabled site enabled, or a share confirmed explicitly."""
    if not before:
        return True
    moved = maas_endpoint(before.get("maas_url", "")) != maas_endpoint(url)
    enabled = before.get("status") == SiteStatus.DISABLED and status != SiteStatus.DISABLED
    return moved or enabled or bool(shared_maas_names(share_with))


def _shared_reason(url: str, share_with: Any, *, exclude: int | None = None) -> str:
    """The audit reason of a confirmed share (empty when the MAAS is the site's alone)."""
    names = [s.name for s in sites_on_maas(url, exclude=exclude)]
    return f"shares its MAAS with {', '.join(names)} (confirmed)" if names else ""


def _refuse(errors: dict[str, list[str]]) -> None:
    if errors:
        raise InvalidInput("Invalid input.", fields=errors)


def site_create(*, actor: audit.Actor, data: dict[str, Any]) -> MaasSite:
    """Create a site. ``data['policy']`` holds explicit policy keys (validated here).
    ``data['share_maas_with']`` names the sites already on its MAAS, when it shares one."""
    data = dict(data)
    share_with = data.pop("share_maas_with", None)
    data = _check_site_fields(data)
    data["policy"] = merge_policy({}, validate_policy(data.get("policy", {})))
    draft = MaasSite(**data)
    # nodes of a new site must be able to reach and trust us: refused here, never at preflight
    _refuse(_site_url_errors(draft) | trust_problems(draft))
    with transaction.atomic():
        locks.hold(SITE_URLS_LOCK)  # two creates on one MAAS at once: the second sees the first
        if refusal := shared_maas_refusal(draft.maas_url, share_with):
            raise refusal
        reason = _shared_reason(draft.maas_url, share_with)
        try:
            with transaction.atomic():
                site = MaasSite.objects.create(**data)
        except IntegrityError as exc:
            raise Conflict(f"A site named {data.get('name')!r} already exists.") from exc
        audit.record(
            actor=actor,
            action="maas_site.create",
            target=site,
            after=audit.snapshot(site),
            reason=reason,
        )
    return site


def _update_policy_holder(
    *,
    actor: audit.Actor,
    queryset: Any,
    pk: int,
    kind: str,
    policy_attr: str,
    changes: dict[str, Any],
    expected_revision: int | None,
    unique_message: str,
    url_errors: Any,
    also: Any = None,
) -> Any:
    """Update a site or a profile: ``policy_attr`` is a merge-patch, and disabling is refused
    while open workflows use the row (``kind`` is both the audit prefix and the filter name).
    ``url_errors(row)`` checks the changed row's URLs (nothing is saved when it finds any);
    ``also(row, before)``, when given, checks the changed row further (it raises to refuse) and
    returns a reason for the audit row."""
    changes = dict(changes)
    patch = (
        validate_policy(changes.pop(policy_attr), field_name=policy_attr)
        if policy_attr in changes
        else None
    )
    disabling = changes.get("status") == "disabled"
    reasons: list[str] = []

    def apply(row: Any) -> None:
        if disabling and row.status != "disabled":
            _refuse_if_open(f"{kind.capitalize()} {row.name!r}", **{kind: row})
        moving_from = None
        if kind == "site" and "region" in changes and changes["region"] != row.region:
            _refuse_region_change(row, changes["region"])
            moving_from = row.region
        before = {key: getattr(row, key) for key in changes}
        for key, value in changes.items():
            setattr(row, key, value)
        if moving_from is not None and not dryrun.active():
            # its secrets follow it: the new region's workers read only their region's prefix
            site_secrets_to_region(row)
            for moved in SITE_MOVED:
                moved(row, moving_from)
        if patch is not None:
            setattr(row, policy_attr, merge_policy(getattr(row, policy_attr), patch))
        _refuse(url_errors(row))
        if also is not None:
            reasons.append(also(row, before))
        if kind == "site" and {"maas_url", "verify_tls"} & set(changes):
            reasons.append(
                credentials_unbind_on_change(
                    site=row,
                    before={k: before.get(k, getattr(row, k)) for k in ("maas_url", "verify_tls")},
                )
            )

    return audited_update(
        actor=actor,
        queryset=queryset,
        pk=pk,
        label=kind.capitalize(),
        action=f"maas_{kind}.{'disable' if disabling else 'update'}",
        expected_revision=expected_revision,
        apply=apply,
        unique_message=unique_message,
        reason=lambda: "; ".join(r for r in reasons if r),
    )


def site_update(
    *,
    actor: audit.Actor,
    site_id: int,
    changes: dict[str, Any],
    expected_revision: int | None = None,
) -> MaasSite:
    """Update fields; ``policy`` is a merge-patch (null unsets). Disabling checks open work.
    A new MAAS URL, or enabling a disabled site, is refused while another site uses that MAAS
    unless ``changes['share_maas_with']`` names it."""
    changes = dict(changes)
    share_with = changes.pop("share_maas_with", None)
    changes = _check_site_fields(changes)

    def one_site_per_maas(row: MaasSite, before: dict[str, Any]) -> str:
        old = {"maas_url": row.maas_url, "status": row.status, **before}
        if not maas_check_needed(old, row.maas_url, row.status, share_with):
            return ""
        locks.hold(SITE_URLS_LOCK)
        if refusal := shared_maas_refusal(row.maas_url, share_with, exclude=row.pk):
            raise refusal
        return _shared_reason(row.maas_url, share_with, exclude=row.pk)

    site: MaasSite = _update_policy_holder(
        actor=actor,
        queryset=MaasSite.objects.all(),
        pk=site_id,
        kind="site",
        policy_attr="policy",
        changes=changes,
        expected_revision=expected_revision,
        unique_message=f"A site named {changes.get('name')!r} already exists.",
        url_errors=lambda row: (
            _site_url_errors(row) | (trust_problems(row) if TRUST_FIELDS & set(changes) else {})
        ),
        also=one_site_per_maas,
    )
    return site


def site_disable(
    *, actor: audit.Actor, site_id: int, expected_revision: int | None = None
) -> MaasSite:
    return site_update(
        actor=actor,
        site_id=site_id,
        changes={"status": SiteStatus.DISABLED},
        expected_revision=expected_revision,
    )


def profile_create(*, actor: audit.Actor, site: MaasSite, data: dict[str, Any]) -> SiteProfile:
    data = dict(data)
    data["policy_overrides"] = merge_policy(
        {}, validate_policy(data.get("policy_overrides", {}), field_name="policy_overrides")
    )
    _refuse(_bundle_errors(site, data["policy_overrides"], "policy_overrides"))
    with transaction.atomic():
        try:
            with transaction.atomic():
                profile = SiteProfile.objects.create(site=site, **data)
        except IntegrityError as exc:
            raise Conflict(
                f"Site {site.name!r} already has a profile named {data.get('name')!r}."
            ) from exc
        audit.record(
            actor=actor, action="maas_profile.create", target=profile, after=audit.snapshot(profile)
        )
    return profile


def profile_update(
    *,
    actor: audit.Actor,
    site: MaasSite,
    profile_id: int,
    changes: dict[str, Any],
    expected_revision: int | None = None,
) -> SiteProfile:
    """Update fields; ``policy_overrides`` is a merge-patch. Disabling checks open work."""
    profile: SiteProfile = _update_policy_holder(
        actor=actor,
        queryset=SiteProfile.objects.filter(site=site),
        pk=profile_id,
        kind="profile",
        policy_attr="policy_overrides",
        changes=changes,
        expected_revision=expected_revision,
        unique_message=f"Site {site.name!r} already has a profile named {changes.get('name')!r}.",
        url_errors=lambda row: _bundle_errors(site, row.policy_overrides, "policy_overrides"),
    )
    return profile


def profile_disable(
    *, actor: audit.Actor, site: MaasSite, profile_id: int, expected_revision: int | None = None
) -> SiteProfile:
    return profile_update(
        actor=actor,
        site=site,
        profile_id=profile_id,
        changes={"status": ProfileStatus.DISABLED},
        expected_revision=expected_revision,
    )

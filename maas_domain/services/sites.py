"""Sites and profiles: create, update (merge-patch of policy), disable."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction

from maas_domain import audit, dryrun, urlsafety
from maas_domain.errors import Conflict, InvalidInput
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


def _refuse(errors: dict[str, list[str]]) -> None:
    if errors:
        raise InvalidInput("Invalid input.", fields=errors)


def site_create(*, actor: audit.Actor, data: dict[str, Any]) -> MaasSite:
    """Create a site. ``data['policy']`` holds explicit policy keys (validated here)."""
    data = _check_site_fields(dict(data))
    data["policy"] = merge_policy({}, validate_policy(data.get("policy", {})))
    draft = MaasSite(**data)
    # nodes of a new site must be able to reach and trust us: refused here, never at preflight
    _refuse(_site_url_errors(draft) | trust_problems(draft))
    with transaction.atomic():
        try:
            with transaction.atomic():
                site = MaasSite.objects.create(**data)
        except IntegrityError as exc:
            raise Conflict(f"A site named {data.get('name')!r} already exists.") from exc
        audit.record(
            actor=actor, action="maas_site.create", target=site, after=audit.snapshot(site)
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
) -> Any:
    """Update a site or a profile: ``policy_attr`` is a merge-patch, and disabling is refused
    while open workflows use the row (``kind`` is both the audit prefix and the filter name).
    ``url_errors(row)`` checks the changed row's URLs (nothing is saved when it finds any)."""
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
    """Update fields; ``policy`` is a merge-patch (null unsets). Disabling checks open work."""
    changes = _check_site_fields(dict(changes))
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

"""Sites and profiles: create, update (merge-patch of policy), disable."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from maas_domain import audit, workflows
from maas_domain.errors import Conflict
from maas_domain.models import MaasSite, SiteProfile
from maas_domain.models.sites import ProfileStatus, SiteStatus
from maas_domain.policy import merge_policy, validate_policy
from maas_domain.services.common import audited_update


def _refuse_if_open(label: str, **filters: Any) -> None:
    open_now = workflows.open_workflows(**filters)
    if open_now:
        raise Conflict(
            f"{label} has open workflows; finish or cancel them first.",
            open_workflows=open_now,
        )


def site_create(*, actor: audit.Actor, data: dict[str, Any]) -> MaasSite:
    """Create a site. ``data['policy']`` holds explicit policy keys (validated here)."""
    data = dict(data)
    data["policy"] = merge_policy({}, validate_policy(data.get("policy", {})))
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
) -> Any:
    """Update a site or a profile: ``policy_attr`` is a merge-patch, and disabling is refused
    while open workflows use the row (``kind`` is both the audit prefix and the filter name)."""
    changes = dict(changes)
    patch = (
        validate_policy(changes.pop(policy_attr), field_name=policy_attr)
        if policy_attr in changes
        else None
    )
    disabling = changes.get("status") == "disabled"

    def apply(row: Any) -> None:
        if disabling and row.status != "disabled":
            _refuse_if_open(f"{kind.capitalize()} {row.name!r}", **{kind: row})
        for key, value in changes.items():
            setattr(row, key, value)
        if patch is not None:
            setattr(row, policy_attr, merge_policy(getattr(row, policy_attr), patch))

    return audited_update(
        actor=actor,
        queryset=queryset,
        pk=pk,
        label=kind.capitalize(),
        action=f"maas_{kind}.{'disable' if disabling else 'update'}",
        expected_revision=expected_revision,
        apply=apply,
        unique_message=unique_message,
    )


def site_update(
    *,
    actor: audit.Actor,
    site_id: int,
    changes: dict[str, Any],
    expected_revision: int | None = None,
) -> MaasSite:
    """Update fields; ``policy`` is a merge-patch (null unsets). Disabling checks open work."""
    site: MaasSite = _update_policy_holder(
        actor=actor,
        queryset=MaasSite.objects.all(),
        pk=site_id,
        kind="site",
        policy_attr="policy",
        changes=changes,
        expected_revision=expected_revision,
        unique_message=f"A site named {changes.get('name')!r} already exists.",
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

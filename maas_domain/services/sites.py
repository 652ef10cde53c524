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


def site_update(
    *,
    actor: audit.Actor,
    site_id: int,
    changes: dict[str, Any],
    expected_revision: int | None = None,
) -> MaasSite:
    """Update fields; ``policy`` is a merge-patch (null unsets). Disabling checks open work."""
    changes = dict(changes)
    policy_patch = validate_policy(changes.pop("policy")) if "policy" in changes else None

    def apply(site: MaasSite) -> None:
        if changes.get("status") == SiteStatus.DISABLED and site.status != SiteStatus.DISABLED:
            _refuse_if_open(f"Site {site.name!r}", site=site)
        for key, value in changes.items():
            setattr(site, key, value)
        if policy_patch is not None:
            site.policy = merge_policy(site.policy, policy_patch)

    action = (
        "maas_site.disable"
        if changes.get("status") == SiteStatus.DISABLED
        else ("maas_site.update")
    )
    return audited_update(
        actor=actor,
        queryset=MaasSite.objects.all(),
        pk=site_id,
        label="Site",
        action=action,
        expected_revision=expected_revision,
        apply=apply,
        unique_message=f"A site named {changes.get('name')!r} already exists.",
    )


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
    changes = dict(changes)
    patch = (
        validate_policy(changes.pop("policy_overrides"), field_name="policy_overrides")
        if "policy_overrides" in changes
        else None
    )

    def apply(profile: SiteProfile) -> None:
        if (
            changes.get("status") == ProfileStatus.DISABLED
            and profile.status != ProfileStatus.DISABLED
        ):
            _refuse_if_open(f"Profile {profile.name!r}", profile=profile)
        for key, value in changes.items():
            setattr(profile, key, value)
        if patch is not None:
            profile.policy_overrides = merge_policy(profile.policy_overrides, patch)

    action = (
        "maas_profile.disable"
        if changes.get("status") == ProfileStatus.DISABLED
        else "maas_profile.update"
    )
    return audited_update(
        actor=actor,
        queryset=SiteProfile.objects.filter(site=site),
        pk=profile_id,
        label="Profile",
        action=action,
        expected_revision=expected_revision,
        apply=apply,
        unique_message=f"Site {site.name!r} already has a profile named {changes.get('name')!r}.",
    )


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

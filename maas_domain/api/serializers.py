"""Request/response shapes. Serializers check shape only; services enforce business rules."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from maas_domain.models import MaasSite, RoceAssignment, SiteProfile
from maas_domain.policy import policy_sources, resolve_policy
from maas_domain.validators import interface_error, ipv4_subnet_error


class StrictMixin:
    """Reject unknown and read-only fields instead of silently ignoring them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            fields = self.fields  # type: ignore[attr-defined]
            errors = {}
            for key in data:
                if key not in fields:
                    errors[key] = ["Unknown field."]
                elif fields[key].read_only:
                    errors[key] = ["This field is read-only."]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]


def _validator(check: Any) -> Any:
    def run(value: Any) -> Any:
        if value and (reason := check(value)):
            raise serializers.ValidationError(reason)
        return value

    return run


class PolicyField(serializers.JSONField):
    """A JSON object of policy keys; contents are validated by the service (one catalogue)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be an object.")
        return data


class SiteSerializer(StrictMixin, serializers.ModelSerializer[MaasSite]):
    # Declared so that uniqueness is the service's 409, not a serializer 400.
    name = serializers.SlugField(max_length=63)
    maas_url = serializers.URLField(max_length=500, help_text="e.g. http://maas:5240/MAAS/")
    pxe_subnet = serializers.CharField(
        required=False, allow_blank=True, validators=[_validator(ipv4_subnet_error)]
    )
    policy = PolicyField(required=False)
    effective_policy = serializers.SerializerMethodField()
    policy_sources = serializers.SerializerMethodField()
    credentials = serializers.SerializerMethodField()

    class Meta:
        model = MaasSite
        fields = [
            "id",
            "name",
            "description",
            "maas_url",
            "maas_user",
            "verify_tls",
            "pxe_subnet",
            "status",
            "policy",
            "effective_policy",
            "policy_sources",
            "health",
            "last_probe_at",
            "probe_result",
            "credentials",
            "revision",
            "created_at",
            "updated_at",
        ]
        read_only_fields = [
            "id",
            "health",
            "last_probe_at",
            "probe_result",
            "revision",
            "created_at",
            "updated_at",
        ]

    def get_effective_policy(self, site: MaasSite) -> dict[str, Any]:
        return resolve_policy(site.policy).as_dict()

    def get_policy_sources(self, site: MaasSite) -> dict[str, str]:
        return policy_sources(site.policy)

    def get_credentials(self, site: MaasSite) -> dict[str, Any]:
        """Metadata only, from prefetched rows (no query per site)."""
        by_kind = {c.kind: c.metadata() for c in site.credentials.all()}
        return {
            "maas_api_key": by_kind.get("maas_api_key"),
            "ipmi": by_kind.get("ipmi_default"),
            "power_override_count": getattr(site, "power_override_count", None),
        }


class ProfileSerializer(StrictMixin, serializers.ModelSerializer[SiteProfile]):
    site_id = serializers.IntegerField(read_only=True)
    pxe_subnet = serializers.CharField(
        required=False, allow_blank=True, validators=[_validator(ipv4_subnet_error)]
    )
    pxe_interface = serializers.CharField(
        required=False, allow_blank=True, validators=[_validator(interface_error)]
    )
    policy_overrides = PolicyField(required=False)
    effective_policy = serializers.SerializerMethodField()
    policy_sources = serializers.SerializerMethodField()

    class Meta:
        model = SiteProfile
        fields = [
            "id",
            "site_id",
            "name",
            "description",
            "status",
            "architecture",
            "distro_series",
            "hwe_kernel",
            "storage_layout",
            "pxe_interface",
            "pxe_subnet",
            "policy_overrides",
            "effective_policy",
            "policy_sources",
            "revision",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "site_id", "revision", "created_at", "updated_at"]

    def get_effective_policy(self, profile: SiteProfile) -> dict[str, Any]:
        return resolve_policy(profile.site.policy, profile.policy_overrides).as_dict()

    def get_policy_sources(self, profile: SiteProfile) -> dict[str, str]:
        return policy_sources(profile.site.policy, profile.policy_overrides)


class RoceAssignmentSerializer(serializers.ModelSerializer[RoceAssignment]):
    site_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = RoceAssignment
        fields = ["id", "site_id", "hostname", "interface", "ipv4_cidr", "created_at", "updated_at"]
        read_only_fields = fields

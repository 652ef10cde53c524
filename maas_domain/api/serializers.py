"""Request/response shapes. Serializers check shape only; services enforce business rules."""

from __future__ import annotations

from typing import Any

from django.core.validators import URLValidator
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from maas_domain import hardware
from maas_domain.models import (
    Allocation,
    ApiToken,
    Cordon,
    MaasSite,
    Node,
    NodeState,
    RoceAssignment,
    SiteProfile,
    Sku,
    TokenScope,
)
from maas_domain.nodetrust import node_trust, trust_problems
from maas_domain.pki import MAX_BUNDLE_BYTES, describe_ca_bundle
from maas_domain.policy import policy_sources, resolve_policy
from maas_domain.services import cordons
from maas_domain.validators import (
    HOSTNAME,
    REGION,
    hostname_error,
    interface_error,
    ipv4_error,
    ipv4_subnet_error,
    region_error,
)


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


@extend_schema_field(
    {"type": "object", "additionalProperties": True, "description": "Policy keys (docs/api.md)."}
)
class PolicyField(serializers.JSONField):
    """A JSON object of policy keys; contents are validated by the service (one catalogue)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be an object.")
        return data


HTTP_URL = URLValidator(schemes=["http", "https"])


@extend_schema_field({"type": "string", "maxLength": 63, "pattern": f"^{HOSTNAME.pattern}$"})
class HostnameField(serializers.CharField):
    """A hostname as MAAS and the node agent accept it: the whole value matches
    (maas_domain/validators.py); never trimmed, so ``"c07u40\\n"`` is refused, not corrected."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=63, trim_whitespace=False, **kwargs)
        self.validators.append(_validator(hostname_error))


def hostname_field(**kwargs: Any) -> HostnameField:
    return HostnameField(**kwargs)


@extend_schema_field({"type": "string", "maxLength": 40, "pattern": f"^{REGION.pattern}$"})
class RegionField(serializers.CharField):
    """A region name (maas_domain/validators.py): a string whose whole value is a slug; never
    trimmed and never a number turned into one, so ``"east\n"`` and ``12`` are refused."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=40, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        value = str(super().to_internal_value(data))
        if reason := region_error(value):
            raise serializers.ValidationError(reason)
        return value


@extend_schema_field({"type": "string", "format": "ipv4"})
class IPv4Field(serializers.CharField):
    """An IPv4 address, with the project's one wording of the error (validators.ipv4_error)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validators=[_validator(ipv4_error)], **kwargs)


class CaCertificateSerializer(serializers.Serializer[Any]):
    subject = serializers.CharField()
    fingerprint_sha256 = serializers.CharField()
    not_before = serializers.DateTimeField()
    not_after = serializers.DateTimeField()


class NodeTrustSerializer(serializers.Serializer[Any]):
    """What this site's nodes get to reach and trust the control plane: the site's own values,
    else the deployment's (docs/settings.md, "Node trust")."""

    node_api_url = serializers.CharField(help_text="The URL nodes of this site call.")
    node_api_url_source = serializers.ChoiceField(choices=["site", "deployment"])
    ca_source = serializers.ChoiceField(
        choices=["site", "deployment", "none"],
        help_text="Whose CA bundle nodes trust: the site's ca_bundle_pem, the deployment's "
        "MAASCP_NODE_CA_FILE (embedded: the stack's own CA), or none.",
    )
    ca_certificates = CaCertificateSerializer(many=True)
    problems = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field → what is missing and how to fix it (empty: nodes can onboard).",
    )


class CredentialMetaSerializer(serializers.Serializer[Any]):
    fields_set = serializers.ListField(child=serializers.CharField())
    version = serializers.IntegerField(allow_null=True)
    pending_version = serializers.IntegerField(allow_null=True)
    rotated_at = serializers.DateTimeField(allow_null=True)
    rotated_by = serializers.CharField()
    confirmed_at = serializers.DateTimeField(allow_null=True)


class SiteCredentialsSummarySerializer(serializers.Serializer[Any]):
    maas_api_key = CredentialMetaSerializer(allow_null=True)
    ipmi = CredentialMetaSerializer(allow_null=True)
    power_override_count = serializers.IntegerField(allow_null=True)


class SiteSerializer(StrictMixin, serializers.ModelSerializer[MaasSite]):
    # Declared so that uniqueness is the service's 409, not a serializer 400.
    name = serializers.SlugField(max_length=63)
    maas_url = serializers.URLField(max_length=500, help_text="e.g. http://maas:5240/MAAS/")
    pxe_subnet = serializers.CharField(
        required=False, allow_blank=True, validators=[_validator(ipv4_subnet_error)]
    )
    region = RegionField(
        required=False,
        help_text="The region whose workers run this site's MAAS work (a slug; default: "
        "'default', served by workers started without -Q). Changing it is refused (409) "
        "while the site has work running, waiting or cancelling.",
    )
    policy = PolicyField(required=False)
    guarded = serializers.BooleanField(
        required=False,
        help_text="First-live-run guard: a start must name an approved host in confirm_host.",
    )
    approved_hosts = serializers.ListField(child=hostname_field(), required=False, max_length=1000)
    ca_bundle_pem = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_BUNDLE_BYTES,
        help_text="PEM certificates nodes use to trust the control plane (no private keys); "
        "empty: the deployment's (MAASCP_NODE_CA_FILE; embedded: the stack's own CA).",
    )
    node_api_url = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        validators=[HTTP_URL],
        help_text="The control plane's URL as this site's nodes reach it (default: the "
        "deployment's MAASCP_NODE_API_URL).",
    )
    payload_allowed_hosts = serializers.ListField(
        child=serializers.CharField(max_length=253),
        required=False,
        max_length=100,
        help_text="Hosts nodes may fetch from (names, addresses or *.domain); empty: the "
        "deployment's MAASCP_PAYLOAD_ALLOWED_HOSTS (docs/security.md).",
    )
    allow_http = serializers.BooleanField(
        required=False, help_text="Nodes may fetch over plain http (a lab); otherwise https only."
    )
    share_maas_with = serializers.ListField(
        child=serializers.SlugField(max_length=63),
        required=False,
        write_only=True,
        max_length=100,
        help_text="One MAAS, one site: a site on a MAAS another site uses is refused (409 "
        "`maas_in_use`, naming it) unless this lists every such site by name, confirming the "
        'share (docs/api.md, "One MAAS, one site").',
    )
    maas_allow_http = serializers.BooleanField(
        required=False,
        help_text="This site's MAAS may be reached over plain http (its API key's signature and "
        "the IPMI passwords then cross the network in the clear); production refuses an http "
        "maas_url without it.",
    )
    ca_certificates = serializers.SerializerMethodField()
    node_trust = serializers.SerializerMethodField()
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
            "maas_allow_http",
            "maas_user",
            "verify_tls",
            "pxe_subnet",
            "status",
            "region",
            "policy",
            "effective_policy",
            "policy_sources",
            "guarded",
            "approved_hosts",
            "ca_bundle_pem",
            "ca_certificates",
            "node_api_url",
            "node_trust",
            "payload_allowed_hosts",
            "allow_http",
            "share_maas_with",
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

    @extend_schema_field(CaCertificateSerializer(many=True))
    def get_ca_certificates(self, site: MaasSite) -> list[dict[str, Any]]:
        return describe_ca_bundle(site.ca_bundle_pem)

    @extend_schema_field(NodeTrustSerializer)
    def get_node_trust(self, site: MaasSite) -> dict[str, Any]:
        trust = node_trust(site)
        return {
            **trust.as_dict(),
            "ca_certificates": describe_ca_bundle(trust.ca_bundle_pem),
            "problems": trust_problems(site),
        }

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_effective_policy(self, site: MaasSite) -> dict[str, Any]:
        return resolve_policy(site.policy).as_dict()

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_policy_sources(self, site: MaasSite) -> dict[str, str]:
        return policy_sources(site.policy)

    @extend_schema_field(SiteCredentialsSummarySerializer)
    def get_credentials(self, site: MaasSite) -> dict[str, Any]:
        """Metadata only, from prefetched rows (no query per site)."""
        by_kind = {c.kind: c.metadata() for c in site.credentials.all()}
        return {
            "maas_api_key": by_kind.get("maas_api_key"),
            "ipmi": by_kind.get("ipmi_default"),
            "power_override_count": getattr(site, "power_override_count", None),
        }


class ProbeSerializer(StrictMixin, serializers.Serializer[Any]):
    """``POST /maas-sites/{id}/probe``: no body, or an explicit confirmation that the site's
    changed MAAS URL may receive its API key (docs/security.md)."""

    confirm_maas_url = serializers.CharField(required=False, max_length=500, trim_whitespace=False)


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

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_effective_policy(self, profile: SiteProfile) -> dict[str, Any]:
        return resolve_policy(profile.site.policy, profile.policy_overrides).as_dict()

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_policy_sources(self, profile: SiteProfile) -> dict[str, str]:
        return policy_sources(profile.site.policy, profile.policy_overrides)


class RoceAssignmentSerializer(serializers.ModelSerializer[RoceAssignment]):
    site_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = RoceAssignment
        fields = ["id", "site_id", "hostname", "interface", "ipv4_cidr", "created_at", "updated_at"]
        read_only_fields = fields


@extend_schema_field(hardware.PROFILE_SCHEMA)
class HardwareProfileField(serializers.JSONField):
    """The profile's shape is checked by the service (maas_domain/hardware.py), which knows the
    SKU's GPU count it must agree with."""


class SkuSerializer(StrictMixin, serializers.ModelSerializer[Sku]):
    code = serializers.SlugField(max_length=63)  # uniqueness is the service's 409
    name = serializers.CharField(max_length=200)
    gpu_count = serializers.IntegerField(
        min_value=0,
        max_value=64,
        required=False,
        help_text="Exactly this many GPUs (0: not stated).",
    )
    gpu_model = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="Every GPU's MAAS product name contains it (e.g. H100).",
    )
    hardware = HardwareProfileField(required=False)
    node_count = serializers.IntegerField(read_only=True, help_text="Nodes bound to the SKU.")

    class Meta:
        model = Sku
        fields = ["id", "code", "name", "gpu_model", "gpu_count", "hardware", "active",
                  "node_count", "revision", "created_at", "updated_at"]  # fmt: skip
        read_only_fields = ["id", "node_count", "revision", "created_at", "updated_at"]


class CordonSerializer(serializers.ModelSerializer[Cordon]):
    class Meta:
        model = Cordon
        fields = ["id", "reason", "source", "detail", "created_at", "created_by"]
        read_only_fields = fields


class NodeSerializer(serializers.ModelSerializer[Node]):
    site_name = serializers.CharField(source="site.name", read_only=True)
    sku_code = serializers.CharField(source="sku.code", read_only=True)
    schedulable = serializers.SerializerMethodField(
        help_text="Active and not cordoned: may take a new allocation."
    )
    cordons = serializers.SerializerMethodField(
        help_text="Why the node takes no new work (empty: none), oldest first."
    )

    class Meta:
        model = Node
        fields = ["id", "hostname", "site_id", "site_name", "sku_id", "sku_code", "state",
                  "schedulable", "cordons", "maas_system_id", "ipmi_ip", "created_at",
                  "updated_at"]  # fmt: skip
        read_only_fields = fields

    @staticmethod
    def _cordons(node: Node) -> list[Cordon]:
        held = getattr(node, "active_cordons", None)  # prefetched by the node views
        return list(held) if held is not None else list(cordons.active([node.pk]).order_by("id"))

    def get_schedulable(self, node: Node) -> bool:
        return node.state == NodeState.ACTIVE and not self._cordons(node)

    @extend_schema_field(CordonSerializer(many=True))
    def get_cordons(self, node: Node) -> list[dict[str, Any]]:
        return list(CordonSerializer(self._cordons(node), many=True).data)


class CordonRequestSerializer(StrictMixin, serializers.Serializer[Any]):
    """``POST /nodes/{id}/cordon`` and ``/uncordon``: why (audited)."""

    reason = serializers.CharField(max_length=500, help_text="Why (audited).")


class NodeWorkflowSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField(help_text="onboarding, decommission, ...")
    id = serializers.IntegerField()
    state = serializers.CharField()
    stage = serializers.CharField()
    attempt = serializers.IntegerField()
    failure_class = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class AllocationSerializer(serializers.ModelSerializer[Allocation]):
    node_id = serializers.IntegerField(read_only=True)
    hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = Allocation
        fields = ["id", "node_id", "hostname", "holder", "state", "created_at", "released_at",
                  "released_by", "release_reason"]  # fmt: skip
        read_only_fields = fields


class MaasObservationSerializer(serializers.Serializer[Any]):
    system_id = serializers.CharField()
    hostname = serializers.CharField()
    status = serializers.CharField()
    power_state = serializers.CharField()
    owner = serializers.CharField()
    last_seen_at = serializers.DateTimeField(allow_null=True)
    missing_since = serializers.DateTimeField(allow_null=True)
    observed_at = serializers.DateTimeField()


class NodeDetailSerializer(NodeSerializer):
    open_workflows = NodeWorkflowSerializer(many=True, read_only=True)
    recent_workflows = NodeWorkflowSerializer(many=True, read_only=True)
    active_allocations = AllocationSerializer(many=True, read_only=True)
    maas_observation = MaasObservationSerializer(
        read_only=True,
        allow_null=True,
        help_text="What the last reconcile run saw of the machine in MAAS (null: never seen).",
    )

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "open_workflows", "recent_workflows",
                  "active_allocations", "maas_observation"]  # fmt: skip
        read_only_fields = fields


class TimelineEntrySerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    source = serializers.ChoiceField(choices=["workflow", "operator", "maas"])  # type: ignore[assignment]
    kind = serializers.CharField(help_text="Event kind, audit action or MAAS event type.")
    workflow_kind = serializers.CharField(help_text="Empty unless source is workflow.")
    workflow_id = serializers.IntegerField(allow_null=True)
    stage = serializers.CharField()
    attempt = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    actor_name = serializers.CharField()
    data = serializers.JSONField(allow_null=True)  # type: ignore[assignment]


class MaasEventsStatusSerializer(serializers.Serializer[Any]):
    requested = serializers.BooleanField()
    available = serializers.BooleanField()
    detail = serializers.CharField()
    fetched = serializers.IntegerField(required=False)


class NodeTimelineSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = TimelineEntrySerializer(many=True)
    maas_events = MaasEventsStatusSerializer()


class AllocationCreateSerializer(StrictMixin, serializers.Serializer[Any]):
    node_id = serializers.IntegerField(min_value=1)
    holder = serializers.RegexField(
        r"^[^\x00-\x1f\x7f]+$", max_length=200, help_text="Tenant or workload holding the node."
    )


class ReleaseSerializer(StrictMixin, serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


# -- shapes of answers built by services (documented here; the services build them) -----------


class ProbeCheckSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    duration_ms = serializers.FloatField()


class ProbeResultSerializer(serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    health = serializers.ChoiceField(choices=["healthy", "degraded", "unhealthy"])
    checked_at = serializers.DateTimeField()
    checks = ProbeCheckSerializer(many=True)
    dry_run = serializers.BooleanField(
        required=False, help_text="Set by a dry run: nothing was stored or promoted."
    )
    would_confirm_key_version = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Dry run: the pending API key version a real probe would confirm.",
    )


class IpmiCredentialsSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=64)
    password = serializers.CharField(max_length=128, write_only=True)


class PowerOverrideSerializer(IpmiCredentialsSerializer):
    hostname = hostname_field()


class SiteCredentialsSerializer(serializers.Serializer[Any]):
    """Any subset, at least one. Values are written to the secrets backend, never shown."""

    maas_api_key = serializers.CharField(
        required=False, write_only=True, help_text="consumer_key:token_key:token_secret"
    )
    ipmi = IpmiCredentialsSerializer(required=False)
    power_overrides = serializers.ListField(
        child=PowerOverrideSerializer(), required=False, max_length=1000
    )


class PowerOverrideMetaSerializer(CredentialMetaSerializer):
    hostname = serializers.CharField()


class CredentialsAnswerSerializer(serializers.Serializer[Any]):
    site_id = serializers.IntegerField()
    maas_api_key = CredentialMetaSerializer(allow_null=True)
    ipmi = CredentialMetaSerializer(allow_null=True)
    power_overrides = PowerOverrideMetaSerializer(many=True)


class RoceItemSerializer(serializers.Serializer[Any]):
    hostname = hostname_field()
    interface = serializers.CharField(max_length=15)
    ipv4_cidr = serializers.CharField(max_length=18, help_text="e.g. 172.30.9.61/31")


class RoceBulkSerializer(serializers.Serializer[Any]):
    items = serializers.ListField(child=RoceItemSerializer(), min_length=1, max_length=5000)


class RoceSummarySerializer(serializers.Serializer[Any]):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()


class IndexSerializer(serializers.Serializer[Any]):
    resources = serializers.DictField(child=serializers.URLField())
    schema = serializers.URLField()
    docs = serializers.URLField()
    redoc = serializers.URLField()


class TokenSerializer(serializers.ModelSerializer[ApiToken]):
    user = serializers.CharField(source="user.username", read_only=True)
    active = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "name", "user", "prefix", "scope", "created_at", "last_used_at",
                  "expires_at", "created_by", "revoked_at", "revoked_by", "active"]  # fmt: skip
        read_only_fields = fields

    def get_active(self, token: ApiToken) -> bool:
        now = timezone.now()
        return token.revoked_at is None and (token.expires_at is None or token.expires_at > now)


class TokenCreateSerializer(StrictMixin, serializers.Serializer[Any]):
    name = serializers.RegexField(r"^[^\x00-\x1f\x7f]+$", max_length=100)
    user = serializers.CharField(
        required=False,
        max_length=150,
        help_text="The user name the token is for (default: yours). A colleague's token needs "
        "the admin role; its scope must be within that user's role.",
    )
    scope = serializers.ChoiceField(
        choices=TokenScope.choices,
        default=TokenScope.READ,
        help_text="What requests through the token may do, within its user's role.",
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=3650,
        help_text="Default MAASCP_API_TOKEN_DAYS; at most MAASCP_API_TOKEN_MAX_DAYS.",
    )


class TokenCreatedSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The token itself: shown in this answer only.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
        read_only_fields = fields

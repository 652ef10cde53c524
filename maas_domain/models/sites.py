"""Sites, profiles, RoCE assignments and credential references."""

from __future__ import annotations

from typing import Any

from django.db import models

from maas_domain.policy import Policy, resolve_policy


class SiteStatus(models.TextChoices):
    ACTIVE = "active"
    DISABLED = "disabled"


class SiteHealth(models.TextChoices):
    UNKNOWN = "unknown"
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"


class Revisioned(models.Model):
    """Optimistic concurrency: ``revision`` goes up on every change; ``If-Match`` compares it."""

    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class MaasSite(Revisioned):
    """One MAAS region. Holds connectivity, deploy identity and the site's default policy.

    Invariant: the row never holds a credential, only references to it (``SiteCredential``).
    A site is disabled, never deleted, so workflow history keeps its site.
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=500, blank=True, default="")
    maas_url = models.URLField(max_length=500, help_text="e.g. http://maas:5240/MAAS/")
    maas_user = models.CharField(
        max_length=150, blank=True, default="", help_text="Expected MAAS user for the API key."
    )
    verify_tls = models.BooleanField(default=True)
    pxe_subnet = models.CharField(max_length=43, blank=True, default="")
    status = models.CharField(max_length=16, choices=SiteStatus.choices, default=SiteStatus.ACTIVE)
    region = models.CharField(
        max_length=40,
        default="default",
        db_index=True,
        help_text="Where this site's MAAS work runs: the workers serving this region's queue "
        "(docs/operations.md, Regions).",
    )
    policy = models.JSONField(default=dict, blank=True)
    guarded = models.BooleanField(
        default=False,
        help_text="First-live-run guard: onboarding needs confirm_host and an approved host.",
    )
    approved_hosts = models.JSONField(default=list, blank=True)
    ca_bundle_pem = models.TextField(
        blank=True, default="", help_text="CA certificates nodes use to trust the control plane."
    )
    node_api_url = models.URLField(
        max_length=500,
        blank=True,
        default="",
        help_text="Control-plane URL as nodes on this site reach it (default MAASCP_NODE_API_URL).",
    )
    payload_allowed_hosts = models.JSONField(
        default=list,
        blank=True,
        help_text="Hosts this site's nodes may fetch the bootstrap bundle and node-agent script "
        "from (names, addresses or *.domain). Empty: MAASCP_PAYLOAD_ALLOWED_HOSTS.",
    )
    allow_http = models.BooleanField(
        default=False,
        help_text="Nodes may fetch the bundle and the node-agent script over plain http (a lab); "
        "otherwise https only.",
    )
    maas_allow_http = models.BooleanField(
        default=False,
        help_text="This site's MAAS may be reached over plain http: its API key's signature and "
        "the IPMI passwords then cross the network in the clear. Production refuses an http MAAS "
        "URL without it; the embedded stack allows it.",
    )
    health = models.CharField(max_length=16, choices=SiteHealth.choices, default=SiteHealth.UNKNOWN)
    last_probe_at = models.DateTimeField(null=True, blank=True)
    probe_result = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "maas_sites"
        ordering = ["name"]
        verbose_name = "MAAS site"

    def __str__(self) -> str:
        return self.name

    def effective_policy(self, profile: SiteProfile | None = None) -> Policy:
        return resolve_policy(self.policy, profile.policy_overrides if profile else None)


class ProfileStatus(models.TextChoices):
    ACTIVE = "active"
    DISABLED = "disabled"


class StorageLayout(models.TextChoices):
    FLAT = "flat"
    LVM = "lvm"
    BCACHE = "bcache"
    BLANK = "blank"


class SiteProfile(Revisioned):
    """A policy bundle on a site: runtime target (architecture, distro series, PXE shape,
    storage layout) plus overrides of any site policy field."""

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="profiles")
    name = models.SlugField(max_length=63)
    description = models.CharField(max_length=500, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=ProfileStatus.choices, default=ProfileStatus.ACTIVE
    )
    architecture = models.CharField(max_length=64, default="amd64/generic")
    distro_series = models.CharField(max_length=64, default="jammy")
    hwe_kernel = models.CharField(max_length=64, blank=True, default="")
    storage_layout = models.CharField(
        max_length=16, choices=StorageLayout.choices, default=StorageLayout.FLAT
    )
    pxe_interface = models.CharField(max_length=15, blank=True, default="")
    pxe_subnet = models.CharField(max_length=43, blank=True, default="")
    policy_overrides = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "maas_site_profiles"
        ordering = ["site_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="uniq_profile_name_per_site")
        ]

    def __str__(self) -> str:
        return f"{self.site.name}/{self.name}"

    def effective_policy(self) -> Policy:
        return self.site.effective_policy(self)


class RoceAssignment(models.Model):
    """A RoCE interface address for a host on a site (phase-2 RoCE input).

    Keyed by (site, hostname, interface); an address is used at most once per site (deferred
    so that a bulk upsert may swap two addresses in one transaction on PostgreSQL).
    """

    site = models.ForeignKey(MaasSite, on_delete=models.CASCADE, related_name="roce_assignments")
    hostname = models.CharField(max_length=63)
    interface = models.CharField(max_length=15)
    ipv4_cidr = models.CharField(max_length=18)
    ipv4_address = models.GenericIPAddressField(protocol="IPv4")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "maas_roce_assignments"
        ordering = ["hostname", "interface"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "hostname", "interface"], name="uniq_roce_host_interface"
            ),
            models.UniqueConstraint(
                fields=["site", "ipv4_address"],
                name="uniq_roce_address_per_site",
                deferrable=models.Deferrable.DEFERRED,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hostname}/{self.interface} {self.ipv4_cidr}"


class CredentialKind(models.TextChoices):
    MAAS_API_KEY = "maas_api_key", "MAAS API key"
    IPMI_DEFAULT = "ipmi_default", "Site default IPMI credentials"


class SecretRef(models.Model):
    """Where a secret lives in the secrets backend, and which version is in use.

    ``version`` is the confirmed version workflows use. A rotation that must be proven first
    (the MAAS API key) writes a new backend version and records it as ``pending_version``; the
    previous one stays readable until a probe confirms the new one. The value is never here.
    """

    path = models.CharField(max_length=255)
    version = models.PositiveIntegerField(null=True, blank=True)
    pending_version = models.PositiveIntegerField(null=True, blank=True)
    fields_set = models.JSONField(default=list, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    rotated_by = models.CharField(max_length=150, blank=True, default="")
    confirmed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def metadata(self) -> dict[str, Any]:
        """What may be shown about the secret: never its value."""
        return {
            "fields_set": list(self.fields_set),
            "version": self.version,
            "pending_version": self.pending_version,
            "rotated_at": self.rotated_at.isoformat() if self.rotated_at else None,
            "rotated_by": self.rotated_by,
            "confirmed_at": self.confirmed_at.isoformat() if self.confirmed_at else None,
        }


class SiteCredential(SecretRef):
    """A site credential. The MAAS API key is bound to the MAAS URL and TLS setting it was
    written (or last confirmed) for: it is never sent anywhere else (docs/security.md)."""

    site = models.ForeignKey(MaasSite, on_delete=models.CASCADE, related_name="credentials")
    kind = models.CharField(max_length=32, choices=CredentialKind.choices)
    bound_url = models.CharField(max_length=500, blank=True, default="")
    bound_verify_tls = models.BooleanField(null=True, blank=True)

    class Meta:
        db_table = "maas_site_credentials"
        constraints = [
            models.UniqueConstraint(fields=["site", "kind"], name="uniq_site_credential_kind")
        ]

    def __str__(self) -> str:
        return f"{self.site_id}:{self.kind}"

    def bound_to(self, site: MaasSite) -> bool:
        return self.bound_url == site.maas_url and self.bound_verify_tls == site.verify_tls


class PowerCredentialOverride(SecretRef):
    """Per-hostname IPMI credentials that win over the site default."""

    site = models.ForeignKey(MaasSite, on_delete=models.CASCADE, related_name="power_overrides")
    hostname = models.CharField(max_length=63)

    class Meta:
        db_table = "maas_power_credential_overrides"
        ordering = ["hostname"]
        constraints = [
            models.UniqueConstraint(fields=["site", "hostname"], name="uniq_power_override_host")
        ]

    def __str__(self) -> str:
        return f"{self.site_id}:{self.hostname}"

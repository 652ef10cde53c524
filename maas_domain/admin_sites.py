"""Admin pages for sites, their profiles, RoCE assignments and credential references
(docs/admin.md): every write through the same services as the API.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from maas_domain import urlsafety
from maas_domain.access import Action, allowed
from maas_domain.admin_common import (
    PolicyFormMixin,
    ReadOnlyAdmin,
    ServiceBackedAdmin,
    _checked,
    _url_field,
    health_badge,
)
from maas_domain.errors import DomainError
from maas_domain.humanize import humanize_age
from maas_domain.models import (
    MaasSite,
    PowerCredentialOverride,
    RoceAssignment,
    SiteCredential,
    SiteProfile,
)
from maas_domain.policy import policy_sources, resolve_policy
from maas_domain.regions import DEFAULT_REGION, region_state
from maas_domain.services import sites as site_services
from maas_domain.services.credentials import site_credentials_metadata, site_credentials_write
from maas_domain.services.probe import site_probe_in_region
from maas_domain.validators import interface_error, ipv4_subnet_error, region_error


class SiteForm(PolicyFormMixin):
    pxe_subnet = forms.CharField(required=False, validators=[_checked(ipv4_subnet_error)])
    region = forms.CharField(
        required=False,
        max_length=40,
        validators=[_checked(region_error)],
        help_text="The region whose workers run this site's MAAS work (a slug; empty: keep it, "
        "'default' for a new site). Refused while the site has work running, waiting or "
        "cancelling.",
    )

    share_maas_with = forms.CharField(
        required=False,
        max_length=1000,
        label="Share this MAAS with",
        help_text="One MAAS, one site: a site on a MAAS another site uses is refused. To share "
        "it anyway, name every site already on it (comma-separated).",
    )

    def clean_region(self) -> str:
        return str(self.cleaned_data.get("region") or self.instance.region or DEFAULT_REGION)

    def clean(self) -> dict[str, Any]:
        """The service's one-MAAS rule, early, on the field that answers it (the service
        enforces it again under its lock)."""
        data = super().clean()
        url = data.get("maas_url")
        if url and not self.has_error("maas_url"):
            before = (
                {"maas_url": self.instance.maas_url, "status": self.instance.status}
                if self.instance.pk
                else {}
            )
            share = data.get("share_maas_with")
            status = data.get("status") or self.instance.status
            if site_services.maas_check_needed(before, url, status, share):
                refusal = site_services.shared_maas_refusal(url, share, exclude=self.instance.pk)
                if refusal is not None:
                    fields = refusal.extra.get("fields") or {}
                    for reason in fields.get("share_maas_with", [refusal.message]):
                        self.add_error("share_maas_with", reason)
        return data

    class Meta:
        model = MaasSite
        formfield_callback = _url_field
        fields = [
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
            "guarded",
            "approved_hosts",
            "ca_bundle_pem",
            "node_api_url",
            "payload_allowed_hosts",
            "allow_http",
        ]

    def clean_payload_allowed_hosts(self) -> list[str]:
        value = self.cleaned_data.get("payload_allowed_hosts") or []
        if reason := urlsafety.hosts_error(value):
            raise forms.ValidationError(reason)
        return list(value)

    def clean_node_api_url(self) -> str:
        value = str(self.cleaned_data.get("node_api_url") or "")
        if value:
            try:
                urlsafety.split(value)
            except urlsafety.UrlRefused as exc:
                raise forms.ValidationError(str(exc)) from exc
        return value


@admin.register(MaasSite)
class MaasSiteAdmin(ServiceBackedAdmin):
    form = SiteForm
    formfield_overrides = {
        **ServiceBackedAdmin.formfield_overrides,
        models.URLField: {"assume_scheme": "http"},
    }
    list_display = [
        "name",
        "status",
        "health_col",
        "last_probe",
        "failing_checks",
        "profile_count",
        "region",
        "maas_url",
    ]
    list_filter = ["status", "health", "region"]
    search_fields = ["name", "maas_url"]
    readonly_fields = ["health", "last_probe_at", "revision"]
    change_form_template = "admin/maas_domain/maassite/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "description", "status", "expected_revision"]}),
        (
            "MAAS",
            {
                "fields": [
                    "maas_url",
                    "share_maas_with",
                    "maas_allow_http",
                    "maas_user",
                    "verify_tls",
                    "pxe_subnet",
                ]
            },
        ),
        ("Region (where this site's MAAS work runs)", {"fields": ["region"]}),
        ("Policy (explicit keys; the rest inherit defaults)", {"fields": ["policy"]}),
        ("First-live-run guard", {"fields": ["guarded", "approved_hosts"]}),
        (
            "Nodes",
            {"fields": ["ca_bundle_pem", "node_api_url", "payload_allowed_hosts", "allow_http"]},
        ),
        ("Health", {"fields": ["health", "last_probe_at", "revision"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[MaasSite]:
        sites: QuerySet[MaasSite] = super().get_queryset(request)
        return sites.annotate(n_profiles=Count("profiles"))

    @admin.display(description="health", ordering="health")
    def health_col(self, site: MaasSite) -> SafeString:
        return health_badge(site.health)

    @admin.display(description="last probe", ordering="last_probe_at")
    def last_probe(self, site: MaasSite) -> str:
        if site.last_probe_at is None:
            return "never"
        return f"{humanize_age(timezone.now() - site.last_probe_at)} ago"

    @admin.display(description="failing checks")
    def failing_checks(self, site: MaasSite) -> str:
        checks = (site.probe_result or {}).get("checks", [])
        return ", ".join(c["name"] for c in checks if not c.get("ok")) or "-"

    @admin.display(description="profiles")
    def profile_count(self, site: Any) -> int:
        return int(site.n_profiles)

    def create(self, request: HttpRequest, data: dict[str, Any]) -> MaasSite:
        return site_services.site_create(actor=request.user, data=data)

    def update(
        self, request: HttpRequest, obj: Any, changes: dict[str, Any], revision: int | None
    ) -> MaasSite:
        return site_services.site_update(
            actor=request.user, site_id=obj.pk, changes=changes, expected_revision=revision
        )

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:pk>/probe/", wrap(self.probe_view), name="maas_domain_maassite_probe"),
            path(
                "<int:pk>/credentials/",
                wrap(self.credentials_view),
                name="maas_domain_maassite_credentials",
            ),
            *super().get_urls(),
        ]

    def _site(self, request: HttpRequest, pk: int, *, action: Action) -> MaasSite:
        if not allowed(request.user, action):
            raise PermissionDenied
        site = MaasSite.objects.filter(pk=pk).first()
        if site is None:
            raise Http404(f"No site {pk}.")
        return site

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        site = MaasSite.objects.filter(pk=object_id if str(object_id).isdigit() else 0).first()
        extra = dict(extra_context or {})
        if site is not None:
            effective = resolve_policy(site.policy).as_dict()
            sources = policy_sources(site.policy)
            extra.update(
                health=health_badge(site.health),
                probe=site.probe_result or {},
                credentials=site_credentials_metadata(site=site),
                policy_rows=[(k, json.dumps(v), sources.get(k, "")) for k, v in effective.items()],
                probe_url=reverse("admin:maas_domain_maassite_probe", args=[site.pk]),
                unconfirmed_url=SiteCredential.objects.filter(site=site, kind="maas_api_key")
                .exclude(bound_url=site.maas_url, bound_verify_tls=site.verify_tls)
                .exists(),
                credentials_url=reverse("admin:maas_domain_maassite_credentials", args=[site.pk]),
                region=region_state(site.region),
            )
        return super().change_view(request, object_id, form_url, extra)

    def probe_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        site = self._site(request, pk, action=Action.OPERATE)
        back = reverse("admin:maas_domain_maassite_change", args=[site.pk])
        if request.method != "POST":
            return HttpResponseRedirect(back)
        try:
            confirm = request.POST.get("confirm_maas_url") or None
            result = site_probe_in_region(
                actor=request.user, site_id=site.pk, confirm_maas_url=confirm
            )
        except DomainError as exc:
            self.message_user(request, f"Probe refused: {exc.message}", messages.ERROR)
            return HttpResponseRedirect(back)
        failed = [c for c in result["checks"] if not c["ok"]]
        summary = f"Probe of {site.name}: {result['health']}"
        if failed:
            detail = "; ".join(f"{c['name']}: {c['detail']}" for c in failed)
            self.message_user(request, f"{summary}. Failed: {detail}", messages.WARNING)
        else:
            self.message_user(request, f"{summary}, all {len(result['checks'])} checks passed.")
        return HttpResponseRedirect(back)

    def credentials_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        site = self._site(request, pk, action=Action.ADMIN)
        form = CredentialsForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                site_credentials_write(actor=request.user, site=site, payload=form.payload())
            except DomainError as exc:
                form.place_errors(exc)
            else:
                self.message_user(
                    request, f"Credentials of {site.name} stored (values are never shown)."
                )
                return HttpResponseRedirect(
                    reverse("admin:maas_domain_maassite_change", args=[site.pk])
                )
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "original": site,
            "title": f"Credentials of {site.name}",
            "subtitle": None,
            "form": form,
            "credentials": site_credentials_metadata(site=site),
        }
        return TemplateResponse(
            request,
            "admin/maas_domain/maassite/credentials.html",
            context,
            status=400 if form.errors else 200,
        )


class CredentialsForm(forms.Form):
    """Write-only: every input is a password box that never renders a value back."""

    maas_api_key = forms.CharField(
        required=False,
        label="MAAS API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off", "size": 70}),
        help_text="consumer_key:token_key:token_secret. Pending until a probe authenticates.",
    )
    ipmi_username = forms.CharField(required=False, label="Default IPMI username")
    ipmi_password = forms.CharField(
        required=False,
        label="Default IPMI password",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )
    override_hostname = forms.CharField(required=False, label="Override: hostname")
    override_username = forms.CharField(required=False, label="Override: IPMI username")
    override_password = forms.CharField(
        required=False,
        label="Override: IPMI password",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )

    FIELD_MAP = {
        "maas_api_key": "maas_api_key",
        "ipmi": "ipmi_username",
        "ipmi.username": "ipmi_username",
        "ipmi.password": "ipmi_password",
        "power_overrides": "override_hostname",
        "power_overrides[0]": "override_hostname",
        "power_overrides[0].hostname": "override_hostname",
        "power_overrides[0].username": "override_username",
        "power_overrides[0].password": "override_password",
    }

    def payload(self) -> dict[str, Any]:
        d = self.cleaned_data
        body: dict[str, Any] = {}
        if d["maas_api_key"]:
            body["maas_api_key"] = d["maas_api_key"]
        if d["ipmi_username"] or d["ipmi_password"]:
            body["ipmi"] = {"username": d["ipmi_username"], "password": d["ipmi_password"]}
        if d["override_hostname"] or d["override_username"] or d["override_password"]:
            body["power_overrides"] = [
                {
                    "hostname": d["override_hostname"],
                    "username": d["override_username"],
                    "password": d["override_password"],
                }
            ]
        return body

    def place_errors(self, exc: DomainError) -> None:
        fields = exc.extra.get("fields") or {}
        if not fields:
            self.add_error(None, exc.message)
        for key, reasons in fields.items():
            target = self.FIELD_MAP.get(key)
            for reason in reasons:
                if target is None:
                    text = reason if key == "non_field_errors" else f"{key}: {reason}"
                    self.add_error(None, text)
                else:
                    self.add_error(target, reason)


class ProfileForm(PolicyFormMixin):
    policy_attr = "policy_overrides"
    pxe_subnet = forms.CharField(required=False, validators=[_checked(ipv4_subnet_error)])
    pxe_interface = forms.CharField(required=False, validators=[_checked(interface_error)])

    class Meta:
        model = SiteProfile
        fields = [
            "site",
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
        ]


@admin.register(SiteProfile)
class SiteProfileAdmin(ServiceBackedAdmin):
    form = ProfileForm
    policy_attr = "policy_overrides"
    list_display = [
        "name",
        "site",
        "status",
        "architecture",
        "distro_series",
        "storage_layout",
        "overrides",
    ]
    list_filter = ["status", "site", "storage_layout", "distro_series"]
    search_fields = ["name", "site__name"]
    list_select_related = ["site"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = [*ProfileForm.Meta.fields, "expected_revision"]
        return [f for f in fields if f != "site"] if obj is not None else fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["site", "effective"] if obj is not None else []

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = self.get_fields(request, obj)
        if obj is not None:
            fields = ["site", *fields, "effective"]
        return [(None, {"fields": fields})]

    @admin.display(description="policy overrides")
    def overrides(self, profile: SiteProfile) -> str:
        return ", ".join(sorted(profile.policy_overrides)) or "-"

    @admin.display(description="effective policy (source)")
    def effective(self, profile: SiteProfile) -> SafeString:
        effective = resolve_policy(profile.site.policy, profile.policy_overrides).as_dict()
        sources = policy_sources(profile.site.policy, profile.policy_overrides)
        return format_html(
            "<table>{}</table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                ((k, json.dumps(v), sources.get(k, "")) for k, v in effective.items()),
            ),
        )

    def create(self, request: HttpRequest, data: dict[str, Any]) -> SiteProfile:
        site = data.pop("site")
        return site_services.profile_create(actor=request.user, site=site, data=data)

    def update(
        self, request: HttpRequest, obj: Any, changes: dict[str, Any], revision: int | None
    ) -> SiteProfile:
        changes.pop("site", None)
        return site_services.profile_update(
            actor=request.user,
            site=obj.site,
            profile_id=obj.pk,
            changes=changes,
            expected_revision=revision,
        )


@admin.register(RoceAssignment)
class RoceAssignmentAdmin(ReadOnlyAdmin):
    """Written in bulk through the API/CLI (validated as a whole); listed here."""

    list_display = ["hostname", "interface", "ipv4_cidr", "site", "updated_at"]
    list_filter = ["site", "interface"]
    search_fields = ["hostname", "ipv4_cidr"]
    list_select_related = ["site"]


class SecretRefAdmin(ReadOnlyAdmin):
    """Metadata only: the value is never in these rows, and the path is not shown either."""

    exclude = ["path"]
    list_display = [
        "site",
        "fields_set",
        "version",
        "pending_version",
        "rotated_at",
        "rotated_by",
        "confirmed_at",
    ]
    list_select_related = ["site"]
    list_filter = ["site"]


@admin.register(SiteCredential)
class SiteCredentialAdmin(SecretRefAdmin):
    list_display = ["kind", *SecretRefAdmin.list_display]


@admin.register(PowerCredentialOverride)
class PowerCredentialOverrideAdmin(SecretRefAdmin):
    list_display = ["hostname", *SecretRefAdmin.list_display]
    search_fields = ["hostname"]

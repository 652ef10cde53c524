"""Operators' admin pages for the MAAS domain's own records (sites, profiles, RoCE assignments,
SKUs, nodes, credentials metadata, audit log, API tokens).

Every write calls the same service as the API (``site_create``/``site_update``,
``profile_create``/``profile_update``, ``site_probe``, ``site_credentials_write``,
``sku_create``/``sku_update``): forms only check the *shape* of input with the services' own
validators, and a service error is shown to the operator with nothing changed. Workflow pages
live in ``workflows/admin.py`` (generic) and each app's ``admin.py``.
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

from maas_domain import admin_audit, urlsafety
from maas_domain.access import Action, ActionAdmin, allowed
from maas_domain.errors import DomainError, InvalidInput
from maas_domain.humanize import humanize_age
from maas_domain.models import (
    Allocation,
    ApiToken,
    AuditLog,
    MaasSite,
    Node,
    PowerCredentialOverride,
    RoceAssignment,
    SiteCredential,
    SiteProfile,
    Sku,
)
from maas_domain.models.inventory import DECOMMISSIONABLE, NodeState
from maas_domain.policy import merge_policy, policy_sources, resolve_policy, validate_policy
from maas_domain.services import sites as site_services
from maas_domain.services import skus as sku_services
from maas_domain.services.credentials import site_credentials_metadata, site_credentials_write
from maas_domain.services.probe import site_probe
from maas_domain.services.tokens import api_token_list, api_token_revoke
from maas_domain.validators import interface_error, ipv4_subnet_error

HEALTH_COLOURS = {
    "healthy": "#198754",
    "degraded": "#c25e00",
    "unhealthy": "#dc3545",
    "unknown": "#6c757d",
}


def health_badge(health: str) -> SafeString:
    return format_html(
        '<span class="wf-badge" style="background:{};color:#fff;border-radius:4px;'
        'padding:2px 8px;font-weight:600">{}</span>',
        HEALTH_COLOURS.get(health, "#6c757d"),
        health,
    )


class ReadOnlyAdmin(ActionAdmin[Any]):
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # audit log and nodes grow large: no facet counts

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _checked(check: Any) -> Any:
    def run(value: Any) -> None:
        if value and (reason := check(value)):
            raise forms.ValidationError(reason)

    return run


class ServiceBackedAdmin(ActionAdmin[Any]):
    """Add and change forms whose save is one service call (create/update, audited there).

    ``policy_attr`` names the JSON policy field: the form edits the whole explicit dict and the
    update sends the difference as a merge-patch (removed keys as ``null``). The hidden
    ``expected_revision`` makes a save over someone else's change a clear error, not a silent
    overwrite.
    """

    policy_attr = "policy"
    show_full_result_count = False

    def create(self, request: HttpRequest, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def update(
        self, request: HttpRequest, obj: Any, changes: dict[str, Any], revision: int | None
    ) -> Any:
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        data = {k: v for k, v in form.cleaned_data.items() if k != "expected_revision"}
        if not change:
            created = self.create(request, data)
            obj.pk = created.pk
            return
        changes = {k: data[k] for k in form.changed_data if k in data}
        if self.policy_attr in changes:
            stored = type(obj).objects.values_list(self.policy_attr, flat=True).get(pk=obj.pk)
            new = changes[self.policy_attr] or {}
            patch = {k: v for k, v in new.items() if stored.get(k) != v}
            patch.update({k: None for k in stored if k not in new})
            changes[self.policy_attr] = patch
        if changes:
            self.update(request, obj, changes, form.cleaned_data.get("expected_revision"))

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as exc:  # raised inside the admin's transaction: nothing changed
            detail = "; ".join(
                f"{k}: {' '.join(v)}" for k, v in (exc.extra.get("fields") or {}).items()
            )
            text = f"Not saved: {exc.message}" + (f" {detail}" if detail else "")
            self.message_user(request, text, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class PolicyFormMixin(forms.ModelForm[Any]):
    policy_attr = "policy"
    expected_revision = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["expected_revision"].initial = self.instance.revision

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        attr = self.policy_attr
        if attr in data:
            value = data[attr] if data[attr] is not None else {}
            try:
                merge_policy({}, validate_policy(value, field_name=attr))
            except InvalidInput as exc:
                for key, reasons in (exc.extra.get("fields") or {}).items():
                    for reason in reasons:
                        self.add_error(attr, f"{key}: {reason}")
            else:
                data[attr] = value
        return data


def _url_field(field: Any, **kwargs: Any) -> Any:
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "http")  # MAAS region URLs are usually plain http
    return field.formfield(**kwargs)


class SiteForm(PolicyFormMixin):
    pxe_subnet = forms.CharField(required=False, validators=[_checked(ipv4_subnet_error)])

    class Meta:
        model = MaasSite
        formfield_callback = _url_field
        fields = [
            "name",
            "description",
            "maas_url",
            "maas_user",
            "verify_tls",
            "pxe_subnet",
            "status",
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
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    list_display = [
        "name",
        "status",
        "health_col",
        "last_probe",
        "failing_checks",
        "profile_count",
        "maas_url",
    ]
    list_filter = ["status", "health"]
    search_fields = ["name", "maas_url"]
    readonly_fields = ["health", "last_probe_at", "revision"]
    change_form_template = "admin/maas_domain/maassite/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "description", "status", "expected_revision"]}),
        ("MAAS", {"fields": ["maas_url", "maas_user", "verify_tls", "pxe_subnet"]}),
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
            )
        return super().change_view(request, object_id, form_url, extra)

    def probe_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        site = self._site(request, pk, action=Action.OPERATE)
        back = reverse("admin:maas_domain_maassite_change", args=[site.pk])
        if request.method != "POST":
            return HttpResponseRedirect(back)
        try:
            confirm = request.POST.get("confirm_maas_url") or None
            result = site_probe(actor=request.user, site_id=site.pk, confirm_maas_url=confirm)
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


@admin.register(Sku)
class SkuAdmin(ActionAdmin[Sku]):
    list_display = ["code", "name", "gpu_model", "gpu_count", "active", "node_count"]
    list_filter = ["active", "gpu_model"]
    search_fields = ["code", "name", "gpu_model"]
    readonly_fields = ["revision"]  # the services count it
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Sku]:
        return super().get_queryset(request).annotate(n_nodes=Count("nodes"))

    @admin.display(description="nodes")
    def node_count(self, sku: Any) -> int:
        return int(sku.n_nodes)

    def save_model(self, request: HttpRequest, obj: Sku, form: Any, change: bool) -> None:
        if change:
            changes = {k: form.cleaned_data[k] for k in form.changed_data}
            sku_services.sku_update(actor=request.user, sku_id=obj.pk, changes=changes)
        else:
            obj.pk = sku_services.sku_create(actor=request.user, data=form.cleaned_data).pk


NODE_STATE_COLOURS: dict[str, str] = {
    NodeState.REGISTERED: "#6c757d",
    NodeState.PROVISIONING: "#0b5ed7",
    NodeState.ACTIVE: "#198754",
    NodeState.DRAINING: "#c25e00",
    NodeState.QUARANTINED: "#dc3545",
    NodeState.RETIRED: "#495057",
}


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = [
        "hostname",
        "site",
        "sku",
        "state_col",
        "maas_system_id",
        "ipmi_ip",
        "updated",
        "decommission_link",
    ]
    list_filter = ["state", "site", "sku"]
    search_fields = ["hostname", "maas_system_id", "ipmi_ip"]
    list_select_related = ["site", "sku"]

    @admin.display(description="lifecycle state", ordering="state")
    def state_col(self, node: Node) -> SafeString:
        return format_html(
            '<span class="wf-badge" style="background:{};color:#fff;border-radius:4px;'
            'padding:2px 8px">{}</span>',
            NODE_STATE_COLOURS.get(node.state, "#6c757d"),
            node.state,
        )

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, node: Node) -> str:
        return f"{humanize_age(timezone.now() - node.updated_at)} ago"

    @admin.display(description="")
    def decommission_link(self, node: Node) -> str:
        """Opens the decommission start page for this node (which confirms before acting)."""
        if node.state not in DECOMMISSIONABLE:
            return ""
        url = reverse("admin:decommission_decommission_add") + f"?node={node.pk}"
        return format_html('<a href="{}">decommission…</a>', url)


@admin.register(Allocation)
class AllocationAdmin(ReadOnlyAdmin):
    list_display = ["id", "node", "holder", "state", "created_at", "released_at", "released_by"]
    list_filter = ["state"]
    search_fields = ["holder", "node__hostname"]
    list_select_related = ["node"]
    show_full_result_count = False


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor_name", "action", "target", "reason", "correlation_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_name", "=target_id", "=correlation_id", "action"]
    date_hierarchy = "created_at"
    readonly_fields = ["before_json", "after_json"]
    exclude = ["before", "after"]

    @admin.display(description="target")
    def target(self, row: AuditLog) -> str:
        return f"{row.target_type} {row.target_id}"

    @admin.display(description="before")
    def before_json(self, row: AuditLog) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(row.before, indent=2, sort_keys=True))

    @admin.display(description="after")
    def after_json(self, row: AuditLog) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(row.after, indent=2, sort_keys=True))


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Tokens (never their values). Revocation calls the token service (audited); tokens are
    minted by the API, ``manage.py api_token`` or ``run_embedded`` (docs/security.md)."""

    list_display = [
        "name",
        "user",
        "prefix",
        "scope",
        "created_at",
        "created_by",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["scope"]
    exclude = ["key_hash"]
    list_select_related = ["user"]
    actions = ["revoke_tokens"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        """What the API's ``GET /tokens`` shows this user: their own, or (admin) everyone's."""
        return api_token_list(actor=request.user)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        done, refused = [], []
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                api_token_revoke(actor=request.user, token_id=token.pk, reason="admin page")
            except DomainError as exc:
                refused.append(f"{token.prefix}…: {exc.message}")
            else:
                done.append(f"{token.prefix}…")
        if done:
            self.message_user(request, f"Revoked {len(done)}: {', '.join(done)}.")
        for line in refused:
            self.message_user(request, f"Not revoked {line}", messages.ERROR)


admin_audit.install()


# -- drift and reconcile runs (docs/reconciliation.md) ---------------------------------------------
# reconciliation/admin.py registers its DriftRecord and ReconcileRun admins (see docs/admin.md,
# "Drift"): read-only lists with site/kind/status filters and resolve actions that call the
# reconciliation services, built with the same helpers as above (ReadOnlyAdmin, health_badge).

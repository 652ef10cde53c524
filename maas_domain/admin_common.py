"""What the core's admin pages share: health badges, read-only and service-backed model admins,
the policy form field.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from maas_domain.access import ActionAdmin
from maas_domain.errors import DomainError, InvalidInput
from maas_domain.policy import merge_policy, validate_policy

HEALTH_COLOURS = {
    "healthy": "#198754",
    "degraded": "#c25e00",
    "unhealthy": "#dc3545",
    "unknown": "#6c757d",
}


def health_badge(health: str) -> SafeString:
    return format_html(
        '<span class="wf-badge" style="background:{};color:#fff;border-radius:4px;'
        'padding:2px 8px;font-weight:600;white-space:nowrap">{}</span>',
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


# -- a bulk action that asks for a reason first --------------------------------------------------


class ReasonForm(forms.Form):
    """The reason (required: it goes into the audit row) and, for an action that can lapse,
    how long it lasts."""

    reason = forms.CharField(max_length=500, widget=forms.Textarea(attrs={"rows": 2, "cols": 80}))

    def __init__(self, *args: Any, expiry: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if expiry:
            self.fields["expires_in_hours"] = forms.IntegerField(
                required=False, min_value=1, max_value=24 * 366, help_text=expiry
            )


def reason_step(
    modeladmin: Any,
    request: HttpRequest,
    queryset: Any,
    *,
    action: str,
    title: str,
    rows: list[str],
    submit: str,
    help: str = "",
    expiry: str = "",
) -> tuple[ReasonForm | None, HttpResponse | None]:
    """The page between a bulk action and its effect: what was selected, a reason and (when
    ``expiry`` says what it means) an expiry. Returns (the valid form, None) once the operator
    confirmed, else (None, the page to show; 400 when what they sent was not valid)."""
    confirmed = request.POST.get("post") == "yes"
    form = ReasonForm(request.POST if confirmed else None, expiry=expiry)
    if confirmed and form.is_valid():
        return form, None
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "opts": opts,
        "title": title,
        "subtitle": None,
        "help": help,
        "rows": rows,
        "pks": [obj.pk for obj in queryset],
        "form": form,
        "submit": submit,
        "action_name": action,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "back_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
    }
    status = 400 if confirmed else 200
    page = TemplateResponse(request, "admin/reason_confirm.html", context, status=status)
    return None, page


# -- JSON an operator reads --------------------------------------------------------------------


def _cell(value: Any, depth: int) -> SafeString:
    if isinstance(value, dict | list) and value and depth < 3:
        return _view(value, depth + 1)
    if isinstance(value, dict | list):
        return format_html('<span class="wf-data">{}</span>', json.dumps(value, default=str))
    if value is None:
        return format_html("{}", "-")
    if isinstance(value, bool):
        return format_html("{}", "yes" if value else "no")
    return format_html('<span class="wf-wrap">{}</span>', value)


# columns read left to right as a sentence: what, where, expected, found, verdict, why
FIRST = ("at", "created", "name", "requirement", "script", "device", "kind", "level", "type",
         "stage", "expected", "observed", "status", "exit_status", "passed", "outcome")  # fmt: skip
LAST = ("message", "description", "reason", "detail", "output_excerpt", "line")


def _order(keys: list[str]) -> list[str]:
    rank = {k: i for i, k in enumerate(FIRST)} | {k: 1000 + i for i, k in enumerate(LAST)}
    return sorted(keys, key=lambda k: rank.get(k, 500))


def _view(value: Any, depth: int) -> SafeString:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        columns = _order(list(dict.fromkeys(k for row in value for k in row)))
        head = format_html_join("", "<th>{}</th>", ((c,) for c in columns))
        rows = format_html_join(
            "",
            "<tr>{}</tr>",
            ((format_html_join("", "<td>{}</td>", ((_cell(r.get(c), depth),) for c in columns)),)
             for r in value),
        )  # fmt: skip
        return format_html('<table class="wf-data-table"><thead><tr>{}</tr></thead>'
                           "<tbody>{}</tbody></table>", head, rows)  # fmt: skip
    if isinstance(value, dict) and value:
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, _cell(v, depth)) for k, v in value.items())
        )
        return format_html('<table class="wf-data-table">{}</table>', rows)
    if isinstance(value, list) and value:
        return format_html_join(", ", "{}", ((_cell(v, depth),) for v in value))
    return _cell(value, 3) if value not in ({}, [], None, "") else mark_safe("<em>none</em>")


def readable(value: Any) -> SafeString:
    """A JSON value as an operator reads it (docs/admin.md, "Evidence"): a list of objects is a
    table with a column per key, an object is a table of fields, deeper levels nest; the JSON
    itself stays one click away."""
    return format_html(
        '{}<details class="wf-json"><summary>JSON</summary><pre class="wf-wrap">{}</pre></details>',
        _view(value, 0),
        json.dumps(value, indent=2, default=str),
    )

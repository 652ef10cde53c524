"""Audit rows for privileged changes made in admin pages we do not own (docs/security.md):
users (creation, role groups, flags, password), groups (permissions) and the beat schedule
(django-celery-beat's periodic tasks and schedules, bulk enable/disable/run included).

Their admin classes are re-registered with ``AuditedAdmin`` mixed in: every save, delete and
bulk action writes ``<app>.<model>.<create|change|delete|action>`` in the same transaction, with
a redacted snapshot (``audit.redact`` blanks the password hash; many-to-many fields are shown as
names).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse
from django_celery_beat import admin as beat_admin
from django_celery_beat import models as beat

from maas_domain import audit


def _snapshot(obj: models.Model) -> dict[str, Any]:
    data = audit.snapshot(obj, exclude=("password", "last_login"))
    if obj.pk is not None:
        for field in obj._meta.many_to_many:
            data[field.name] = sorted(str(o) for o in getattr(obj, field.name).all())
    return data


def _action(obj: models.Model, what: str) -> str:
    return f"{obj._meta.app_label}.{obj._meta.model_name}.{what}"


class AuditedAdmin(admin.ModelAdmin[Any]):
    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if request.method == "POST" and object_id:
            obj = self.get_object(request, object_id)
            request._maascp_before = _snapshot(obj) if obj is not None else None  # type: ignore[attr-defined]
        with transaction.atomic():
            return super().changeform_view(request, object_id, form_url, extra_context)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        obj = form.instance
        before = getattr(request, "_maascp_before", None) if change else None
        audit.record(
            actor=request.user,
            action=_action(obj, "change" if change else "create"),
            target=obj,
            before=before,
            after=_snapshot(obj),
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            audit.record(
                actor=request.user, action=_action(obj, "delete"), target=obj, before=_snapshot(obj)
            )
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        with transaction.atomic():
            for obj in queryset:
                audit.record(
                    actor=request.user,
                    action=_action(obj, "delete"),
                    target=obj,
                    before=_snapshot(obj),
                )
            super().delete_queryset(request, queryset)


def _audited_bulk(name: str, run: Callable[..., Any]) -> Callable[..., Any]:
    def action(modeladmin: Any, request: HttpRequest, queryset: Any) -> Any:
        with transaction.atomic():
            rows = list(queryset)
            answer = run(modeladmin, request, queryset)
            for obj in rows:
                audit.record(
                    actor=request.user,
                    action=_action(obj, name),
                    target=obj,
                    after=_snapshot(type(obj).objects.get(pk=obj.pk)),
                )
        return answer

    action.__name__ = name
    action.short_description = getattr(run, "short_description", name)  # type: ignore[attr-defined]
    return action


class AuditedUserAdmin(AuditedAdmin, UserAdmin):  # type: ignore[type-arg]
    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        response = super().user_change_password(request, id, form_url)
        if request.method == "POST" and response.status_code == 302:
            user = get_user_model().objects.get(pk=id)
            with transaction.atomic():
                audit.record(
                    actor=request.user,
                    action="auth.user.password",
                    target=user,
                    reason="password set in the admin (the value is never recorded)",
                )
        return response


class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    pass


class AuditedPeriodicTaskAdmin(AuditedAdmin, beat_admin.PeriodicTaskAdmin):  # type: ignore[misc]
    enable_tasks = _audited_bulk("enable_tasks", beat_admin.PeriodicTaskAdmin.enable_tasks)
    disable_tasks = _audited_bulk("disable_tasks", beat_admin.PeriodicTaskAdmin.disable_tasks)
    toggle_tasks = _audited_bulk("toggle_tasks", beat_admin.PeriodicTaskAdmin.toggle_tasks)
    run_tasks = _audited_bulk("run_tasks", beat_admin.PeriodicTaskAdmin.run_tasks)


def install() -> None:
    """Re-register the user, group and beat admins with auditing (called once from our admin
    module, after Django's and django-celery-beat's registered theirs)."""
    pairs: list[tuple[type[models.Model], type[admin.ModelAdmin[Any]]]] = [
        (get_user_model(), AuditedUserAdmin),
        (Group, AuditedGroupAdmin),
        (beat.PeriodicTask, AuditedPeriodicTaskAdmin),
    ]
    schedules = {
        beat.IntervalSchedule: beat_admin.IntervalScheduleAdmin,
        beat.CrontabSchedule: beat_admin.CrontabScheduleAdmin,
        beat.SolarSchedule: beat_admin.SolarScheduleAdmin,
        beat.ClockedSchedule: beat_admin.ClockedScheduleAdmin,
    }
    for model, base in schedules.items():
        pairs.append((model, type(f"Audited{base.__name__}", (AuditedAdmin, base), {})))
    for model, admin_class in pairs:
        if admin.site.is_registered(model):
            admin.site.unregister(model)
        admin.site.register(model, admin_class)

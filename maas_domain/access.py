"""Authorization by action, in one place, for the API and the admin pages (docs/security.md).

Three action classes, each implying the ones below it:

* ``read``: every GET: lists, details, timelines, metrics;
* ``operate``: start onboardings, recovery verbs that continue work (retry, resume, rerun,
  adopt, mark-manual-intervention), site probes, reconciliation runs and drift resolution;
* ``admin``: what destroys data or changes trust: every decommission (full, reimage, storage
  cleanup) and force-release, restart-clean and cancel, credentials, site/profile/policy, SKU
  and RoCE writes, API tokens of other users.

A user holds a class through the Django permission ``maas_domain.access_<class>`` (the groups
``maascp-read``, ``maascp-operate`` and ``maascp-admin`` carry them; a superuser holds all).
``is_staff`` alone grants nothing here: it only lets a user log in to the admin pages. An API
token has a scope (one of the classes): a request may do what both its user and its token's
scope allow.

The default fails closed: an API view that does not declare its action class needs ``read`` for
a safe method and ``admin`` for anything else, so an endpoint added later is safe by default.
A view lowers it with ``action_classes`` (by DRF action name) or ``required_action()``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from django.contrib import admin
from django.db import models
from django.db.models import Model
from django.http import HttpRequest
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from maas_domain import context
from maas_domain.jsontext import JSONFormField


class Action(StrEnum):
    READ = "read"
    OPERATE = "operate"
    ADMIN = "admin"


RANK = {Action.READ: 1, Action.OPERATE: 2, Action.ADMIN: 3}
GROUPS = {
    Action.READ: "maascp-read",
    Action.OPERATE: "maascp-operate",
    Action.ADMIN: "maascp-admin",
}


# What each class allows, in a sentence (the admin's token page; maasctl keeps its own words).
ALLOWS = {
    Action.READ: "read only: every GET (lists, details, timelines); any change is refused",
    Action.OPERATE: "read, plus onboarding starts, retry/resume/rerun/adopt/"
    "mark-manual-intervention, probes, reconcile runs and drift resolution",
    Action.ADMIN: "operate, plus decommissions, restart-clean and cancel, credentials, and site, "
    "profile, policy, SKU, RoCE and other users' token changes",
}


def permission(action: Action) -> str:
    return f"maas_domain.access_{action.value}"


def user_rank(user: Any) -> int:
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return 0
    if user.is_superuser:
        return RANK[Action.ADMIN]
    cached = getattr(user, "_maascp_rank", None)
    if cached is None:
        cached = max(
            (RANK[a] for a in Action if user.has_perm(permission(a))),
            default=0,
        )
        user._maascp_rank = cached
    return int(cached)


def allowed(user: Any, action: Action, token: Any = None) -> bool:
    """May ``user`` (through ``token``, else the token the current request authenticated with,
    if any) do ``action``?"""
    need = RANK[action]
    if user_rank(user) < need:
        return False
    scope = getattr(token, "scope", None) if token is not None else context.api_token_scope.get()
    return scope is None or RANK[Action(scope)] >= need


def required(request: Request, view: Any) -> Action:
    """The class a request needs: what the view declares, else read for safe methods and admin
    for anything else."""
    declare = getattr(view, "required_action", None)
    if callable(declare):
        found = declare(request)
        if found is not None:
            return Action(found)
    classes: dict[str, Action] = getattr(view, "action_classes", {})
    name = getattr(view, "action", None)
    if name in classes:
        return classes[name]
    return Action.READ if request.method in SAFE_METHODS else Action.ADMIN


class ActionPermission(BasePermission):
    """The API's one permission class (``DEFAULT_PERMISSION_CLASSES``)."""

    message = "Your role (or your token's scope) does not allow this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not getattr(user, "is_authenticated", False):
            return False
        token = request.auth if hasattr(request.auth, "scope") else None
        return allowed(user, required(request, view), token)


_M = TypeVar("_M", bound=Model)


class ActionAdmin(admin.ModelAdmin[_M]):
    """Base of the admin pages of our records: seeing them needs ``read``; adding and changing
    need ``add_action`` / ``change_action`` (Django's per-model permissions are not consulted,
    so the pages and the API follow one set of rules)."""

    add_action: ClassVar[Action] = Action.ADMIN
    change_action: ClassVar[Action] = Action.ADMIN
    # JSON fields parsed as the API parses bodies (a page adding its own overrides merges these)
    formfield_overrides = {models.JSONField: {"form_class": JSONFormField}}

    def has_module_permission(self, request: HttpRequest) -> bool:
        return allowed(request.user, Action.READ)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return allowed(request.user, Action.READ)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return allowed(request.user, self.add_action)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return allowed(request.user, self.change_action)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # our records are disabled, revoked or closed, never deleted

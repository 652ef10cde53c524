"""Admin pages for any workflow kind (docs/admin.md).

``WorkflowAdmin`` takes a kind name from the registry of kinds (``kinds.KINDS``) and derives
everything from it: the state badge, the stage filter, the timeline (the model's ``events``
relation), the version fields, live MAAS diagnostics, the recovery verbs as buttons and as bulk
actions, and the confirmation page (the verb's dry-run plan plus a required reason) for
destructive verbs. Verbs go through ``verbs.apply``, the same call the API makes: this module
decides only what to *offer* (``verbs.allowed_verbs``) and how to show the outcome.

A new kind needs a subclass with ``kind_name`` (and optionally ``diagnostics = True``,
``version_fields``, ``summary_fields``, ``extra_list_display``, a start form), registered with
``admin.site.register``. See docs/admin.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.access import Action, ActionAdmin, allowed
from maas_domain.diagnostics import admin_diagnostics
from maas_domain.errors import Conflict, DomainError
from maas_domain.humanize import event_category, humanize_age, state_badge
from maas_domain.work import OPEN_STATES, WorkflowState
from workflows import family, verbs
from workflows.kinds import KINDS, WorkflowKind
from workflows.models import COMMON_FIELDS, Workflow

W = WorkflowState

# Destructive verbs go through a confirmation page showing the dry-run plan and asking why.
MAX_BULK = 500


@dataclass(frozen=True)
class Operation:
    """A kind-specific operator action beyond the seven verbs (e.g. decommission's
    force-release): offered when ``allowed(wf)``, run by ``run(request, wf, reason)`` which must
    call the kind's service (audited there) and return the workflow row."""

    name: str
    run: Callable[[HttpRequest, Any, str], Any]
    allowed: Callable[[Any], bool]
    destructive: bool = True
    help: str = ""
    maas_calls: tuple[str, ...] = ()


TIMELINE_LIMIT = 1000


# -- list filters (no query per render over the workflow table, except failure classes) ----------


class AttentionFilter(admin.SimpleListFilter):
    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("operator", "needs an operator (failed, manual intervention, worker lost)"),
            ("overdue", "waiting past its check-in"),
            ("open", "open (owns its host)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        if self.value() == "operator":
            return queryset.filter(
                Q(state__in=(W.FAILED, W.MANUAL_INTERVENTION))
                | Q(state=W.RUNNING, lease_expires_at__lte=now) & ~Q(lease_owner="")
            )
        if self.value() == "overdue":
            return queryset.filter(state=W.WAITING, next_check_at__lt=now - timedelta(minutes=1))
        if self.value() == "open":
            return queryset.filter(state__in=OPEN_STATES)
        return queryset


class StageFilter(admin.SimpleListFilter):
    """Stages come from the kind's definition, not from a DISTINCT over the table."""

    title = "stage"
    parameter_name = "stage"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        kind: WorkflowKind[Any] = model_admin.kind
        return [(n, n) for n in dict.fromkeys(s.name for s in kind.all_stages)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(stage=self.value()) if self.value() else queryset


class FailureClassFilter(admin.SimpleListFilter):
    """Failure classes present among failed rows (one indexed query)."""

    title = "failure class"
    parameter_name = "failure_class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        found = (
            model_admin.model.objects.filter(state=W.FAILED)
            .exclude(failure_class="")
            .order_by()
            .values_list("failure_class", flat=True)
            .distinct()
        )
        return [(c, c) for c in sorted(found)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(failure_class=self.value()) if self.value() else queryset


# -- the admin -------------------------------------------------------------------------------------


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=500,
        required=True,
        strip=True,
        widget=forms.TextInput(attrs={"size": 80, "placeholder": "why (kept in the audit log)"}),
        error_messages={"required": "Give a reason: it is kept in the audit log and timeline."},
    )


class WorkflowAdmin(ActionAdmin[Any]):
    """Generic pages for one workflow kind (set ``kind_name``)."""

    kind_name: ClassVar[str] = ""
    # Live MAAS diagnostics of the workflow's machine (loaded asynchronously on the page;
    # maas_domain/diagnostics.py admin_diagnostics)
    diagnostics = False
    version_fields: ClassVar[tuple[str, ...]] = ()
    # the common fields but those the page's header shows (state, stage, attempt)
    summary_fields: ClassVar[tuple[str, ...]] = (
        "hostname",
        "site",
        *(f for f in COMMON_FIELDS if f not in ("hostname", "state", "stage", "attempt")),
    )
    extra_list_display: ClassVar[tuple[str, ...]] = ()
    # Kind-specific actions offered next to the verbs (buttons, bulk actions, confirmation).
    operations: ClassVar[tuple[Operation, ...]] = ()
    # A start page (the admin's "add"): a form whose valid data ``start`` turns into a row.
    start_form: ClassVar[type[forms.Form] | None] = None

    list_display_links = ["id"]
    list_select_related = ["site"]
    # Substring search on the trigram-indexed columns (docs/operations.md); the id is matched in
    # get_search_results, as Django's "=id" would compare UPPER(id::text) on every row.
    search_fields = ["hostname", "maas_system_id", "correlation_id__exact"]
    ordering = ["-id"]
    sortable_by = ["id", "hostname", "state", "age"]
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # facet counts would scan 100,000s of rows
    list_per_page = 50
    list_max_show_all = 500
    change_list_template = "admin/workflow/change_list.html"
    actions: Any = []

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term.isascii() and term.isdigit() and len(term) < 19:
            found |= queryset.filter(pk=int(term))
        return found, may_have_duplicates

    # -- the kind -------------------------------------------------------------------------------

    @property
    def kind(self) -> WorkflowKind[Any]:
        return KINDS[self.kind_name]

    def start(self, request: HttpRequest, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def start_initial(self, request: HttpRequest) -> dict[str, Any]:
        """Values the start page opens with (e.g. from a link on another page)."""
        return {}

    def is_destructive(self, wf: Workflow, verb: str) -> bool:
        op = self._operation(verb)
        if op is not None:
            return op.destructive
        spec = verbs.VERBS.get(verb)
        return spec is None or spec.destructive

    def _operation(self, name: str) -> Operation | None:
        return next((op for op in self.operations if op.name == name), None)

    def action_of(self, name: str) -> Action:
        """A verb's or operation's action class (maas_domain/access.py): the same as the API."""
        op = self._operation(name)
        if op is not None:
            return Action.ADMIN if op.destructive else Action.OPERATE
        return verbs.access(name)

    def offered(self, wf: Workflow, request: HttpRequest | None = None) -> list[str]:
        """Verbs and operations allowed in the row's current state and, given a request, to its
        user (nothing else is shown)."""
        names = verbs.allowed_verbs(wf) + [op.name for op in self.operations if op.allowed(wf)]
        if request is None:
            return names
        return [n for n in names if allowed(request.user, self.action_of(n))]

    def _run(self, request: HttpRequest, wf: Workflow, name: str, reason: str) -> Any:
        op = self._operation(name)
        if op is None:
            return self.apply_verb(request, wf.pk, name, reason)["workflow"]
        return op.run(request, wf, reason)

    def _preview(self, request: HttpRequest, wf: Workflow, name: str) -> dict[str, Any]:
        """The dry-run plan of a verb, or an operation's declared MAAS calls."""
        op = self._operation(name)
        if op is None:
            return verbs.apply(self.kind, wf.pk, name, actor=request.user, dry_run=True)
        if not op.allowed(wf):
            raise Conflict(f"{name} is not allowed while the workflow is {wf.state}.")
        return {
            "from_stage": wf.stage,
            "attempt": wf.attempt,
            "maas_calls": list(op.maas_calls),
            "preconditions": [f"state is {wf.state}"],
        }

    def apply_verb(self, request: HttpRequest, pk: int, verb: str, reason: str) -> Any:
        """The one call: the same service the API's verb endpoint uses."""
        return verbs.apply(
            self.kind,
            pk,
            verb,
            actor=request.user,
            reason=reason,
            confirm=True,  # only reached after the confirmation page for destructive verbs
        )

    # -- list -----------------------------------------------------------------------------------

    def get_list_display(self, request: HttpRequest) -> Any:
        return [
            "id",
            "hostname",
            "site",
            *self.extra_list_display,
            "state_badge",
            "stage",
            "attempt",
            "age",
            "in_stage",
            "problem",
        ]

    def get_list_filter(self, request: HttpRequest) -> Any:
        return [AttentionFilter, "state", StageFilter, FailureClassFilter, "site"]

    @admin.display(description="state", ordering="state")
    def state_badge(self, wf: Workflow) -> SafeString:
        return state_badge(wf.state, "queued" if wf.state == W.PENDING else "")

    @admin.display(description="age", ordering="created_at")
    def age(self, wf: Workflow) -> str:
        return humanize_age(timezone.now() - wf.created_at)

    @admin.display(description="in stage")
    def in_stage(self, wf: Workflow) -> str:
        if wf.state not in OPEN_STATES or wf.stage_started_at is None:
            return "-"
        return humanize_age(timezone.now() - wf.stage_started_at)

    @admin.display(description="why")
    def problem(self, wf: Workflow) -> SafeString | str:
        """The whole reason, wrapped in its column (never cut: the end of a reason is often
        the part that says what to do)."""
        if wf.failure_class or wf.reason:
            text = f"{wf.failure_class}: {wf.reason}" if wf.failure_class else wf.reason
            return format_html('<span class="wf-why-cell">{}</span>', text)
        if wf.state == W.WAITING and wf.wait_system_id:
            return f"waiting on MAAS {wf.wait_system_id}"
        return ""

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not self.has_change_permission(request):
            return actions
        may = {
            n
            for n in [*verbs.VERBS, *(op.name for op in self.operations)]
            if allowed(request.user, self.action_of(n))
        }
        # When the list is filtered to one state, offer only the verbs allowed from it.
        state = request.GET.get("state__exact")
        for name, spec in verbs.VERBS.items():
            if (state and state not in spec.sources) or name not in may:
                continue
            func = self._bulk_action(name)
            actions[func.__name__] = (func, func.__name__, f"{name} selected {self.kind_name}s")
        for op in self.operations:
            if op.name not in may:
                continue
            func = self._bulk_action(op.name)
            actions[func.__name__] = (func, func.__name__, f"{op.name} selected {self.kind_name}s")
        return actions

    def _bulk_action(self, verb: str) -> Callable[..., Any]:
        def run(modeladmin: WorkflowAdmin, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
            return modeladmin.bulk_verb(request, queryset, verb)

        run.__name__ = f"verb_{verb.replace('-', '_')}"
        return run

    def bulk_verb(self, request: HttpRequest, queryset: QuerySet[Any], verb: str) -> Any:
        rows = list(queryset.order_by("pk")[: MAX_BULK + 1])
        if len(rows) > MAX_BULK:
            self.message_user(request, f"Select at most {MAX_BULK} rows.", messages.ERROR)
            return None
        destructive = any(self.is_destructive(wf, verb) for wf in rows)
        reason = "bulk action from the admin list"
        if destructive:
            form = ReasonForm(request.POST if request.POST.get("confirmed") == "yes" else None)
            if not form.is_valid():
                return self._confirm_page(request, rows, verb, form, bulk=True)
            reason = form.cleaned_data["reason"]
        done, skipped, failed = [], [], []
        for wf in rows:
            if verb not in self.offered(wf, request):
                skipped.append(f"{wf.pk} ({wf.state})")
                continue
            try:
                self._run(request, wf, verb, reason)
            except DomainError as exc:
                failed.append(f"{wf.pk}: {exc.message}")
            else:
                done.append(str(wf.pk))
        if done:
            self.message_user(request, f"{verb} applied to {len(done)}: {', '.join(done)}.")
        if skipped:
            self.message_user(
                request,
                f"{verb} is not allowed for {len(skipped)} (left unchanged): {', '.join(skipped)}.",
                messages.WARNING,
            )
        for line in failed:
            self.message_user(request, f"{verb} refused for {line}", messages.ERROR)
        return None

    # -- pages ----------------------------------------------------------------------------------

    def _help(self, name: str) -> str:
        op = self._operation(name)
        if op is not None:
            return op.help
        spec = verbs.VERBS.get(name)
        return spec.help if spec is not None else ""

    def get_urls(self) -> list[URLPattern]:
        info = self.model._meta.app_label, self.model._meta.model_name
        wrap = self.admin_site.admin_view
        return [
            path(
                "<int:pk>/verb/<str:verb>/",
                wrap(self.verb_view),
                name="{}_{}_verb".format(*info),
            ),
            path(
                "<int:pk>/diagnostics/",
                wrap(self.diagnostics_view),
                name="{}_{}_diagnostics".format(*info),
            ),
            *super().get_urls(),
        ]

    # what the start page needs (onboarding: operate; decommission: admin)
    add_action: ClassVar[Action] = Action.ADMIN
    change_action: ClassVar[Action] = Action.OPERATE  # then each verb's own class

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return self.start_form is not None and super().has_add_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # history stays; cancel is a verb

    def _load(self, request: HttpRequest, pk: Any) -> Any:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            return self.kind.load(int(pk))
        except (ValueError, self.model.DoesNotExist) as exc:
            raise Http404(f"No {self.kind_name} {pk}.") from exc

    def _url(self, name: str, *args: Any) -> str:
        info = self.model._meta.app_label, self.model._meta.model_name
        return reverse(f"admin:{info[0]}_{info[1]}_{name}", args=args)

    def _field_rows(self, wf: Workflow, names: Sequence[str]) -> list[tuple[str, Any]]:
        rows = []
        concrete = {f.name: f for f in self.model._meta.get_fields()}
        for name in names:
            if name not in concrete:
                continue
            value = getattr(wf, name)
            label = getattr(concrete[name], "verbose_name", name)
            rows.append((str(label), value if value not in ("", None) else "-"))
        return rows

    def _family_rows(self, wf: Workflow) -> list[tuple[str, Any]]:
        """The workflow this one runs for, and those it started (workflows/family.py), linked."""
        rows: list[tuple[str, Any]] = []
        if wf.parent_kind and wf.parent_id:
            rows.append(("run for", _workflow_link(wf.parent_kind, wf.parent_id)))
        for child in family.children(wf):
            rows.append(("started", _workflow_link(family.kind_of(child).name, child.pk)))
        return rows

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The workflow page (GET only: nothing on it is edited as a form)."""
        wf = self._load(request, object_id)
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(status=405, headers={"Allow": "GET"})
        can_act = self.has_change_permission(request, wf)
        events = list(wf.events.order_by("-at", "-id")[:TIMELINE_LIMIT])[::-1]
        stages = [s.name for s in self.kind.stages_for(wf)]  # this workflow's (its mode's)
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"{self.kind_name.capitalize()} {wf.pk}: {getattr(wf, 'hostname', '')}",
            "subtitle": None,
            "wf": wf,
            "kind": self.kind,
            "badge": state_badge(wf.state, "queued" if wf.state == W.PENDING else ""),
            "summary": self._field_rows(wf, self.summary_fields) + self._family_rows(wf),
            "versions": self._field_rows(wf, self.version_fields),
            "timeline": [(e, event_category(e.kind)) for e in events],
            "timeline_truncated": len(events) >= TIMELINE_LIMIT,
            "verbs": [
                {
                    "name": v,
                    "destructive": self.is_destructive(wf, v),
                    "help": self._help(v),
                    "url": self._url("verb", wf.pk, v),
                }
                for v in self.offered(wf, request)
            ]
            if can_act
            else [],
            "can_act": can_act,
            "diagnostics_url": self._url("diagnostics", wf.pk) if self.diagnostics else "",
            "age": humanize_age(timezone.now() - wf.created_at),
            "in_stage": self.in_stage(wf),
            "stages": stages,
            "stage_index": stages.index(wf.stage) if wf.stage in stages else -1,
            "checkpoint_index": stages.index(wf.checkpoint) if wf.checkpoint in stages else -1,
            "changelist_url": self._url("changelist"),
            "reports": self.report_panels(wf),
        }
        return TemplateResponse(request, "admin/workflow/detail.html", context)

    def report_panels(self, wf: Workflow) -> list[dict[str, Any]]:
        """Tables a kind shows above the timeline (an onboarding's hardware and acceptance
        reports): each ``{"id", "title", "columns", "rows": [{"passed", "cells"}]}``."""
        return []

    def diagnostics_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        wf = self._load(request, pk)
        if not self.diagnostics:
            raise Http404("No diagnostics for this kind.")
        data = admin_diagnostics(request, wf.site, wf.maas_system_id, since=wf.updated_at)
        return TemplateResponse(request, "admin/workflow/diagnostics.html", {"d": data, "wf": wf})

    def verb_view(self, request: HttpRequest, pk: int, verb: str) -> HttpResponse:
        wf = self._load(request, pk)
        if not self.has_change_permission(request, wf) or not allowed(
            request.user, self.action_of(verb)
        ):
            raise PermissionDenied
        if verb not in verbs.VERBS and self._operation(verb) is None:
            raise Http404(f"No verb {verb!r}.")
        back = self._url("change", wf.pk)
        destructive = self.is_destructive(wf, verb)
        if request.method != "POST":
            if not destructive:
                return HttpResponseRedirect(back)
            return self._confirm_page(request, [wf], verb, ReasonForm())
        reason = request.POST.get("reason", "").strip()[:500]
        if destructive:
            form = ReasonForm(request.POST)
            if request.POST.get("confirmed") != "yes" or not form.is_valid():
                return self._confirm_page(request, [wf], verb, form, status=400)
            reason = form.cleaned_data["reason"]
        try:
            if verb not in verbs.VERBS and verb not in self.offered(wf, request):
                raise Conflict(f"{verb} is not allowed while the workflow is {wf.state}.")
            after = self._run(request, wf, verb, reason)
        except DomainError as exc:
            self.message_user(request, f"{verb} refused: {exc.message}", messages.ERROR)
        else:
            self.message_user(
                request,
                f"{verb} applied by {request.user.get_username()}: now {after.state} at "
                f"{after.stage} (attempt {after.attempt}).",
            )
        return HttpResponseRedirect(back)

    def _confirm_page(
        self,
        request: HttpRequest,
        rows: list[Any],
        verb: str,
        form: ReasonForm,
        *,
        bulk: bool = False,
        status: int = 200,
    ) -> HttpResponse:
        """What will happen (each row's dry-run plan), and a required reason."""
        plans = []
        for wf in rows:
            try:
                plan = self._preview(request, wf, verb)
                plans.append({"wf": wf, "plan": plan, "refused": ""})
            except DomainError as exc:
                plans.append({"wf": wf, "plan": None, "refused": exc.message})
        if not bulk and plans[0]["refused"]:
            self.message_user(request, f"{verb} refused: {plans[0]['refused']}", messages.ERROR)
            return HttpResponseRedirect(self._url("change", rows[0].pk))
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Confirm {verb}",
            "subtitle": None,
            "verb": verb,
            "verb_help": self._help(verb),
            "plans": plans,
            "form": form,
            "bulk": bulk,
            "kind_name": self.kind_name,
            "action_name": f"verb_{verb.replace('-', '_')}",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "post_url": request.get_full_path(),
            "back_url": self._url("changelist") if bulk else self._url("change", rows[0].pk),
        }
        return TemplateResponse(request, "admin/workflow/confirm.html", context, status=status)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The start page: the kind's start form, handed to its start service."""
        if self.start_form is None or not self.has_add_permission(request):
            raise PermissionDenied
        form = self.start_form(request.POST or None, initial=self.start_initial(request))
        if request.method == "POST" and form.is_valid():
            try:
                wf = self.start(request, form.cleaned_data)
            except DomainError as exc:
                self._form_errors(form, exc)
            else:
                self.message_user(
                    request, f"{self.kind_name.capitalize()} {wf.pk} started for {wf.hostname}."
                )
                return HttpResponseRedirect(self._url("change", wf.pk))
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Start {self.kind_name}",
            "subtitle": None,
            "form": form,
        }
        return TemplateResponse(
            request, "admin/workflow/start.html", context, status=400 if form.errors else 200
        )

    # Service field names that differ from the form's (``site_id`` → ``site``).
    form_field_map: ClassVar[dict[str, str]] = {}

    def _form_errors(self, form: forms.Form, exc: DomainError) -> None:
        fields = exc.extra.get("fields") or {}
        placed = False
        for name, reasons in fields.items():
            target = self.form_field_map.get(name, name)
            if target in form.fields:
                for reason in reasons:
                    form.add_error(target, reason)
                placed = True
        if not placed:
            form.add_error(None, exc.message)


def _workflow_link(kind_name: str, pk: int) -> SafeString:
    model = KINDS[kind_name].model._meta
    url = reverse(f"admin:{model.app_label}_{model.model_name}_change", args=[pk])
    return format_html('<a href="{}">{} {}</a>', url, kind_name, pk)

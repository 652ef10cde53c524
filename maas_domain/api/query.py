"""What a route accepts in its query string, read from the OpenAPI document (docs/api.md,
"Query parameters"): a parameter the document does not declare for the operation is a 400 that
names it, on every API and health route, so a mistyped filter never acts on every row. The
document is generated from the views (drf-spectacular), so what is enforced and what is
documented are the same list by construction.

The same middleware runs ``?dry_run=true`` (maas_domain/api/dryrun.py): declared on every
state-changing admin operation, refused (as an unknown parameter) everywhere else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from maas_domain.api import dryrun

# Routes outside the OpenAPI document (the document itself, its two viewers, the health
# checks, the node agent's script): what each accepts, by URL name.
UNDOCUMENTED = {
    "api-schema": frozenset({"format", "lang"}),
    "api-docs": frozenset({"script"}),  # Swagger UI's start script (the split view)
    "api-redoc": frozenset(),
    "health-live": frozenset(),
    "health-ready": frozenset(),
    "node-agent-script": frozenset(),
}
STRICT_PREFIXES = ("/api/", "/health/")
# The longest path and query string an API route takes: past it a JSON 414. gunicorn's own
# limit (config/gunicorn.py, 8190 bytes for the whole request line) answers longer lines with
# its plain-text 414 before the request reaches Django (docs/api.md, "Limits").
MAX_TARGET = 4096


@dataclass(frozen=True)
class Accepted:
    """The query parameters of one operation: their names, and which may repeat (arrays)."""

    names: frozenset[str]
    repeatable: frozenset[str] = frozenset()


_table: dict[tuple[Callable[..., Any], str], Accepted] | None = None
_building = threading.Lock()


def documented() -> dict[tuple[Callable[..., Any], str], Accepted]:
    """(view callable, HTTP method) → what the operation's OpenAPI entry declares. Built once
    per process from the same generator that serves the document, by one thread: a web
    process's threads take their first requests at once, and drf-spectacular's generator is
    not safe to run in two threads together (it answered 500s under the engine budget test)."""
    global _table
    if _table is None:
        with _building:
            if _table is None:
                _table = _build()
    return _table


def _build() -> dict[tuple[Callable[..., Any], str], Accepted]:
    from drf_spectacular.generators import SchemaGenerator

    table: dict[tuple[Callable[..., Any], str], Accepted] = {}
    for urlconf in (None, "config.node_urls"):
        generator: Any = SchemaGenerator(urlconf=urlconf)  # type: ignore[no-untyped-call]
        paths = generator.get_schema(request=None, public=True)["paths"]
        for path, _regex, method, callback in generator.endpoints:
            key = generator.coerce_path(path, method, generator.create_view(callback, method))
            operation = paths.get(key, {}).get(method.lower())
            if operation is None:
                continue
            params = [p for p in operation.get("parameters", ()) if p["in"] == "query"]
            table[(callback, method)] = Accepted(
                frozenset(p["name"] for p in params),
                frozenset(p["name"] for p in params if p["schema"].get("type") == "array"),
            )
    return table


def accepted(request: HttpRequest, view: Callable[..., Any]) -> Accepted | None:
    """What this request's route accepts; None for a route that is not ours to check (an
    unknown path answers its 404 whatever the query)."""
    method = "GET" if request.method in ("HEAD", "OPTIONS") else str(request.method)
    found = documented().get((view, method))
    if found is not None:
        return found
    match = request.resolver_match
    name = match.url_name if match is not None else None
    if name in UNDOCUMENTED:
        return Accepted(UNDOCUMENTED[name])
    return None


def refusal(fields: dict[str, list[str]], detail: str) -> JsonResponse:
    return JsonResponse(
        {"error": "validation_error", "detail": detail, "fields": fields}, status=400
    )


def problems(request: HttpRequest, allowed: Accepted) -> JsonResponse | None:
    query = request.GET
    unknown = sorted(set(query) - allowed.names)
    if unknown:
        accepts = ", ".join(sorted(allowed.names)) or "no query parameters"
        reason = f"Unknown query parameter; this route accepts: {accepts}."
        return refusal(
            {name: [reason] for name in unknown},
            f"Unknown query parameter: {', '.join(unknown)}.",
        )
    repeated = sorted(
        name for name in query if name not in allowed.repeatable and len(query.getlist(name)) > 1
    )
    if repeated:
        return refusal(
            {name: ["Given more than once; it takes one value."] for name in repeated},
            f"Query parameter given more than once: {', '.join(repeated)}.",
        )
    return None


def dry_run_requested(request: HttpRequest) -> bool | JsonResponse:
    """``dry_run=true`` (1, yes), ``false`` (0, no); ``?dry_run`` with no value is a dry run:
    who typed the flag meant it. Anything else is a 400, never the real thing."""
    raw = request.GET.get("dry_run")
    if raw is None:
        return False
    value = raw.lower()
    if value in ("", "true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    return refusal({"dry_run": ["Must be true or false."]}, "Invalid query parameter.")


class QueryMiddleware:
    """Last in MIDDLEWARE: refuses undeclared query parameters, then runs a requested dry run
    (a rehearsal, or the view's own plan when the view lists the action in
    ``dry_run_plans``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(STRICT_PREFIXES):
            target = len(request.path.encode()) + len(request.META.get("QUERY_STRING", ""))
            if target > MAX_TARGET:
                return JsonResponse(
                    {
                        "error": "uri_too_long",
                        "detail": f"The path and query string are longer than {MAX_TARGET} "
                        "bytes; send fewer or shorter query parameters.",
                    },
                    status=414,
                )
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view: Callable[..., HttpResponse],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        if not request.path.startswith(STRICT_PREFIXES):
            return None
        allowed = accepted(request, view)
        if allowed is None:
            return None
        if refused := problems(request, allowed):
            return refused
        wanted = dry_run_requested(request) if "dry_run" in allowed.names else False
        if isinstance(wanted, JsonResponse):
            return wanted
        if not wanted:
            return None
        call: Callable[[], HttpResponse] = lambda: view(request, *args, **kwargs)  # noqa: E731
        if _plans_itself(view, str(request.method)):
            return dryrun.self_planned(call)
        return dryrun.rehearse(call)


def _plans_itself(view: Callable[..., Any], method: str) -> bool:
    cls = getattr(view, "cls", None)
    action = (getattr(view, "actions", None) or {}).get(method.lower())
    return action in getattr(cls, "dry_run_plans", ())

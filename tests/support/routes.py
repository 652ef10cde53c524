"""Every API route from the URL configuration (a route added later is covered at once)."""

from __future__ import annotations

import re
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver


def routes() -> list[tuple[str, str, str, list[str]]]:
    """(method, route name, regex, group names) for every API route, admin and node."""
    found: list[tuple[str, str, str, list[str]]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            regex = p.pattern.regex.pattern if hasattr(p.pattern, "regex") else str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + regex.lstrip("^"))
            elif isinstance(p, URLPattern):
                full = prefix + regex.lstrip("^")
                if not full.startswith("api/") or not p.name:
                    continue
                actions = getattr(p.callback, "actions", None)
                view = getattr(p.callback, "cls", None)
                declared = getattr(view, "http_method_names", ["get"])
                implemented = [m for m in declared if m != "options" and hasattr(view, m)]
                methods = list(actions) if actions else implemented or ["get"]
                groups = re.findall(r"\(\?P<(\w+)>", full)
                found.extend((m.upper(), p.name, full, groups) for m in methods)

    walk(get_resolver().url_patterns, "")
    return found

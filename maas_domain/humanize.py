"""What the admin pages show people: ages ("42s", "17m", "3h 5m", "2d 4h"), the colour class
of a timeline entry (a workflow's page and a node's page colour them alike), and one palette of
badges: workflow, node and drift states and drift severities share colours by meaning (red:
failed, quarantined, open critical; orange: cancelling, draining, warning; blue: running, info;
green: succeeded, active, cleared; grey: waiting for someone's turn), on every page and on the
fleet page."""

from __future__ import annotations

from datetime import timedelta

from django.utils.html import format_html
from django.utils.safestring import SafeString

from maas_domain.work import WorkflowState as W


def humanize_age(delta: timedelta | None) -> str:
    if delta is None:
        return "-"
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 90:
        return f"{seconds}s"
    if seconds < 90 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"


def event_category(kind: str, source: str = "workflow") -> str:
    """Timeline colouring: stage boundaries, retry decisions, MAAS, operator, the rest.
    ``source`` is a node timeline's (``workflow``, ``operator``, ``maas``)."""
    if source == "operator" or kind.startswith("operator."):
        return "operator"
    if kind.startswith("retry.") or kind.endswith(".retry") or "retry" in kind:
        return "retry"
    if source == "maas" or kind.startswith("maas."):
        return "maas"
    if kind.startswith("stage.") or kind.startswith("workflow."):
        return "stage"
    return "other"


# a workflow state's badge colour, on every page that shows one
STATE_COLOURS: dict[str, str] = {
    W.PENDING: "#6c757d",
    W.RUNNING: "#0b5ed7",
    W.WAITING: "#6f42c1",
    W.SUCCEEDED: "#198754",
    W.FAILED: "#dc3545",
    W.CANCELLING: "#c25e00",
    W.CANCELLED: "#495057",
    W.MANUAL_INTERVENTION: "#b02a37",
}


RED, ORANGE, BLUE, GREEN, GREY, PURPLE, DARK = (
    "#dc3545", "#c25e00", "#0b5ed7", "#198754", "#6c757d", "#6f42c1", "#495057"
)  # fmt: skip
NODE_STATE_COLOURS: dict[str, str] = {
    "registered": GREY,
    "provisioning": BLUE,
    "active": GREEN,
    "draining": ORANGE,
    "quarantined": RED,
    "retired": DARK,
}
SEVERITY_COLOURS: dict[str, str] = {"critical": RED, "warning": ORANGE, "info": BLUE}
DRIFT_STATE_COLOURS: dict[str, str] = {
    "open": RED,
    "acknowledged": GREY,
    "manual_intervention": STATE_COLOURS[W.MANUAL_INTERVENTION],
    "cleared": GREEN,
    "resolved": GREEN,
}


def badge(text: str, colour: str, css: str = "") -> SafeString:
    """A coloured label (server text escaped)."""
    return format_html(
        '<span class="wf-badge {}" style="background:{};color:#fff;border-radius:4px;'
        'padding:2px 8px;font-weight:600;white-space:nowrap">{}</span>',
        css,
        colour,
        text.replace("_", " "),
    )


def state_badge(state: str, label: str = "") -> SafeString:
    return format_html(
        '<span class="wf-badge wf-badge-{}" style="background:{};color:#fff;border-radius:4px;'
        'padding:2px 8px;font-weight:600;white-space:nowrap">{}</span>',
        state,
        STATE_COLOURS.get(state, "#6c757d"),
        (label or state).replace("_", " "),
    )

"""``maasctl tokens``: API tokens (list, create: shown once with what its scope allows, revoke)."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl import output
from maasctl.cli import STATE, body_of, confirm, listing, send, show
from maasctl.options import All, DryRun, Limit, Yes

app = typer.Typer(help="API tokens: list, create (shown once), revoke.")
COLUMNS = ("id", "name", "user", "prefix", "scope", "last_used_at", "expires_at", "active")
# What each scope allows (docs/security.md, T8); the user's role bounds it too.
SCOPES = {
    "read": "read only: every GET (lists, details, timelines); any change answers 403",
    "operate": "read, plus onboarding starts, retry/resume/rerun/adopt/mark-manual-intervention, "
    "probes, reconcile runs and drift resolution",
    "admin": "operate, plus decommissions, restart-clean and cancel, credentials, and site, "
    "profile, policy, SKU and RoCE changes",
}


UserOpt = Annotated[
    str | None,
    typer.Option("--user", help="A colleague's user name (admin role; default: yourself)."),
]


@app.command("list")
def tokens_list(user: UserOpt = None, limit: Limit = 100, every: All = False) -> None:
    """Your tokens (an admin: everyone's, or one user's with --user); never their values."""
    page = STATE.api.pages("/tokens", limit=None if every else limit, user=user)
    listing(page, COLUMNS, noun="tokens")


@app.command("create")
def tokens_create(
    name: str,
    user: UserOpt = None,
    scope: Annotated[
        str, typer.Option(help="read (the default: it can change nothing), operate or admin.")
    ] = "read",
    expires_in_days: Annotated[int | None, typer.Option(help="Default: the server's.")] = None,
    dry_run: DryRun = False,
) -> None:
    """Create a token for yourself or, with --user, for a colleague (its scope within their
    role). It is printed once (to stdout alone with -o json or yaml); what its scope allows is
    said on stderr."""
    body = body_of(name=name, user=user, scope=scope, expires_in_days=expires_in_days)
    made = send("POST", "/tokens", body, dry_run=dry_run, columns=COLUMNS)
    granted = str(made.get("scope", scope))
    allows = SCOPES.get(granted, "see docs/security.md")
    if STATE.fmt != "table":
        show(made)
    else:
        show({k: v for k, v in made.items() if k != "token"}, COLUMNS)
    output.warn(f"Scope {output.clean(granted)}: {allows}.")
    if granted != "admin":
        output.warn("(--scope operate or --scope admin makes a token that may do more)")
    if STATE.fmt == "table":
        holder = output.clean(made.get("user", ""))
        output.warn(f"The token for {holder} (shown only now; give it over a channel you trust):"
                    if user else "The token (shown only now):")  # fmt: skip
        output.say(output.clean(made["token"]))


@app.command("revoke")
def tokens_revoke(
    token: int,
    reason: Annotated[str, typer.Option()] = "",
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    confirm(f"revoke token {token}", yes or dry_run)
    answer = send("POST", f"/tokens/{token}/revoke", {"reason": reason}, dry_run=dry_run,
                  columns=COLUMNS)  # fmt: skip
    show(answer, COLUMNS)

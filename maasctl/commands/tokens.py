"""``maasctl tokens``: API tokens (list, create: shown once, revoke)."""

from __future__ import annotations

from typing import Annotated

import typer

from maasctl import output
from maasctl.cli import STATE, body_of, confirm, show
from maasctl.options import Limit, Yes

app = typer.Typer(help="API tokens: list, create (shown once), revoke.")
COLUMNS = ("id", "name", "user", "prefix", "scope", "last_used_at", "expires_at", "active")


@app.command("list")
def tokens_list(limit: Limit = 100) -> None:
    show(STATE.api.pages("/tokens", limit=limit), COLUMNS)


@app.command("create")
def tokens_create(
    name: str,
    scope: Annotated[str, typer.Option(help="read, operate or admin.")] = "read",
    expires_in_days: Annotated[int | None, typer.Option(help="Default: the server's.")] = None,
) -> None:
    """Create a token for yourself. It is printed once (to stdout alone with -o json or yaml)."""
    body = body_of(name=name, scope=scope, expires_in_days=expires_in_days)
    made = STATE.api.call("POST", "/tokens", body)
    if STATE.fmt != "table":
        show(made)
        return
    show({k: v for k, v in made.items() if k != "token"}, COLUMNS)
    output.errors.print("The token (shown only now):", markup=False)
    output.console.print(made["token"], markup=False, highlight=False, soft_wrap=True)


@app.command("revoke")
def tokens_revoke(
    token: int, reason: Annotated[str, typer.Option()] = "", yes: Yes = False
) -> None:
    confirm(f"revoke token {token}", yes)
    show(STATE.api.call("POST", f"/tokens/{token}/revoke", {"reason": reason}), COLUMNS)

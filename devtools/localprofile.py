"""The embedded stack's API token and maasctl profile (docs/cli.md, "Configuration").

The admin token ``make run`` prints is kept in ``<data>/api-token`` (0600) and reused at the
next start while it is valid for at least ``RENEW_DAYS`` more days, so an exported
``MAASCTL_TOKEN`` and the profile below survive restarts, a database reset too
(``devtools/freshstart.py``): a kept token the database no longer knows is registered again,
audited, with the expiry a new one would have. The profile is a table in maasctl's
own config file (``$MAASCTL_CONFIG`` or the user's ``~/.config/maasctl/config.toml``), as kind
and minikube add a context to kubectl's: ``[default]`` when the file has no ``[default]`` of
the user's, else ``[local]``; only a table carrying ``MARK`` is ever rewritten.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone

from maas_domain.auth import hash_token
from maas_domain.models import ApiToken
from maas_domain.services.tokens import api_token_create, api_token_revoke
from maasctl.config import config_path

TOKEN_NAME = "embedded"  # noqa: S105 (a label)
RENEW_DAYS = 7
MARK = "# written by make run (manage.py run_embedded): it rewrites this table at each start"
NAMES = ("default", "local", "make-run")
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def token_file(data_dir: Path) -> Path:
    return data_dir / "api-token"


def embedded_token(*, user: Any, data_dir: Path) -> tuple[str, bool]:
    """The admin token of the embedded stack: (token, whether it was minted now). The kept one
    while it is active and valid for RENEW_DAYS more days; else a new one (the old revoked)."""
    path = token_file(data_dir)
    raw = path.read_text().strip() if path.exists() else ""
    kept = None
    if raw:
        kept = ApiToken.objects.filter(
            key_hash=hash_token(raw),
            user=user,
            scope="admin",
            revoked_at__isnull=True,
            expires_at__gt=timezone.now() + timedelta(days=RENEW_DAYS),
        ).first()
    if raw and kept is None and _unknown(raw):  # the database was reset since: the same token
        kept = _register_again(user, raw)
    others = ApiToken.objects.filter(user=user, name=TOKEN_NAME, revoked_at__isnull=True)
    if kept is not None:
        others = others.exclude(pk=kept.pk)
    for old in others.values_list("pk", flat=True):
        api_token_revoke(actor=None, token_id=old, reason="embedded stack token replaced")
    if kept is not None:
        return raw, False
    _, raw = api_token_create(actor=None, user=user, name=TOKEN_NAME, scope="admin")
    _write_private(path, raw + "\n")
    return raw, True


def _unknown(raw: str) -> bool:
    """A well-formed token no row of this database has ever had (a revoked one is known)."""
    from maas_domain.auth import TOKEN_PREFIX

    shaped = raw.startswith(TOKEN_PREFIX) and 30 <= len(raw) <= 100 and raw.isprintable()
    return shaped and not ApiToken.objects.filter(key_hash=hash_token(raw)).exists()


def _register_again(user: Any, raw: str) -> ApiToken:
    """The kept token, in a database that was reset: a row for it, as ``api_token_create``
    writes one (the service draws a new value; this keeps the one the profile points at),
    audited."""
    from django.conf import settings
    from django.db import transaction

    from maas_domain import audit

    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=TOKEN_NAME,
            prefix=raw[:12],
            key_hash=hash_token(raw),
            scope="admin",
            expires_at=timezone.now() + timedelta(days=settings.API_TOKEN_DAYS),
            created_by=audit.actor_name(None),
        )
        audit.record(
            actor=None,
            action="api_token.create",
            target=token,
            after={"id": token.pk, "name": token.name, "prefix": token.prefix,
                   "user": user.get_username(), "scope": token.scope,
                   "expires_at": token.expires_at},
            reason="make run: the token kept in the data folder, in a database reset with the "
            "simulated MAAS",
        )  # fmt: skip
    return token


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    partial.replace(path)


def _tables(text: str) -> list[tuple[str | None, list[str]]]:
    """The file as (table name, its lines) in order; lines before any table have no name."""
    tables: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            tables.append((header.group(1).strip('"'), [line]))
        else:
            tables[-1][1].append(line)
    return tables


class ProfileError(Exception):
    """maasctl's config cannot take the profile (it is not TOML maasctl reads, or unwritable)."""


def write_profile(*, url: str, token_path: Path, config: Path | None = None) -> tuple[str, Path]:
    """Write the stack's profile into maasctl's config; (the profile's name, the file)."""
    path = config or config_path()
    try:
        return _write_profile(path, url=url, token_path=token_path)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path}: {exc}") from None


def _write_profile(path: Path, *, url: str, token_path: Path) -> tuple[str, Path]:
    text = path.read_text() if path.exists() else ""
    existing = tomllib.loads(text)  # a config maasctl cannot read is left alone
    tables = _tables(text)
    ours = {name for name, lines in tables if name and any(MARK in line for line in lines)}
    name = next(n for n in NAMES if n in ours or n not in existing)
    block = [f"[{name}]\n", f"{MARK}\n", f"url = {json.dumps(url)}\n",
             f"token_file = {json.dumps(str(token_path))}\n"]  # fmt: skip
    if name in ours:
        for i, (n, lines) in enumerate(tables):
            if n == name:  # a blank line that separated it from the next table stays
                tables[i] = (n, [*block, "\n"] if "".join(lines).endswith("\n\n") else block)
        text = "".join(line for _, lines in tables for line in lines)
    else:
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text else "") + "".join(block)
    tomllib.loads(text)  # still a config maasctl reads
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
    return name, path
